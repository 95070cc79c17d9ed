"""Arithmetic, elementwise math, comparisons and reductions of the eager Tensor.

Each method is one user-facing operation (``record.operation``): it applies
PyTorch's type promotion, binds IR ops through ``fusegrad.ir`` and becomes one
autograd node named as in ``names.NAMES``. Semantics follow PyTorch's Tensor
methods (``dim``/``keepdim``; ``max(dim)`` returns ``(values, indices)``);
where PyTorch leaves a convention open the project's single convention applies
(ties in ``max``/``min`` share the gradient evenly, as ``max()`` does in PyTorch).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import ops
from ..ir.types import dtype_name
from . import dtypes as D
from . import fast, replay
from . import tensor_base as TB
from .creation import from_numpy, tensor
from .names import NAMES
from .out_arg import write_out
from .record import operation
from .recorded import OpNode, scalar_edges

_PY_NAMES = {"f": "Float", "i": "Long", "b": "Bool"}


def op(key: str, fn, *args, view: bool = False):
    """Run ``fn(*args)`` as the user-facing operation ``key`` (one node named ``NAMES[key]``)."""
    return operation(NAMES[key], fn, *args, view=view)


def composite(key: str, structure, fn, *args):
    """``fn(*args)`` as the operation ``key``, where the ops ``fn`` binds depend only on
    ``structure`` and the Tensor arguments' types: replayed without the dispatch
    (``replay``)."""
    return replay.run(NAMES[key], structure, fn, *args)


def arg(x):
    """A method argument as a Tensor or a Python scalar (lists and arrays become Tensors)."""
    if isinstance(x, TB.TensorBase | bool | int | float | complex):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray | list | tuple):
        return tensor(x)
    raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")


def cast(x, dt):
    """``x`` (Tensor or Python scalar) as dtype ``dt``; scalars stay weak Python numbers."""
    if isinstance(x, TB.TensorBase) and x._data.dtype != np.dtype(dt):
        return ops.convert(x, dtype=dtype_name(np.dtype(dt)))
    return x


def _common(tensors):
    tensors = [arg(t) for t in tensors]
    dt = D.result_type(*tensors)
    return [cast(t, dt) for t in tensors]


def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` is true, else ``other``; with one argument, the indices
    of the nonzero elements (a tuple of int64 tensors)."""
    if input is None and other is None:
        return tuple(from_numpy(i.astype(np.int64)) for i in
                     np.nonzero(arg(condition).detach().numpy()))
    condition = arg(condition)
    if condition._data.dtype != np.bool_:
        condition = ops.ne(condition, 0)
    res = op("where", lambda: ops.select(condition, *_common([input, other])))
    return res if out is None else write_out("where", out, res)


def to_float(x):
    """Integer and boolean tensors as the default float dtype (what PyTorch's math gives)."""
    if x._data.dtype.kind in "fc":
        return x
    return cast(x, D.get_default_dtype())


def binary(key: str, irop: str, a, b):
    out = fast.run2(key, irop, a, b)
    if out is not None:
        return out
    return _binary(key, irop, a, b)


def _binary(key: str, irop: str, a, b):
    """``binary`` on the generic path (promotion, ``operation``)."""
    a, b = arg(a), arg(b)
    dt = D.result_type(a, b)
    if irop == "div" and not (dt.is_floating_point or dt.is_complex):
        dt = D.get_default_dtype()
    out = operation(NAMES[key], lambda: getattr(ops, irop)(cast(a, dt), cast(b, dt)),
                    distinct=True)
    edges = scalar_edges(key, (a, b))
    node = out._grad_fn if isinstance(out, TB.TensorBase) else None
    if edges and isinstance(node, OpNode) and node._nin == 1 and len(node._next) == 1:
        node._next += edges
    return out


def unary(key: str, irop: str, x):
    """The float math operation ``key``: IR op ``irop`` on ``x`` (integers become floats)."""
    out = fast.run1(key, irop, x)
    if out is not None:
        return out
    return op(key, lambda: getattr(ops, irop)(to_float(x)))


def compare(irop: str, a, b):
    a, b = arg(a), arg(b)
    dt = D.result_type(a, b)
    return getattr(ops, irop)(cast(a, dt), cast(b, dt))


def _dims(dim):
    if dim is None or (isinstance(dim, tuple | list) and len(dim) == 0):
        return None
    if isinstance(dim, tuple | list):
        return tuple(int(d) for d in dim)
    return int(dim)


def _np_dtype(dtype):
    return None if dtype is None else np.dtype(D.as_dtype(dtype))


def _safe_root(s, p: float):
    """``s ** (1/p)`` with gradient 0 where ``s == 0`` (PyTorch's norm'(0) = 0)."""
    zero = s == 0
    root = ops.sqrt(ops.select(zero, 1, s)) if p == 2 else ops.select(zero, 1, s) ** (1.0 / p)
    return ops.select(zero, 0, root)


def _type_name(dt) -> str:
    return {np.dtype(np.float64): "Double", np.dtype(np.int32): "Int"}.get(
        np.dtype(dt), _PY_NAMES.get(np.dtype(dt).kind, str(np.dtype(dt))))


class TensorMath:
    """Mixin of ``fusegrad.Tensor``: arithmetic, math and reductions (PyTorch semantics)."""

    __slots__ = ()

    # --- arithmetic -----------------------------------------------------------------

    def add(self, other, *, alpha=1):
        return binary("add", "add", self, other if alpha == 1 else _scaled(other, alpha))

    def sub(self, other, *, alpha=1):
        return binary("sub", "sub", self, other if alpha == 1 else _scaled(other, alpha))

    subtract = sub

    def mul(self, other):
        return binary("mul", "mul", self, other)

    multiply = mul

    def div(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return binary("div", "div", self, other)
        if rounding_mode == "floor":
            return compare("floor_divide", self, other)
        if rounding_mode == "trunc":
            q = binary("div", "div", self, other).detach()
            return cast(ops.sign(q) * ops.floor(ops.abs(q)), D.result_type(self, arg(other)))
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                         f"found '{rounding_mode}'")

    divide = true_divide = div

    def __add__(self, other):
        out = fast.run2("add", "add", self, other)
        return out if out is not None else _binary("add", "add", self, other)

    def __radd__(self, other):
        out = fast.run2("add", "add", other, self)
        return out if out is not None else _binary("add", "add", other, self)

    def __sub__(self, other):
        out = fast.run2("sub", "sub", self, other)
        return out if out is not None else _binary("sub", "sub", self, other)

    def __rsub__(self, other):
        out = fast.run2("rsub", "sub", other, self)
        return out if out is not None else _binary("rsub", "sub", other, self)

    def __mul__(self, other):
        out = fast.run2("mul", "mul", self, other)
        return out if out is not None else _binary("mul", "mul", self, other)

    def __rmul__(self, other):
        out = fast.run2("mul", "mul", other, self)
        return out if out is not None else _binary("mul", "mul", other, self)

    def __truediv__(self, other):
        out = fast.run2("div", "div", self, other)
        return out if out is not None else _binary("div", "div", self, other)

    def __rtruediv__(self, other):
        return self.reciprocal() * other  # as PyTorch: ReciprocalBackward0, then MulBackward0

    def __floordiv__(self, other):
        return compare("floor_divide", self, other)

    def __rfloordiv__(self, other):
        return compare("floor_divide", other, self)

    floor_divide = __floordiv__

    def __mod__(self, other):
        return binary("remainder", "remainder", self, other)

    def __rmod__(self, other):
        return binary("remainder", "remainder", other, self)

    remainder = __mod__

    def pow(self, exponent):
        key = "pow_tensor" if isinstance(exponent, TB.TensorBase) else "pow"
        return binary(key, "pow", self, exponent)

    __pow__ = pow

    def __rpow__(self, other):
        return binary("rpow", "pow", other, self)

    def __neg__(self):
        if self._data.dtype == np.bool_:
            raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. "
                               "If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        out = fast.run1("neg", "neg", self)
        return out if out is not None else op("neg", ops.neg, self)

    neg = negative = __neg__

    def __pos__(self):
        return self

    def __abs__(self):
        return op("abs", ops.abs, self)

    abs = absolute = __abs__

    def __matmul__(self, other):
        return self.matmul(other)

    def __rmatmul__(self, other):
        return arg(other).matmul(self)

    # --- comparisons and logic ------------------------------------------------------

    def eq(self, other):
        return compare("eq", self, other)

    def ne(self, other):
        return compare("ne", self, other)

    def lt(self, other):
        return compare("lt", self, other)

    def le(self, other):
        return compare("le", self, other)

    def gt(self, other):
        return compare("gt", self, other)

    def ge(self, other):
        return compare("ge", self, other)

    __eq__, __ne__, __lt__, __le__, __gt__, __ge__ = eq, ne, lt, le, gt, ge
    __hash__ = TB.TensorBase.__hash__
    greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne

    def equal(self, other) -> bool:
        """True if ``other`` has the same shape and elements."""
        other = arg(other)
        return tuple(self.shape) == tuple(other.shape) and bool(self.eq(other).all())

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
        return bool(np.allclose(self.detach().numpy(), arg(other).detach().numpy(), rtol, atol,
                                equal_nan))

    def isnan(self):
        return ops.isnan(self)

    def isfinite(self):
        return ops.isfinite(self)

    def logical_not(self):
        return ops.logical_not(_truth(self))

    def logical_and(self, other):
        return ops.logical_and(_truth(self), _truth(arg(other)))

    def logical_or(self, other):
        return ops.logical_or(_truth(self), _truth(arg(other)))

    def logical_xor(self, other):
        return ops.logical_xor(_truth(self), _truth(arg(other)))

    def _bool_op(self, other, name):
        other = arg(other)
        if self._data.dtype != np.bool_ or np.dtype(D.result_type(other)) != np.bool_:
            raise TypeError(f"bitwise {name} is only supported on bool tensors in fusegrad")
        return getattr(self, {"&": "logical_and", "|": "logical_or", "^": "logical_xor"}[name])(
            other)

    def __and__(self, other):
        return self._bool_op(other, "&")

    def __or__(self, other):
        return self._bool_op(other, "|")

    def __xor__(self, other):
        return self._bool_op(other, "^")

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self):
        if self._data.dtype != np.bool_:
            raise TypeError("~ is only supported on bool tensors in fusegrad")
        return ops.logical_not(self)

    bitwise_not = __invert__

    # --- elementwise math -------------------------------------------------------------

    def exp(self):
        return unary("exp", "exp", self)

    def expm1(self):
        return unary("expm1", "expm1", self)

    def log(self):
        return unary("log", "log", self)

    def log1p(self):
        return unary("log1p", "log1p", self)

    def log2(self):
        return op("log2", lambda: ops.log(to_float(self)) / math.log(2.0))

    def log10(self):
        return op("log10", lambda: ops.log(to_float(self)) / math.log(10.0))

    def sqrt(self):
        return unary("sqrt", "sqrt", self)

    def rsqrt(self):
        return op("rsqrt", lambda: ops.div(1.0, ops.sqrt(to_float(self))))

    def sin(self):
        return unary("sin", "sin", self)

    def cos(self):
        return unary("cos", "cos", self)

    def tan(self):
        return unary("tan", "tan", self)

    def asin(self):
        return unary("asin", "arcsin", self)

    def acos(self):
        return unary("acos", "arccos", self)

    def atan(self):
        return unary("atan", "arctan", self)

    def sinh(self):
        return unary("sinh", "sinh", self)

    def cosh(self):
        return unary("cosh", "cosh", self)

    def tanh(self):
        return unary("tanh", "tanh", self)

    def asinh(self):
        return unary("asinh", "arcsinh", self)

    def acosh(self):
        return unary("acosh", "arccosh", self)

    def atanh(self):
        return unary("atanh", "arctanh", self)

    arcsin, arccos, arctan = asin, acos, atan
    arcsinh, arccosh, arctanh = asinh, acosh, atanh

    def sigmoid(self):
        return unary("sigmoid", "logistic", self)

    def relu(self):
        """max(x, 0) with relu'(0) = 0."""
        return composite("relu", None, _relu, self)

    def erf(self):
        return unary("erf", "erf", self)

    def reciprocal(self):
        out = fast.run2("reciprocal", "div", 1.0, self)
        return out if out is not None else op("reciprocal", lambda: ops.div(1.0, to_float(self)))

    def square(self):
        return op("square", lambda: ops.pow(self, 2))

    def sign(self):
        return ops.sign(self)

    def floor(self):
        return ops.floor(self)

    def ceil(self):
        return ops.ceil(self)

    def round(self, *, decimals: int = 0):
        """Round half to even; ``decimals`` digits after the point (negative: before)."""
        if not decimals:
            return ops.round(self)
        scale = 10.0 ** decimals
        return ops.round(to_float(self) * scale) / scale

    def atan2(self, other):
        return binary("atan2", "atan2", to_float(self), other)

    arctan2 = atan2

    def maximum(self, other):
        return binary("maximum", "maximum", self, other)

    def minimum(self, other):
        return binary("minimum", "minimum", self, other)

    def clamp(self, min=None, max=None):
        """Limit to [min, max]; the gradient passes at the bounds (PyTorch's clamp)."""
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        if isinstance(min, TB.TensorBase) or isinstance(max, TB.TensorBase):
            lo = -math.inf if min is None else min
            hi = math.inf if max is None else max
            return op("clamp", lambda: ops.clamp(*_promoted(self, lo, hi)))
        key = "clamp" if min is not None and max is not None else (
            "clamp_min" if max is None else "clamp_max")
        lo, hi = _bounds(self, min, max)
        out = fast.untracked("clamp", self, lo, hi)
        return out if out is not None else op(key, lambda: ops.clamp(*_promoted(self, lo, hi)))

    clip = clamp

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)

    def where(self, condition, other):
        return where(condition, self, other)

    def masked_fill(self, mask, value):
        value = arg(value)
        if isinstance(mask, TB.TensorBase) and type(value) in (float, int, bool):
            # the value is a constant of the recording: part of the structure (NaN by name)
            return composite("masked_fill", ("fill", type(value), repr(value)),
                             lambda x, m: ops.select(m, *_promoted(x, value)[::-1]), self, mask)
        return op("masked_fill", lambda: ops.select(mask, *_promoted(self, value)[::-1]))

    def lerp(self, end, weight):
        return op("lerp", lambda: self + arg(weight) * (arg(end) - self))


def _relu(x):
    return ops.select(x <= 0, 0, x)  # NaN stays NaN, relu'(0) = 0


def _scaled(other, alpha):
    other = arg(other)
    return other * alpha


def _truth(x):
    if not isinstance(x, TB.TensorBase):
        return np.asarray(x) != 0
    return x if x._data.dtype == np.bool_ else ops.ne(x, 0)


def _promoted(*xs):
    xs = [arg(x) for x in xs]
    dt = D.result_type(*xs)
    return [cast(x, dt) for x in xs]


def _bounds(x, lo, hi):
    if x._data.dtype.kind == "f":
        return (-math.inf if lo is None else lo), (math.inf if hi is None else hi)
    info = np.iinfo(x._data.dtype) if x._data.dtype != np.bool_ else None
    return (info.min if lo is None else lo), (info.max if hi is None else hi)
