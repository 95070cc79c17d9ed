"""The SSA IR: types, the op table, Function/Value/Op, bind, text form, verifier.

May import ``config`` only: every other part of fusegrad builds on it, and the
array classes of higher layers (tracers, eager Tensors) register with ``bind``.
"""

import importlib

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


def __getattr__(name: str):
    # the text parser loads on first use: compiling its tokenizer takes milliseconds, and
    # tracing, differentiating and compiling never read IR text
    if name in ("parse_function", "parser"):
        parser = importlib.import_module(f"{__name__}.parser")
        return parser if name == "parser" else parser.parse_function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "parse_function", "parser"})
