"""The SSA IR: types, the op table, Function/Value/Op, bind, text form, verifier.

May import ``config`` only: every other part of fusegrad builds on it, and the
array classes of higher layers (tracers, eager Tensors) register with ``bind``.
"""

from . import ops
from .bind import aval, bind, register_array_type
from .core import Builder, Function, Op, Value
from .errors import (
    FusegradError,
    IRParseError,
    ShapeError,
    TracerConversionError,
    TracerError,
    VerifyError,
)
from .evaluate import evaluate
from .optable import OPS, OpDef
from .parser import parse_function
from .printer import print_function
from .types import DTYPES, TensorType, dtype_name, parse_type
from .verifier import verify

__all__ = [
    "DTYPES",
    "OPS",
    "Builder",
    "Function",
    "FusegradError",
    "IRParseError",
    "Op",
    "OpDef",
    "ShapeError",
    "TensorType",
    "TracerConversionError",
    "TracerError",
    "Value",
    "VerifyError",
    "aval",
    "bind",
    "dtype_name",
    "evaluate",
    "ops",
    "parse_function",
    "parse_type",
    "print_function",
    "register_array_type",
    "verify",
]
