"""``fg.sin(x)``, ``fg.sum(x, dim)``, ``fg.cat([...])``, ...: PyTorch's ``torch.*`` functions.

Most are the Tensor method of the same name (``fg.exp(x)`` is ``x.exp()``);
``cat``, ``stack`` and ``where`` combine several tensors (``where`` lives in
``tensor_math``, beside the ``Tensor.where`` method that calls it).
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir.bind import handler_for
from . import dual, record
from . import tensor_base as TB
from .creation import tensor
from .grad_mode import _mode
from .out_arg import write_out
from .tensor_math import _common, arg, composite, op
from .tensor_math import where as where  # fg.where: defined with the Tensor method it serves

#: ``fg.<name>(input, ...)`` is ``input.<name>(...)``.
METHOD_FUNCTIONS = (
    "abs", "absolute", "acos", "acosh", "add", "all", "allclose", "amax", "amin", "any",
    "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh", "bmm", "ceil", "chunk",
    "clamp", "clip", "clone", "cos", "cosh", "count_nonzero", "cumsum", "div", "divide", "dot",
    "equal", "eq", "erf", "exp", "expm1", "flatten", "flip", "floor", "floor_divide", "gather",
    "ge", "gt", "index_select", "isfinite", "isnan", "le", "lerp", "log", "log10", "log1p",
    "log2", "log_softmax", "logical_and", "logical_not", "logical_or", "logical_xor",
    "logsumexp", "lt", "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum", "mm",
    "mul", "multiply", "mv", "narrow", "ne", "neg", "negative", "norm", "outer",
    "permute", "pow", "prod", "reciprocal", "relu", "remainder", "reshape", "round", "rsqrt",
    "select", "sigmoid", "sign", "sin", "sinh", "softmax", "split", "sqrt", "square", "squeeze",
    "std", "sub", "subtract", "sum", "t", "tan", "tanh", "transpose", "true_divide", "unbind",
    "unsqueeze", "var",
)  # fmt: skip


#: keyword names of ``torch.<name>`` that its Tensor method spells differently
_KW_ALIASES = {"split": {"split_size_or_sections": "split_size"}, "dot": {"tensor": "other"},
               "true_divide": {"divisor": "other"}, "max": {"other": "dim"},
               "min": {"other": "dim"}}
#: the reflected operator of ``torch.<name>(number, tensor)``
_REFLECTED = {"add": "__radd__", "sub": "__rsub__", "mul": "__rmul__", "div": "__rtruediv__",
              "pow": "__rpow__"}
#: keyword arguments of ``torch.<name>`` that its Tensor method takes as ``*args``
_KW_POSITIONAL = {"flip": "dims", "permute": "dims", "reshape": "shape"}


def _method_function(name: str):
    aliases = _KW_ALIASES.get(name, {})
    varargs = _KW_POSITIONAL.get(name)

    def f(input, *args, out=None, **kwargs):
        for k in aliases.keys() & kwargs.keys():
            kwargs[aliases[k]] = kwargs.pop(k)
        if varargs in kwargs:
            args = (kwargs.pop(varargs), *args)
        if not isinstance(input, TB.TensorBase):
            if name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2") and \
                    args and isinstance(args[0], TB.TensorBase):
                input = arg(input)
            else:
                raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                                f"{type(input).__name__}")
        if isinstance(input, TB.TensorBase):
            res = getattr(input, name)(*args, **kwargs)
        elif name in _REFLECTED and len(args) == 1 and not kwargs:  # fg.pow(2, x) is 2 ** x
            res = getattr(args[0], _REFLECTED[name])(input)
        else:
            res = getattr(tensor(input), name)(*args, **kwargs)
        return res if out is None else write_out(name, out, res)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"``fusegrad.{name}(input, ..., out=None)`` is ``input.{name}(...)`` (PyTorch's "
                 "function); ``out=`` as in PyTorch (``out_arg``).")
    return f


for _name in METHOD_FUNCTIONS:
    globals()[_name] = _method_function(_name)


def cat(tensors, dim: int = 0, *, out=None):
    """Join tensors along an existing dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    res = op("cat", lambda: A.concatenate(_common(tensors), axis=dim))
    return res if out is None else write_out("cat", out, res)


concat = concatenate = cat


def stack(tensors, dim: int = 0, *, out=None):
    """Join tensors along a new dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tuple(arg(tensors[0]).shape)
    for t in tensors[1:]:
        if tuple(arg(t).shape) != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape)} "
                               f"and {list(arg(t).shape)}")
    d = TB._norm_dim(dim, len(shape) + 1)
    new = shape[:d] + (1,) + shape[d:]

    def join(*ts):
        return A.concatenate([A.reshape(t, new) for t in _common(ts)], axis=d)

    if out is None and _one_dtype(tensors):
        if _records_nothing(tensors):
            return TB.make(np.concatenate([t._cell.value.reshape(new) for t in tensors], axis=d))
        return composite("stack", ("stack", d, len(tensors)), join, *tensors)
    res = op("stack", lambda: join(*tensors))
    return res if out is None else write_out("stack", out, res)


def _one_dtype(tensors) -> bool:
    """Every one a Tensor, all of one dtype (``all`` is ``fg.all`` in this module)."""
    dts = {t._cell.value.dtype if isinstance(t, TB.TensorBase) else None for t in tensors}
    return len(dts) == 1 and None not in dts


def _records_nothing(tensors) -> bool:
    """Concrete arrays, nothing to record (no grad, no scope, trace or forward-mode level):
    NumPy computes what the generic path would."""
    if record._state.scope is not None or dual.ACTIVE[0] or handler_for(()) is not None:
        return False
    for t in tensors:  # noqa: SIM110 (``all`` is ``fg.all`` here)
        if type(t._cell.value) is not np.ndarray or (t._rg and _mode.grad):
            return False
    return True


def numel(input) -> int:
    return input.numel()


def broadcast_tensors(*tensors):
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def is_floating_point(input) -> bool:
    return input.is_floating_point()
