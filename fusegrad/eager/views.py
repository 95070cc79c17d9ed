"""Autograd through views that are written in place: ``CopySlices`` and view replay.

A view (``base[0]``, ``base.t()``, ``base.view(...)``) shares its base's memory
and version counter. As in PyTorch:

* An in-place operation on a view that involves autograd records the
  operation on the view, then gives the base a ``CopySlices`` node: the
  base's gradient flows unchanged outside the view's elements and through
  the operation's node inside them. The view's own history becomes a fresh
  view of the new base (``AsStridedBackward0``).
* A view whose base was modified in place after the view was taken gets the
  same fresh history when it is next used in a computation that records.

Which base elements a view covers is read from the two arrays' memory layout
(``view_index``): it needs concrete data and a C-contiguous base, and covers
every view NumPy can express (slices, selections, transposes, reshapes).
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.bind import aval
from . import tensor_base as TB
from .grad_mode import _mode
from .node import Node, edge_of, move_tensor_state
from .record import _VIEW_CURRENT, _state, operation, run_inplace

_NO_VIEW_INDEX = (
    "fusegrad cannot tell which elements of its base this view covers (its data is traced, "
    "or the base's data is not one C-contiguous array); take the view again after the "
    "in-place operation, or clone() it before writing to it")


def view_index(v) -> np.ndarray | None:
    """The flat indices into ``v._base``'s data of each element of view ``v``, or None."""
    data, base = v._cell.value, v._base._cell.value
    if not (TB.is_concrete(data) and TB.is_concrete(base)) or not base.flags.c_contiguous:
        return None
    item = base.itemsize
    offset = data.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if data.dtype != base.dtype or offset % item or any(s % item for s in data.strides):
        return None
    idx = np.full(data.shape, offset // item, dtype=np.int64)
    for k, (n, s) in enumerate(zip(data.shape, data.strides)):
        shape = [1] * data.ndim
        shape[k] = n
        idx += (np.arange(n, dtype=np.int64) * (s // item)).reshape(shape)
    if idx.size and (idx.min() < 0 or idx.max() >= base.size):
        return None
    return idx


def refresh(v) -> None:
    """Give view ``v`` the history of a fresh view of its base (as of now)."""
    idx = view_index(v)
    if idx is None:
        raise RuntimeError(f"a view of a tensor that was modified in place is used in a "
                           f"computation that requires grad, and {_NO_VIEW_INDEX}")
    base = v._base
    shape = tuple(v._cell.value.shape)
    flat = idx.reshape(-1)

    def take():
        whole = ops.reshape(base, shape=(base.numel(),))
        return ops.reshape(ops.take(whole, flat, axis=0), shape=shape)

    outer, _state.scope = _state.scope, None
    try:
        fresh = operation("AsStridedBackward0", take)
    finally:
        _state.scope = outer
    v._grad_fn, v._out_nr, v._rg = fresh._grad_fn, fresh._out_nr, fresh._rg
    v._base_version = v._vc.n


def current(v) -> None:
    """Before a view is recorded as an input: replay it if its base changed in place."""
    if v._vc.n != v._base_version and _mode.grad:
        refresh(v)


_VIEW_CURRENT.append(current)  # record calls it on every view input it records


class CopySlices(Node):
    """The base's node after an in-place operation on one of its views.

    Its next functions are the base's previous history and the operation's
    node; the gradient goes to the first outside the view's elements and to
    the second (as the view's gradient) inside them.
    """

    __slots__ = ("_base_shape", "_flat", "_view_shape")

    def __init__(self, next_edges, flat, base_shape, view_shape):
        super().__init__(next_edges)
        self._flat = flat
        self._base_shape = base_shape
        self._view_shape = view_shape

    @property
    def num_outputs(self) -> int:
        return 1

    def apply(self, grads: list, create_graph: bool) -> list:
        g = grads[0]
        if g is None:
            return [None, None]
        whole = A.reshape(g, (int(np.prod(self._base_shape)),))
        inside = A.reshape(ops.take(whole, self._flat, axis=0), self._view_shape)
        zeros = ops.broadcast_to(np.zeros((), aval(whole).dtype), shape=self._flat.shape)
        outside = A.reshape(ops.index_set(whole, self._flat, zeros, axis=0), self._base_shape)
        return [outside, inside]


def inplace_on_view(name: str, target, compute, *args):
    """``target`` (a view) = ``compute(old, *args)`` in place, recorded for autograd."""
    base = target._base
    if base._grad_fn is None and base._rg:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    idx = view_index(target)
    if idx is None:
        raise RuntimeError(f"in-place operation on a view of a tensor that requires grad: "
                           f"{_NO_VIEW_INDEX}")
    if target._vc.n != target._base_version:
        refresh(target)
    old_edge, old_node, old_nr = edge_of(base), base._grad_fn, base._out_nr
    before = target._grad_fn
    run_inplace(name, target, compute, *args)
    written = (target._grad_fn, target._out_nr) if target._grad_fn is not before else (None, 0)
    node = CopySlices((old_edge, written), idx.reshape(-1),
                      tuple(base._cell.value.shape), tuple(target._cell.value.shape))
    base._grad_fn, base._out_nr, base._rg = node, 0, True
    move_tensor_state(base, old_node, old_nr)
    refresh(target)
    return target
