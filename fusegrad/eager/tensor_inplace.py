"""In-place operations: ``add_``, ``mul_``, ``zero_``, ``fill_``, ``copy_``, ``x[idx] = v``, ...

Each computes the new value out of place (through ``bind``, so traced data
works too), writes it into the tensor's memory and bumps its version counter.
When autograd records it, the tensor gets a new ``grad_fn`` whose input is the
tensor's value and history from before the write (``record.run_inplace``);
saved tensors that were modified raise at backward. In-place on a leaf that
requires grad raises unless grad mode is off (``with fg.no_grad(): p -= lr * p.grad``).
"""

from __future__ import annotations

import numpy as np

from ..ir import ops
from ..ir.bind import handler_for
from ..ir.indexing import IndexUpdateRef
from . import dtypes as D
from . import dual
from . import tensor_base as TB
from .creation import _rng
from .fast import quiet_fp
from .grad_mode import _mode
from .names import NAMES
from .record import run_inplace, write
from .tensor_math import _type_name, arg, cast
from .views import inplace_on_view


def _check(target, key: str | None = None) -> None:
    if _mode.grad and target._rg and target._grad_fn is None:
        name = key if key is None or key.endswith("_") else key + "_"
        what = f" ({name} on a leaf of shape {list(target.shape)})" if key else ""
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           f"operation.{what} Modify it inside `with fg.no_grad():` (as "
                           "an optimizer does), or work on x.clone()")
    if target._inference and not _mode.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed. You can make a clone to get a normal tensor before doing "
                           "inplace update.")


def _fit(target, new, any_cast: bool):
    """``new`` with ``target``'s shape and dtype, or PyTorch's error."""
    new = arg(new)
    if not isinstance(new, TB.TensorBase):
        new = ops.broadcast_to(np.asarray(new, target._data.dtype), shape=tuple(target.shape))
    shape, want = tuple(new.shape), tuple(target.shape)
    if shape != want:
        try:
            full = tuple(np.broadcast_shapes(shape, want))
        except ValueError:
            full = None
        if full != want:
            raise RuntimeError(f"output with shape {list(want)} doesn't match the broadcast "
                               f"shape {list(full) if full else list(shape)}")
        new = ops.broadcast_to(new, shape=want)
    if not any_cast and not D.can_cast(new._data.dtype, target._data.dtype):
        raise RuntimeError(f"result type {_type_name(new._data.dtype)} can't be cast to the "
                           f"desired output type {_type_name(target._data.dtype)}")
    return cast(new, target._data.dtype)


def inplace(key: str, target, fn, *args, any_cast: bool = False):
    """``target = fn(target, *args)`` in place; returns ``target``."""
    _check(target, key)

    def compute(old, *a):
        return _fit(target, fn(old, *a), any_cast)

    if _mode.grad and (target._rg or any(isinstance(a, TB.TensorBase) and a._rg for a in args)):
        if target._base is not None:
            return inplace_on_view(NAMES.get(key, key), target, compute, *args)
        return run_inplace(NAMES.get(key, key), target, compute, *args)
    new = compute(target, *args)
    write(target, new._data)
    if dual.ACTIVE[0]:
        dual.transfer(target, new)
    return target


def _arith_in_place(ufunc, target, other, alpha) -> bool:
    """``target = ufunc(target, other * alpha)`` in the target's memory when nothing records
    and both are concrete arrays of one float dtype (what the general path computes,
    without the dispatch); False when the general path is needed."""
    if dual.ACTIVE[0] or (_mode.grad and (target._rg or (isinstance(other, TB.TensorBase)
                                                        and other._rg))):
        return False
    cur = target._cell.value
    if type(cur) is not np.ndarray or cur.dtype.kind != "f" or not cur.flags.writeable:
        return False
    if isinstance(other, TB.TensorBase):
        o = other._cell.value
        if type(o) is not np.ndarray or o.dtype != cur.dtype or (o.shape != cur.shape
                                                                 and o.ndim):
            return False
    elif type(other) in (float, int):
        o = other
    else:
        return False
    if handler_for(()) is not None:
        return False
    _check(target)
    with quiet_fp():
        ufunc(cur, o if alpha == 1 else o * alpha, out=cur)
    target._vc.n += 1
    return True


def _set_all(old, value):
    return ops.select(True, arg(value), old)


def setitem(target, idx, value) -> None:
    idx = tuple(np.asarray(i) if isinstance(i, list) else i for i in idx) if isinstance(
        idx, tuple) else (np.asarray(idx) if isinstance(idx, list) else idx)
    inplace("setitem", target, lambda old, v: IndexUpdateRef(old, idx).set(arg(v)), value,
            any_cast=True)


class TensorInplace:
    """Mixin of ``fusegrad.Tensor``: the in-place operations."""

    __slots__ = ()

    def add_(self, other, *, alpha=1):
        if _arith_in_place(np.add, self, other, alpha):
            return self
        return inplace("add", self, lambda old, o: old.add(o, alpha=alpha), arg(other))

    def sub_(self, other, *, alpha=1):
        if _arith_in_place(np.subtract, self, other, alpha):
            return self
        return inplace("sub", self, lambda old, o: old.sub(o, alpha=alpha), arg(other))

    def mul_(self, other):
        if _arith_in_place(np.multiply, self, other, 1):
            return self
        return inplace("mul", self, lambda old, o: old.mul(o), arg(other))

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None and _arith_in_place(np.true_divide, self, other, 1):
            return self
        return inplace("div", self, lambda old, o: old.div(o, rounding_mode=rounding_mode),
                       arg(other))

    def pow_(self, exponent):
        return inplace("pow", self, lambda old, e: old.pow(e), arg(exponent))

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def __ipow__(self, other):
        return self.pow_(other)

    def neg_(self):
        return inplace("neg", self, lambda old: -old)

    def abs_(self):
        return inplace("abs", self, lambda old: old.abs())

    def exp_(self):
        return inplace("exp", self, lambda old: old.exp())

    def log_(self):
        return inplace("log", self, lambda old: old.log())

    def sqrt_(self):
        return inplace("sqrt", self, lambda old: old.sqrt())

    def sin_(self):
        return inplace("sin", self, lambda old: old.sin())

    def cos_(self):
        return inplace("cos", self, lambda old: old.cos())

    def tanh_(self):
        return inplace("tanh", self, lambda old: old.tanh())

    def sigmoid_(self):
        return inplace("sigmoid", self, lambda old: old.sigmoid())

    def relu_(self):
        return inplace("relu", self, lambda old: old.relu())

    def clamp_(self, min=None, max=None):
        return inplace("clamp", self, lambda old: old.clamp(min, max))

    clip_ = clamp_

    def floor_(self):
        return inplace("floor", self, lambda old: old.floor())

    def zero_(self):
        """Fill with zeros (the gradient to the old value is zero)."""
        return inplace("zero_", self, lambda old: ops.select(True, 0, old), any_cast=True)

    def fill_(self, value):
        return inplace("fill_", self, _set_all, arg(value), any_cast=True)

    def copy_(self, src, non_blocking: bool = False):
        """Copy ``src`` (broadcast, cast to this dtype) into this tensor."""
        return inplace("copy_", self, _set_all, arg(src), any_cast=True)

    def masked_fill_(self, mask, value):
        return inplace("masked_fill", self, lambda old, v: ops.select(mask, v, old), arg(value),
                       any_cast=True)

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None):
        data = _rng(generator).uniform(a, b, tuple(self.shape))
        return inplace("copy_", self, _set_all, TB.make(data.astype(self._data.dtype)),
                       any_cast=True)

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None):
        data = _rng(generator).normal(mean, std, tuple(self.shape))
        return inplace("copy_", self, _set_all, TB.make(data.astype(self._data.dtype)),
                       any_cast=True)
