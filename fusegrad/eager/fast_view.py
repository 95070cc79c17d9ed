"""View operations of one Tensor (``view``, ``reshape``, ``transpose``, slices) without the
replay's general bookkeeping.

``replay.run`` replays any recorded composite: per call it builds a signature from
every argument, evaluates the recorded program op by op and fills in the node from its
plan. A view is one IR op (``reshape``, ``transpose`` or ``slice``) on one Tensor, so
here the first call for a signature (view structure, shape, dtype, whether it records)
goes through ``replay.run`` and the node it made is kept as a template; later calls run
the op's NumPy reference and build the same ``OpNode`` (same class, entries, types, no
saved values) directly. The result is a view of the input's base when it shares the
input's memory, as ``record._isolate`` makes it.

Anything unusual takes ``replay.run``: tracers or an open trace or capture, an
enclosing operation scope, forward-mode AD, anomaly mode, a view input whose base was
written in place since it was taken (it gets fresh history first), or a first
recording that is not one single-entry ``OpNode`` with nothing saved.
"""

from __future__ import annotations

from numpy import may_share_memory, ndarray

from ..ir.optable import _slices
from . import fast, record, replay
from .anomaly import MODE as _anomaly
from .dual import ACTIVE as _DUAL
from .fast_record import _result
from .grad_mode import _mode
from .node import _sequence, accumulator
from .recorded import OpNode

_new = object.__new__

def _reshape(s: tuple):
    shape = s[1]
    return lambda x: x.reshape(shape)  # the op's reference, np.reshape, without its wrapper


def _transpose(s: tuple):
    perm = s[1]
    return lambda x: x.transpose(perm)  # np.transpose's


def _slice(s: tuple):
    index = _slices(*s[1:])  # the op's reference indexes x with these, made once
    return lambda x: x[index]


#: The IR op of each view structure ``tensor_shape`` passes, and the op's NumPy reference
#: on one array with that structure's attributes.
_ATTRS = {"reshape": ("reshape", _reshape), "transpose": ("transpose", _transpose),
          "slice": ("slice", _slice)}


class _Plan:
    __slots__ = ("avals", "cls", "entries", "impl", "out_slots", "record")


_PLANS: dict = {}


def run(name: str, structure: tuple, fn, x):
    """``replay.run(name, structure, fn, x, view=True)`` for a view ``structure`` (see the
    module docstring)."""
    d = x._cell.value
    if (record._state.scope is not None or type(d) is not ndarray or _DUAL[0]
            or _anomaly.enabled):
        return replay.run(name, structure, fn, x, view=True)
    base = x._base
    if (base is not None and x._vc.n != x._base_version) or not fast.plain():
        return replay.run(name, structure, fn, x, view=True)
    recording = x._rg and _mode.grad
    sig = (name, structure, d.shape, d.dtype, recording)
    plan = _PLANS.get(sig, _PLANS)
    if plan is _PLANS:
        out = replay.run(name, structure, fn, x, view=True)
        if len(_PLANS) >= 4096:
            _PLANS.clear()
        _PLANS[sig] = _make_plan(structure, x, out, recording)
        return out
    if plan is None:
        return replay.run(name, structure, fn, x, view=True)
    res = plan.impl(d)
    t = _result(res)
    if res.base is not None and may_share_memory(res, d):
        t._vc = x._vc
        t._base = base if base is not None else x
        t._base_version = x._vc.n
    if recording:
        node = _new(plan.cls)
        fn_ = x._grad_fn
        node._next = ((fn_, x._out_nr),) if fn_ is not None else ((accumulator(x), 0),)
        node._seq = next(_sequence)
        node._pre_hooks = node._post_hooks = node._tensor_hooks = node._retain = None
        node._nin = 1
        node._entries = plan.entries
        node._out_slots = plan.out_slots
        node._avals = plan.avals
        node._saved = {}
        node._replay = []
        t._grad_fn = node
        t._rg = True
    return t


def _make_plan(structure: tuple, x, out, recording: bool):
    """The template of a view call from its first result, or None (always replay.run)."""
    how = _ATTRS.get(structure[0]) if type(structure) is tuple else None
    if how is None or type(out._cell.value) is not ndarray:
        return None
    p = _Plan()
    irop, reference = how
    p.impl = reference(structure)
    node = out._grad_fn
    p.record = recording
    if not recording:
        return p if node is None else None
    if (node is None or type(node).__mro__[1] is not OpNode or out._out_nr != 0
            or len(node._entries) != 1 or node._saved or node._replay or node._nin != 1):
        return None
    e = node._entries[0]
    if e.opdef.name != irop or e.slots != (-1,) or node._out_slots != e.outs:
        return None
    p.cls, p.entries, p.out_slots, p.avals = type(node), node._entries, node._out_slots, node._avals
    return p
