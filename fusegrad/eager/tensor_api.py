"""Everything the eager Tensor adds to the top-level ``fusegrad`` namespace (PyTorch's names)."""

import math

from .creation import *  # noqa: F403
from .creation import __all__ as _creation_all
from .device import (
    accelerator,
    backends,
    cuda,
    device,
    get_default_device,
    set_default_device,
)
from .diagonal import diagonal
from .dtypes import (
    bool,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    result_type,
    set_default_dtype,
    short,
    uint8,
)
from .functions import *  # noqa: F403
from .functions import (
    METHOD_FUNCTIONS,
    broadcast_tensors,
    cat,
    concat,
    concatenate,
    is_floating_point,
    numel,
    stack,
    where,
)
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .inplace_functions import *  # noqa: F403
from .inplace_functions import INPLACE_FUNCTIONS
from .post_accumulate import register_post_accumulate_grad_hook as _post_accumulate  # noqa: F401
from .selection import multinomial, topk
from .sorting import argsort, sort
from .tensor import (
    BoolTensor,
    ByteTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    Tensor,
)
from .tensor_base import Size
from .triangles import tril, triu

pi, e, inf, nan = math.pi, math.e, math.inf, math.nan

__all__ = [
    *_creation_all, *METHOD_FUNCTIONS, *INPLACE_FUNCTIONS, "argsort", "diagonal",
    "multinomial", "sort", "topk", "tril", "triu",
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
    "IntTensor", "LongTensor", "Size", "Tensor", "bool", "broadcast_tensors", "cat", "concat",
    "concatenate", "double", "dtype", "enable_grad", "float", "float16", "float32", "float64",
    "get_default_dtype", "half", "inference_mode", "int", "int8", "int16", "int32", "int64",
    "is_floating_point", "is_grad_enabled", "is_inference_mode_enabled", "long", "no_grad",
    "numel", "promote_types", "result_type", "set_default_dtype", "set_grad_enabled", "short",
    "stack", "uint8", "where",
    "accelerator", "backends", "cuda", "device", "e", "get_default_device", "inf", "nan", "pi",
    "set_default_device",
    "cdouble", "cfloat", "complex64", "complex128",
]  # fmt: skip
