"""Recording for the eager fast path (``fast``): result tensors, nodes, saved tensors.

What ``record.finish`` makes for one IR op on concrete float arrays, built field by
field from the op's plan (``fast._Plan``): the result Tensor, its ``FastNode`` with
PyTorch's edges (``(None, 0)`` for inputs and numbers that need no gradient,
``AccumulateGrad`` for leaves), and the saved tensors the VJP reads, packed through
the saved-tensor hooks when any are open.
"""

from __future__ import annotations

from . import anomaly
from .anomaly import MODE as _anomaly
from .grad_mode import _mode
from .node import _sequence, accumulator
from .saved import SavedTensor, saved_input
from .saved import _hooks as _saved_hooks
from .tensor_base import _CLASS, _Cell, _Version

_new = object.__new__
_OUT_SLOTS = (0,)
_NO_EDGE = (None, 0)
_NO_REPLAY: list = []


def _result(out):
    """A new Tensor over ``out``: ``TensorBase._init`` without the calls (no capture is
    open on the fast path)."""
    t = _new(_CLASS[0])
    cell = _new(_Cell)
    cell.value = out
    vc = _new(_Version)
    vc.n = 0
    t._cell = cell
    t._vc = vc
    t._rg = t._retains = False
    t._grad_fn = t._grad = t._hooks = t._base = t._acc = None
    t._out_nr = t._base_version = 0
    t._inference = _mode.inference
    return t


def _edge(x) -> tuple:
    """``node.edge_of(x)`` for a tensor that requires grad."""
    fn = x._grad_fn
    if fn is not None:
        return (fn, x._out_nr)
    return (accumulator(x), 0)


def _record(plan, operands, t) -> None:
    """Give ``t`` the node the generic path would have made for this call."""
    node = _new(plan.cls)
    slots = plan.slots
    if plan.const:  # the number itself (made an array of the op's dtype when read)
        slots = (operands[0], slots[1]) if slots[0] is None else (slots[0], operands[1])
    inputs = [operands[i] for i in plan.input_pos]
    node._next = (*[_edge(x) if x._rg else _NO_EDGE for x in inputs], *plan.number_edges)
    _attach(node, plan, slots, len(inputs), inputs, t)


def _record2(plan, a, b, t) -> None:
    """``_record`` for two Tensor operands."""
    node = _new(plan.cls)
    if a._rg:
        fn = a._grad_fn
        ea = (fn, a._out_nr) if fn is not None else (accumulator(a), 0)
    else:
        ea = _NO_EDGE
    if b._rg:
        fn = b._grad_fn
        eb = (fn, b._out_nr) if fn is not None else (accumulator(b), 0)
    else:
        eb = _NO_EDGE
    node._next = (ea, eb)
    _attach(node, plan, plan.slots, 2, (a, b), t)


def _record_number(plan, a, b, t) -> None:
    """``_record`` for a Tensor operand that requires grad and a Python number."""
    node = _new(plan.cls)
    if plan.slots[0] is None:
        x, slots = b, (a, plan.slots[1])
    else:
        x, slots = a, (plan.slots[0], b)
    fn = x._grad_fn
    edge = (fn, x._out_nr) if fn is not None else (accumulator(x), 0)
    node._next = (edge, *plan.number_edges)
    _attach(node, plan, slots, 1, (x,), t)


def _record1(plan, x, t) -> None:
    """``_record`` for one Tensor operand that requires grad."""
    node = _new(plan.cls)
    fn = x._grad_fn
    node._next = ((fn, x._out_nr),) if fn is not None else ((accumulator(x), 0),)
    _attach(node, plan, plan.slots, 1, (x,), t)


def _attach(node, plan, slots, nin: int, inputs, t) -> None:
    """Fill in ``node`` (its edges are set), save what its backward reads, make it
    ``t``'s ``grad_fn``."""
    node._seq = next(_sequence)
    node._pre_hooks = node._post_hooks = node._tensor_hooks = node._retain = None
    node._nin = nin
    node._out_slots = _OUT_SLOTS
    node._avals = plan.avals
    node._replay = _NO_REPLAY
    node._plan = plan
    node._slots = slots
    if not plan.needed and not plan.needs_out:
        saved = {}
    elif _saved_hooks.stack:
        saved = {s: SavedTensor.of_input(inputs[-1 - s]) for s in plan.needed}
        if plan.needs_out:
            saved[0] = SavedTensor("output", t._cell.value, vc=t._vc, output_nr=0)
    else:  # what SavedTensor's constructor makes, without its checks for hooks
        saved = {}
        for s in plan.needed:
            saved[s] = saved_input(inputs[-1 - s])
        if plan.needs_out:
            vc = t._vc
            st = _new(SavedTensor)
            st.kind = "output"
            st._data = t._cell.value
            st._tensor = st._grad_fn = st._packed = st._unpack = None
            st._vc = vc
            st._version = vc.n
            st._out_nr = 0
            st._rg = st._freed = False
            saved[0] = st
    node._saved = saved
    t._grad_fn = node
    t._rg = True
    if _anomaly.enabled:
        anomaly.record(node, (t,))
