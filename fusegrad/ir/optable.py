"""The op vocabulary: one table of every primitive op.

Each entry gives the op's name, arity, attribute names, shape/dtype rule, how
``bind`` promotes its operands, and its NumPy reference implementation. That
table *is* the semantics: the interpreter runs the implementations, the
autodiff pass and code generator key their own rules by these names.

The entries are made here (the control-flow ones in ``control_ops``, imported at
the end); the table itself (``OPS``, ``OpDef``) lives in ``opdef``, which ``bind``
reads, so that region ops here can run their regions through ``evaluate`` (which
binds) without an import cycle.
"""

from __future__ import annotations

import numpy as np

from . import shapes as S
from .evaluate import evaluate
from .numpy_pow import power
from .opdef import OPS, OpDef, _def
from .threefry import threefry2x32, threefry_rule
from .types import DTYPES


def _scipy_special(fname):
    def impl(x):
        from scipy import special

        return getattr(special, fname)(x)

    impl.__name__ = fname
    return impl


# --- elementwise, one operand ------------------------------------------------------
_FLOAT_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arcsin": np.arcsin,
    "arccos": np.arccos,
    "arctan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "arcsinh": np.arcsinh,
    "arccosh": np.arccosh,
    "arctanh": np.arctanh,
    "sqrt": np.sqrt,
    "cbrt": np.cbrt,
    "erf": _scipy_special("erf"),
    "logistic": _scipy_special("expit"),
}
for _n, _f in _FLOAT_UNARY.items():
    _rule = S.real_elementwise(_n) if _n == "erf" else S.elementwise(_n, need="float")
    _def(_n, 1, _rule, _f, "elementwise", promote="float")

_SAME_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
}
for _n, _f in _SAME_UNARY.items():
    _def(_n, 1, S.elementwise(_n), _f, "elementwise", promote="same")

_def("isnan", 1, S.elementwise("isnan", out="bool"), np.isnan, "elementwise", promote="same")
_def(
    "isfinite", 1, S.elementwise("isfinite", out="bool"), np.isfinite, "elementwise",
    promote="same",
)
_def(
    "logical_not", 1, S.elementwise("logical_not", need="bool"), np.logical_not,
    "elementwise", promote="same",
)

# --- elementwise, two or three operands (NumPy broadcasting) -----------------------
_SAME_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "pow": power,  # np.power, with small integer exponents multiplied (numpy_pow)
    "maximum": np.maximum,
    "minimum": np.minimum,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
}
for _n, _f in _SAME_BINARY.items():
    _def(_n, 2, S.elementwise(_n), _f, "elementwise", promote="same")

_def("div", 2, S.elementwise("div", need="float"), np.true_divide, "elementwise", promote="float")
_def("atan2", 2, S.elementwise("atan2", need="float"), np.arctan2, "elementwise", promote="float")

_COMPARE = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}
for _n, _f in _COMPARE.items():
    _def(_n, 2, S.elementwise(_n, out="bool"), _f, "elementwise", promote="same")

for _n, _f in {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}.items():
    _def(_n, 2, S.elementwise(_n, need="bool"), _f, "elementwise", promote="same")

_def("select", 3, S.select_rule, np.where, "elementwise", promote="select",
     doc="select(c, a, b): a where c is true, else b")


def _clamp(x, lo, hi):
    return np.minimum(np.maximum(x, lo), hi)


_def("clamp", 3, S.elementwise("clamp"), _clamp, "elementwise", promote="same",
     doc="clamp(x, lo, hi) = min(max(x, lo), hi); the gradient passes at the bounds")


_def("threefry2x32", 4, threefry_rule, threefry2x32, "elementwise", attrs=("word",),
     promote="same",
     doc="threefry2x32(k0, k1, c0, c1, word): word 0 or 1 of the Threefry-2x32-20 hash of "
         "counter (c0, c1) under key (k0, k1); int64 operands (low 32 bits read), int64 "
         "result in [0, 2**32) (see fusegrad.ir.threefry)")


def _constant(*, value, dtype):
    if isinstance(value, str):  # a complex constant read back from the text form
        value = complex(value)
    return np.asarray(value, dtype=DTYPES[dtype])


def _convert(x, *, dtype):
    x = np.asarray(x)
    if x.dtype.kind == "c" and DTYPES[dtype].kind != "c":
        x = x.real  # complex -> real keeps the real part (no ComplexWarning)
    return x.astype(DTYPES[dtype])


_def("constant", 0, S.constant_rule, _constant, "elementwise", attrs=("value", "dtype"))
_def("iota", 0, S.iota_rule, lambda *, n, dtype: np.arange(n, dtype=DTYPES[dtype]), "creation",
     attrs=("n", "dtype"), doc="arange(n): 0, 1, ..., n - 1")
_def("convert", 1, S.convert_rule, _convert, "elementwise", attrs=("dtype",))
_def("stop_gradient", 1, S.identity_rule, np.array, "elementwise",
     doc="identity whose gradient is zero")

# --- reductions --------------------------------------------------------------------


def _reducer(f):
    def impl(x, *, axes):
        return f(x, axis=tuple(axes))

    impl.__name__ = f.__name__
    return impl


_def("reduce_sum", 1, S.reduce_rule("reduce_sum"), _reducer(np.sum), "reduction",
     attrs=("axes",))
_def("reduce_max", 1, S.reduce_rule("reduce_max"), _reducer(np.max), "reduction",
     attrs=("axes",))
_def("reduce_min", 1, S.reduce_rule("reduce_min"), _reducer(np.min), "reduction",
     attrs=("axes",))
_def("argmax", 1, S.arg_reduce_rule("argmax"), lambda x, *, axis: np.argmax(x, axis=axis),
     "reduction", attrs=("axis",))
_def("argmin", 1, S.arg_reduce_rule("argmin"), lambda x, *, axis: np.argmin(x, axis=axis),
     "reduction", attrs=("axis",))
_def("cumsum", 1, S.cumsum_rule, lambda x, *, axis: np.cumsum(x, axis=axis, dtype=x.dtype),
     "scan", attrs=("axis",))

# --- shape ops ---------------------------------------------------------------------


def _slices(starts, stops, steps):
    """Python slices for ``range(start, stop, step)`` per axis (stop -1 = before index 0)."""
    return tuple(slice(a, None if b < 0 else b, c) for a, b, c in zip(starts, stops, steps))


def _update_slice(x, v, *, starts, stops, steps):
    out = np.array(x, copy=True)
    out[_slices(starts, stops, steps)] = v
    return out


_def("reshape", 1, S.reshape_rule, lambda x, *, shape: np.reshape(x, shape), "shape",
     attrs=("shape",))
_def("transpose", 1, S.transpose_rule, lambda x, *, perm: np.transpose(x, perm), "shape",
     attrs=("perm",))
_def("broadcast_to", 1, S.broadcast_to_rule, lambda x, *, shape: np.broadcast_to(x, shape),
     "shape", attrs=("shape",))
_def("slice", 1, S.slice_rule,
     lambda x, *, starts, stops, steps: x[_slices(starts, stops, steps)], "shape",
     attrs=("starts", "stops", "steps"),
     doc="x[start:stop:step, ...]: per axis the indices range(start, stop, step), "
         "already normalised (no negative wrap-around)")
_def("update_slice", 2, S.update_slice_rule, _update_slice, "shape",
     attrs=("starts", "stops", "steps"), doc="x with x[slices] replaced by v")
_def("concatenate", None, S.concatenate_rule,
     lambda *xs, axis: np.concatenate(xs, axis=axis), "shape", attrs=("axis",))

# --- indexing (gather / scatter along one axis) -------------------------------------


def _check_bounds(name, x, idx, axis):
    n = x.shape[axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].flat[0]
        raise IndexError(f"{name}: index {bad} is out of bounds for axis {axis} with size {n}")


def _take(x, idx, *, axis):
    _check_bounds("take", x, idx, axis)
    return np.take(x, idx, axis=axis)


def _index_update(accumulate):
    def impl(x, idx, v, *, axis):
        _check_bounds("index_add" if accumulate else "index_set", x, idx, axis)
        out = np.array(x, copy=True)
        moved = np.moveaxis(out, axis, 0)
        vals = np.moveaxis(v, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
        if accumulate:
            np.add.at(moved, idx, vals)
        else:
            moved[idx] = vals
        return out

    return impl


_def("take", 2, S.take_rule, _take, "index", attrs=("axis",),
     doc="np.take(x, idx, axis): gather along one axis, indices bounds-checked")
_def("index_add", 3, S.index_update_rule("index_add"), _index_update(True), "index",
     attrs=("axis",), doc="x with v added at idx along axis (repeated indices accumulate)")
_def("index_set", 3, S.index_update_rule("index_set"), _index_update(False), "index",
     attrs=("axis",), doc="x with v written at idx along axis")

# --- contraction -------------------------------------------------------------------
_def("matmul", 2, S.matmul_rule, np.matmul, "contraction", promote="same",
     doc="batched matrix product, batch dimensions broadcast; rank >= 2")


# --- region ops ------------------------------------------------------------------


def _custom_vjp_rule(types, *, num_out, regions):
    fwd, bwd = regions
    nf = len(fwd.params)
    if tuple(types[:nf]) != fwd.in_types or tuple(types[nf:]) != bwd.in_types[
        len(bwd.in_types) - (len(types) - nf) :
    ]:
        raise S.ShapeError(
            f"custom_vjp_call: operands {S.fmt(types)} do not match the forward rule's "
            f"parameters {S.fmt(fwd.in_types)}"
        )
    return fwd.out_types


def _custom_vjp_impl(*args, num_out, regions):
    fwd = regions[0]
    out = evaluate(fwd, *args[: len(fwd.params)])
    return out[0] if len(out) == 1 else out


_def("custom_vjp_call", None, _custom_vjp_rule, _custom_vjp_impl, "region",
     attrs=("num_out",),
     doc="a function with a user-defined VJP: regions (fwd, bwd); operands are fwd's "
         "parameters then bwd's closed-over values; results are fwd's: num_out primal "
         "outputs, then the residuals bwd receives")


def _fused_rule(types, *, regions):
    (body,) = regions
    if tuple(types) != body.in_types:
        raise S.ShapeError(
            f"fused: operands {S.fmt(types)} do not match the kernel's parameters "
            f"{S.fmt(body.in_types)}"
        )
    return body.out_types


def _fused_impl(*args, regions):
    out = evaluate(regions[0], *args)
    return out[0] if len(out) == 1 else out


_def("fused", None, _fused_rule, _fused_impl, "region",
     doc="one fused loop nest (made by passes.fusion after differentiation): its region "
         "holds elementwise ops over one iteration space and reductions of them")


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}") from None


from . import complex_ops as _complex_ops  # noqa: E402,F401  (registers real, imag, conj, complex)
from . import control_ops as _control_ops  # noqa: E402,F401  (registers cond, while_loop, scan, ...)
from . import conv_ops as _conv_ops  # noqa: E402,F401  (registers conv)
from . import count_op as _count_op  # noqa: E402,F401  (registers count)
from . import eig_ops as _eig_ops  # noqa: E402,F401  (registers eig, sqrtm, sylvester)
from . import fft_ops as _fft_ops  # noqa: E402,F401  (registers fft)
from . import incgamma_ops as _incgamma_ops  # noqa: E402,F401  (gammainc, betainc, ...)
from . import linalg_ops as _linalg_ops  # noqa: E402,F401  (registers cholesky, solve, eigh, ...)
from . import pool_ops as _pool_ops  # noqa: E402,F401  (registers max_pool, sum_pool, ...)
from . import sort_ops as _sort_ops  # noqa: E402,F401  (registers argsort)
from . import special_ops as _special_ops  # noqa: E402,F401  (registers lgamma, digamma, erfc, ...)
