"""Recording: the bind handler for Tensors, and one node per user-facing operation.

``bind`` hands every op with a Tensor operand to ``tensor_bind``, which
computes the value by binding the same op on the operands' data (NumPy arrays
or tracers) and, when grad mode is on and an input requires grad, records it.
A Tensor method runs inside ``operation(name)``: every op it binds joins one
``Scope``, and at the end the scope becomes one ``OpNode`` named as PyTorch
names that operation (``MeanBackward0`` for ``reduce_sum`` then ``div``). An
op bound outside any scope (``fnp.sin(t)``, VJP rules under
``create_graph=True``) is its own node, named after the op.
"""

from __future__ import annotations

import threading

import numpy as np

from ..ir.bind import eval_numpy, handler_for, register_array_type
from ..passes.autodiff.vjp_rules import NON_DIFFERENTIABLE
from . import anomaly, bigpool, capture, dual
from . import tensor_base as TB
from .anomaly import MODE as _anomaly
from .grad_mode import _mode
from .names import OP_NAMES
from .node import edge_of, move_tensor_state, node_class
from .recorded import Entry, OpNode, _is_slot, _kw_key, rule_needs
from .saved import SavedTensor


class _State(threading.local):
    def __init__(self):
        self.scope = None


_state = _State()

#: ``views.current``: replays a view input whose base was written in place (set by
#: ``views``, which records through this module).
_VIEW_CURRENT: list = []


class Scope:
    """The IR ops one user-facing operation binds, over slots (see ``recorded``)."""

    __slots__ = ("distinct", "entries", "grad", "input_ids", "inputs", "name", "produced",
                 "values")

    def __init__(self, name: str, distinct: bool = False):
        self.name = name
        # every operand occurrence its own input (x * x: two edges, two saved tensors)
        self.distinct = distinct
        self.entries: list[Entry] = []
        self.inputs: list = []
        self.input_ids: dict[int, int] = {}
        self.produced: dict[int, int] = {}
        self.values: list = []  # the Tensors made in the scope, by slot
        self.grad = False

    def slot_of(self, x):
        if not isinstance(x, TB.TensorBase):
            return x
        j = self.produced.get(id(x))
        if j is not None:
            return j
        k = None if self.distinct else self.input_ids.get(id(x))
        if k is None:
            k = self.input_ids[id(x)] = len(self.inputs)
            self.inputs.append(x)
            if x._rg:
                if x._base is not None:
                    _VIEW_CURRENT[0](x)
                self.grad = True
        return -1 - k

    def record(self, opdef, attrs, regions, operands, results) -> None:
        slots = tuple(self.slot_of(x) for x in operands)
        outs = []
        for r in results:
            self.produced[id(r)] = len(self.values)
            outs.append(len(self.values))
            self.values.append(r)
        kwargs = dict(attrs, regions=regions) if regions else attrs
        self.entries.append(Entry(opdef, kwargs, slots, tuple(outs)))


def tensor_bind(opdef, operands, attrs, regions):
    """``bind``'s handler for Tensor operands: compute on the data, record if needed."""
    data = tuple(x._cell.value if isinstance(x, TB.TensorBase) else x for x in operands)
    handler = handler_for(data)  # bind has already checked and promoted the operands
    if handler is None:
        if opdef.name in bigpool.POOL_OPS and bigpool.usable(opdef.name, data, attrs):
            out = bigpool.pool_apply(opdef.name, data, attrs)
        else:
            out = eval_numpy(opdef, data, attrs, regions)
    elif not capture.tracing() and all(
            TB.is_concrete(x._data) for x in operands if isinstance(x, TB.TensorBase)):
        # concrete tensors met an open trace (fg.grad over a closure): they are its inputs
        return handler(opdef, operands, attrs, regions)
    else:
        out = handler(opdef, data, attrs, regions)
    multi = isinstance(out, tuple)
    results = tuple(TB.make(o) for o in (out if multi else (out,)))
    if dual.ACTIVE[0]:  # the tangents' ops are their own nodes, not the operation's
        prev, _state.scope = _state.scope, None
        try:
            dual.propagate(opdef, operands, attrs, regions, results)
        finally:
            _state.scope = prev
    scope = _state.scope
    if scope is not None:
        scope.record(opdef, attrs, regions, operands, results)
        return results if multi else results[0]
    _isolate_all(operands, results)
    if _mode.grad and any(isinstance(x, TB.TensorBase) and x._rg for x in operands):
        scope = Scope(OP_NAMES.get(opdef.name, "Backward0"))
        scope.record(opdef, attrs, regions, operands, results)
        finish(scope, list(results))
    return results if multi else results[0]


def _isolate_all(operands, results) -> None:
    """An op bound on its own never returns memory shared with an input (copy it)."""
    for t in results:
        data = t._cell.value
        if TB.is_concrete(data) and data.base is not None and any(
                isinstance(x, TB.TensorBase) and TB.is_concrete(x._data)
                and np.may_share_memory(data, x._data) for x in operands):
            t._cell.value = data.copy()


def _tensor_dtype(t):
    return np.dtype(t._cell.value.dtype)


def _tensor_value(t):
    return t._cell.value


register_array_type(TB.TensorBase, level=lambda t: 0, bind=tensor_bind, dtype=_tensor_dtype,
                    value=_tensor_value)


def operation(name: str, fn, *args, view: bool = False, distinct: bool = False, **kwargs):
    """Run ``fn(*args, **kwargs)`` as one operation: one ``name`` node for all its ops.

    Nested operations join the outer one. ``view=True`` marks results that
    share memory with an input as views of it (they share its version counter).
    ``distinct=True`` makes each use of a tensor its own input (binary operators, as
    PyTorch's ``x * x`` has two edges and saves ``self`` and ``other``).
    """
    if _state.scope is not None:
        return fn(*args, **kwargs)
    scope = _state.scope = Scope(name, distinct)
    try:
        out = fn(*args, **kwargs)
        outs, rebuild = _flatten(out)
        outs = [_own(scope, o) for o in outs]
    finally:
        _state.scope = None
    _isolate(scope, outs, view)
    finish(scope, outs)
    return rebuild(outs)


def _flatten(out):
    if isinstance(out, tuple):
        return list(out), lambda xs: type(out)(*xs) if hasattr(out, "_fields") else tuple(xs)
    return [out], lambda xs: xs[0]


def _own(scope: Scope, t):
    """``t`` as a value the scope made (an operation never returns its input object)."""
    if isinstance(t, TB.TensorBase) and id(t) not in scope.produced:
        from ..ir import ops
        from ..ir.types import dtype_name

        return ops.convert(t, dtype=dtype_name(t._data.dtype))
    return t


def _isolate(scope: Scope, outs, view: bool) -> None:
    """Results sharing memory with an input: views of it, or copied if the op is no view."""
    for t in outs:
        data = t._data
        if not TB.is_concrete(data) or data.base is None:
            continue
        for x in scope.inputs:
            xd = x._data
            if TB.is_concrete(xd) and np.may_share_memory(data, xd):
                if view:
                    base = x._base if x._base is not None else x
                    t._vc, t._base, t._base_version = x._vc, base, x._vc.n
                else:
                    t._cell.value = data.copy()
                break


def run_inplace(name: str, target, fn, *args):
    """``target`` = ``fn(old, *args)`` in place, recorded as one ``name`` node on ``target``.

    ``old`` stands for the target's value and history before the write.
    """
    old = TB.make(target._data, target._rg, target._grad_fn, target._out_nr)
    if dual.ACTIVE[0]:
        dual.transfer(old, target)
    args = tuple(old if a is target else a for a in args)
    prev, scope = _state.scope, Scope(name)
    _state.scope = scope
    try:
        new = _own(scope, fn(old, *args))
    finally:
        _state.scope = prev
    node = finish(scope, [new], target=target)
    k = scope.input_ids.get(id(old))
    if node is not None and k is not None and (-1 - k) in node._saved:
        # the node reads the value from before the write: keep a copy of it
        data = old._data
        if TB.is_concrete(data):
            old._cell.value = node._saved[-1 - k]._data = data.copy()
    write(target, new._data)
    if dual.ACTIVE[0]:
        dual.transfer(target, new)
    if node is not None:
        old_node, old_nr = target._grad_fn, target._out_nr
        target._grad_fn, target._out_nr, target._rg = node, 0, True
        for s in node._saved.values():
            if s.kind == "output":
                s._vc, s._version = target._vc, target._vc.n
        move_tensor_state(target, old_node, old_nr)
    return target


def write(target, new) -> None:
    """Store ``new`` as ``target``'s data, in its memory when it is a writable array."""
    cur = target._cell.value
    capture.note_write(target)
    if isinstance(new, np.generic):
        new = np.asarray(new)
    if (TB.is_concrete(cur) and TB.is_concrete(new) and cur.shape == new.shape
            and cur.dtype == new.dtype and cur.flags.writeable):
        np.copyto(cur, new)
    elif target._base is not None:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location (or the view cannot be written through). Please clone() "
            "the tensor before performing the operation.")
    else:
        target._cell.value = new
    target._vc.n += 1


# --- from a scope to a node --------------------------------------------------------


def finish(scope: Scope, outs: list, target=None):
    """Make the scope's node and attach it to ``outs`` (or to ``target``, in place)."""
    if not (scope.grad and _mode.grad):
        return None
    plan = _plan(scope, outs)
    if plan is None:
        return None
    marks, live_idx, out_slots, avals, needed, replay_idx = plan
    entries = scope.entries
    for i, mask, needs_out, needs_in in marks:
        e = entries[i]
        e.mask, e.needs_out, e.needs_in = mask, needs_out, needs_in
    live = [entries[i] for i in live_idx]
    replay = [entries[i] for i in replay_idx]
    saved = {s: _save(scope, s, out_slots, target) for s in needed}
    cls = node_class(scope.name, OpNode)
    node = cls(tuple(edge_of(x) for x in scope.inputs), live, out_slots, avals, saved, replay)
    if target is None:
        for nr, s in enumerate(out_slots):
            t = scope.values[s]
            t._grad_fn, t._out_nr, t._rg = node, nr, True
    if _anomaly.enabled:
        anomaly.record(node, [scope.values[s] for s in out_slots] if target is None else [target])
    return node


#: What ``finish`` works out for a scope, keyed by everything it depends on (the ops,
#: their attributes and slots, the types of every value, which inputs require grad and
#: which results become outputs): a recorded operation seen before costs one lookup.
_PLANS: dict = {}


def _plan_key(scope: Scope, requested: tuple):
    parts = [requested]
    for x in scope.inputs:
        d = x._cell.value
        parts.append((x._rg, d.shape, d.dtype))
    for v in scope.values:
        d = v._cell.value
        parts.append((d.shape, d.dtype))
    for e in scope.entries:
        parts.append((e.opdef.name, _kw_key(e.kwargs), e.outs,
                      *(s if type(s) is int else (s.shape, s.dtype) for s in e.slots)))
    key = tuple(parts)
    hash(key)
    return key


def _plan(scope: Scope, outs: list):
    requested = tuple(scope.produced.get(id(t)) if isinstance(t, TB.TensorBase) else None
                      for t in outs)
    try:
        key = _plan_key(scope, requested)
    except (TypeError, AttributeError):
        key = None
    if key is not None:
        plan = _PLANS.get(key, _PLANS)
        if plan is not _PLANS:
            return plan
    plan = _analyse(scope, requested)
    if key is not None:
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _analyse(scope: Scope, requested: tuple):
    """The node's plan: which entries carry cotangents, what they read, what to save."""
    active = _active(scope)
    out_slots = tuple(s for s in requested if s is not None and s in active)
    if not out_slots:
        return None
    live = _live(scope, active, out_slots)
    avals = {}
    needed: set = set()
    for e in live:
        in_types = tuple(_type(scope, s) for s in e.slots)
        out_types = tuple(_type(scope, o) for o in e.outs)
        e.needs_out, e.needs_in = rule_needs(e.opdef.name, _kw_key(e.kwargs), in_types,
                                             out_types, e.mask)
        for s, ty in zip(e.slots, in_types):
            if _is_slot(s):
                avals[s] = ty
        for o, ty, n in zip(e.outs, out_types, e.needs_out):
            avals[o] = ty
            if n:
                needed.add(o)
        needed.update(s for s, n in zip(e.slots, e.needs_in) if n and _is_slot(s))
    replay = _replay(scope, needed, set(out_slots))
    for e in replay:
        needed.update(s for s in e.slots if _is_slot(s) and s < 0)
    index = {id(e): i for i, e in enumerate(scope.entries)}
    marks = tuple((i, e.mask, e.needs_out, e.needs_in) for i, e in enumerate(scope.entries)
                  if e.mask is not None)
    return (marks, tuple(index[id(e)] for e in live), out_slots, avals,
            tuple(sorted(needed)), tuple(index[id(e)] for e in replay))


def _type(scope: Scope, s) -> tuple:
    """``(shape, dtype)`` of a slot's value (the cache key part of a TensorType)."""
    d = s if not _is_slot(s) else (scope.values[s] if s >= 0 else scope.inputs[-1 - s])._data
    return (d.shape, d.dtype)


def _active(scope: Scope) -> set:
    active = {-1 - k for k, x in enumerate(scope.inputs) if x._rg}
    for e in scope.entries:
        if e.opdef.name in NON_DIFFERENTIABLE:
            continue
        mask = tuple(_is_slot(s) and s in active for s in e.slots)
        if any(mask):
            e.mask = mask
            active.update(o for o in e.outs if scope.values[o]._cell.value.dtype.kind in "fc")
    return active


def _live(scope: Scope, active: set, out_slots) -> list[Entry]:
    """The entries a cotangent reaches from the node's outputs, in forward order."""
    reach = set(out_slots)
    live = []
    for e in reversed(scope.entries):
        if e.mask is not None and any(o in reach for o in e.outs):
            live.append(e)
            reach.update(s for s, m in zip(e.slots, e.mask) if m)
    live.reverse()
    return live


def _replay(scope: Scope, needed: set, outputs: set) -> list[Entry]:
    """The entries that recompute the needed intermediates from the inputs (create_graph)."""
    want = {s for s in needed if s >= 0 and s not in outputs}
    if not want:
        return []
    chosen = []
    for e in reversed(scope.entries):
        if any(o in want for o in e.outs):
            chosen.append(e)
            want.update(s for s in e.slots if _is_slot(s) and s >= 0)
    chosen.reverse()
    return chosen


def _save(scope: Scope, s: int, out_slots, target) -> SavedTensor:
    if s < 0:
        return SavedTensor.of_input(scope.inputs[-1 - s])
    t = scope.values[s]
    if s in out_slots:
        holder = target if target is not None else t
        return SavedTensor("output", t._data, vc=holder._vc, output_nr=out_slots.index(s))
    data = t._data
    if TB.is_concrete(data) and data.base is not None:
        for x in scope.inputs:  # a view of an input's memory: track the input's version
            if TB.is_concrete(x._data) and np.may_share_memory(data, x._data):
                return SavedTensor("internal", data, vc=x._vc)
    return SavedTensor("internal", data)
