"""Composite operations replayed from their first recording (``F.linear``, ``relu``, ``mean``).

An operation made of several IR ops (``x @ w.T + b``) costs one ``bind`` per
op on the generic path. When the ops an operation binds depend only on the
types of its Tensor arguments (never on their values or on anything else the
function captures), the caller may run it through ``run``: the first call
for a given (operation, key, argument types, requires_grad flags, grad mode)
goes through ``record.operation`` and its recording is kept; later calls
evaluate the recorded ops' NumPy references directly on the new arrays and
build the same ``OpNode`` (same live entries, types, saved values and
replay), skipping promotion, dispatch and analysis. Anything unusual
(tracers, an open trace or scope, views as arguments, results that alias an
argument) takes the generic path.
"""

from __future__ import annotations

import numpy as np
from numpy import ndarray

from ..ir.bind import handler_for
from . import bigpool, record
from .dual import ACTIVE as DUAL
from .fast import _fp, _fp_ignore
from .grad_mode import _mode
from .node import _sequence, accumulator
from .saved import SavedTensor, saved_input
from .saved import _hooks as _saved_hooks
from .tensor_base import _CLASS, TensorBase, _Cell, _Version

_new = object.__new__


class _Plan:
    __slots__ = (
        "avals",
        "cls",
        "input_pos",
        "live",
        "needed",
        "nvalues",
        "out_slot",
        "out_slots",
        "program",
        "record",
        "replay",
    )


_PLANS: dict = {}


def run(name: str, key, fn, *args, view: bool = False):
    """``record.operation(name, fn, *args, view=view)``, replayed when seen before (see the
    module docstring); ``key`` names everything besides the arguments' types that decides
    which ops ``fn`` binds. Arguments may be views (unless their base was written in place
    since: the generic path gives them fresh history first); ``view=True`` makes a result
    that shares an argument's memory a view of it, as ``record.operation`` does."""
    if record._state.scope is not None:
        return fn(*args)
    sig = [name, key, view]
    rg = False
    for x in args:
        if not isinstance(x, TensorBase):
            return record.operation(name, fn, *args, view=view)
        d = x._cell.value
        if type(d) is not ndarray or (x._base is not None and x._vc.n != x._base_version):
            return record.operation(name, fn, *args, view=view)
        sig += (d.dtype, d.shape, x._rg)
        if view:
            sig.append(d.strides)
        rg = rg or x._rg
    if DUAL[0] or handler_for(()) is not None:
        return record.operation(name, fn, *args, view=view)
    recording = rg and _mode.grad
    sig.append(recording)
    if len(args) > 1:  # which arguments are the same object (first position of each)
        ids = [id(x) for x in args]
        sig.append(tuple([ids.index(i) for i in ids]))
    sig = tuple(sig)
    plan = _PLANS.get(sig, _PLANS)
    if plan is _PLANS:
        out, plan = _first(name, fn, args, recording, view)
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        _PLANS[sig] = plan
        return out
    if plan is None:
        return record.operation(name, fn, *args, view=view)
    return _replay(plan, args, view)


def _first(name: str, fn, args, recording: bool, view: bool):
    """Run the operation generically, and make its plan (None if it cannot be replayed)."""
    scope = record.Scope(name)
    record._state.scope = scope
    try:
        out = record._own(scope, fn(*args))
    finally:
        record._state.scope = None
    record._isolate(scope, [out], view)
    record.finish(scope, [out])
    return out, _make_plan(scope, out, args, recording, view)


def _make_plan(scope, out, args, recording: bool, view: bool):
    if not isinstance(out, TensorBase) or (out._base is not None and not view):
        return None
    pos = []
    for x in scope.inputs:
        k = next((i for i, a in enumerate(args) if a is x), None)
        if k is None:
            return None  # a Tensor the function captured: not replayable
        pos.append(k)
    program = []
    for e in scope.entries:
        if "regions" in e.kwargs:
            return None
        dts = tuple(scope.values[o]._cell.value.dtype for o in e.outs)
        program.append((bigpool.impl(e.opdef), e.kwargs, e.slots, e.outs, dts))
    p = _Plan()
    p.input_pos = tuple(pos)
    p.program = program
    p.nvalues = len(scope.values)
    p.out_slot = scope.produced[id(out)]
    node = out._grad_fn
    p.record = recording and node is not None
    if recording and not p.record:
        return None
    if p.record:
        if type(node).__mro__[1] is not record.OpNode:
            return None
        p.cls = type(node)
        p.live, p.out_slots, p.avals = node._entries, node._out_slots, node._avals
        p.replay = node._replay
        p.needed = tuple(node._saved)
        if p.out_slots != (p.out_slot,):
            return None
    return p


def _replay(plan: _Plan, args, view: bool = False):
    inputs = [args[k] for k in plan.input_pos]
    data = [x._cell.value for x in inputs]
    vals = [None] * plan.nvalues
    token = _fp.set(_fp_ignore) if _fp is not None else None
    try:
        for impl, kwargs, slots, outs, dts in plan.program:
            a = [s if type(s) is not int else (data[-1 - s] if s < 0 else vals[s])
                 for s in slots]
            r = impl(*a, **kwargs)
            if len(outs) == 1:
                dt = dts[0]
                vals[outs[0]] = r if type(r) is ndarray and r.dtype == dt else np.asarray(r, dt)
            else:
                for o, ri, dt in zip(outs, r, dts):
                    vals[o] = np.asarray(ri, dt)
    finally:
        if token is not None:
            _fp.reset(token)
    res = vals[plan.out_slot]
    shared = None
    if res.base is not None:
        shared = next((x for x, d in zip(inputs, data) if np.may_share_memory(res, d)), None)
        if shared is not None and not view:
            res = res.copy()
    t = _new(_CLASS[0])
    t._init(_Cell(res), _Version(), False, None, 0)
    if view and shared is not None:  # as record._isolate: a view of the input's base
        base = shared._base if shared._base is not None else shared
        t._vc, t._base, t._base_version = shared._vc, base, shared._vc.n
    if plan.record:
        _node(plan, inputs, vals, t)
    return t


def _node(plan: _Plan, inputs: list, vals: list, t) -> None:
    edges = tuple([(None, 0) if not x._rg else (x._grad_fn, x._out_nr) if x._grad_fn is not None
                   else (accumulator(x), 0) for x in inputs])
    saved = {}
    hooks = _saved_hooks.stack
    for s in plan.needed:
        if s < 0:
            x = inputs[-1 - s]
            saved[s] = SavedTensor.of_input(x) if hooks else saved_input(x)
        elif s == plan.out_slot:
            saved[s] = SavedTensor("output", t._cell.value, vc=t._vc, output_nr=0)
        else:
            v = vals[s]
            vc = None
            if v.base is not None:
                vc = next((x._vc for x in inputs if np.may_share_memory(v, x._cell.value)), None)
            saved[s] = SavedTensor("internal", v, vc=vc)
    node = _new(plan.cls)  # plan.cls(edges, ...) without the constructor calls
    node._next = edges
    node._seq = next(_sequence)
    node._pre_hooks = node._post_hooks = node._tensor_hooks = node._retain = None
    node._nin = len(edges)
    node._entries = plan.live
    node._out_slots = plan.out_slots
    node._avals = plan.avals
    node._saved = saved
    node._replay = plan.replay
    t._grad_fn = node
    t._rg = True
