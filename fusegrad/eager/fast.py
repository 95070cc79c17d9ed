"""The eager fast path: common operations on concrete float arrays, without the dispatch.

``x * 2.0``, ``x.sin()``, ``x.sum()`` on Tensors whose data are NumPy arrays of
one floating dtype cost ten Python layers on the generic path (``operation``,
``bind``, promotion, ``tensor_bind``, the scope, ``finish``). Here a *plan*,
cached by everything the generic path would decide (op, dtypes, shapes, which
inputs require grad, grad mode, identical operands), says what the generic
path would have built: the NumPy function, the node class, the slots, which
values the VJP rule reads. The op then runs the ufunc and builds the same
``OpNode`` directly. Anything else (tracers, an open trace, a recording scope,
views, mixed dtypes, integer math) takes the generic path unchanged.

The nodes built here are ``OpNode`` subclasses (``FastNode``) with the same
entry, saved tensors and names; ``FastNode.apply`` runs the op's NumPy VJP
(``numpy_vjps``) when backward is not recorded (no ``create_graph``) and no
trace is open, else the generic rule. See docs/eager_speed.md.
"""

from __future__ import annotations

import numpy as np
from numpy import ndarray

from ..ir.bind import _AMBIENT, handler_for
from ..ir.optable import OPS
from ..tracer import core as _tracer_core
from ..tracer.core import _state as _trace
from . import bigmath, capture, sizes
from . import dtypes as D
from .capture import _state as _capture
from .dual import ACTIVE as _DUAL
from .fast_record import _OUT_SLOTS, _record, _record1, _record2, _record_number, _result
from .grad_mode import _mode
from .names import NAMES
from .node import node_class
from .numpy_vjps import NUMPY_VJPS, numpy_unbroadcast
from .record import _state
from .recorded import Entry, OpNode, rule_needs, scalar_edges
from .tensor_base import TensorBase

_new = object.__new__

#: The ambient handlers ``plain`` knows (the tracer's and the two of ``capture``/``sizes``,
#: all None outside a trace or tracing capture); with any other, ``handler_for`` decides.
_N_AMBIENT = (len(_AMBIENT) if set(_AMBIENT) == {_tracer_core._ambient, capture._ambient,
                                                  sizes._ambient} else -1)


# Ops compute with NumPy's floating-point errors ignored (inf and nan flow as in PyTorch).
# ``np.errstate(all="ignore")`` costs ~2 us per use; NumPy 2 keeps the error mode in a
# context variable, which costs ~0.3 us to set and reset directly.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _fp

    with np.errstate(all="ignore"):
        _fp_ignore = _fp.get()
except ImportError:  # pragma: no cover - other NumPy versions
    class _ErrstateVar:
        """``set``/``reset`` of the error mode through ``np.errstate``."""

        @staticmethod
        def set(_):
            state = np.errstate(all="ignore")
            state.__enter__()
            return state

        @staticmethod
        def reset(state):
            state.__exit__(None, None, None)

    _fp, _fp_ignore = _ErrstateVar(), None


class quiet_fp:
    """``with quiet_fp():`` - NumPy's floating-point errors ignored, as ``np.errstate(
    all="ignore")`` but through the context variable directly."""

    __slots__ = ("token",)

    def __enter__(self):
        self.token = _fp.set(_fp_ignore)

    def __exit__(self, *exc):
        _fp.reset(self.token)


_FLOATS = frozenset("f")
_PY_SCALARS = (float, int)


# --- nodes ------------------------------------------------------------------------------


class FastNode(OpNode):
    """The ``OpNode`` of one IR op recorded by the fast path (its entry is made on demand)."""

    __slots__ = ("_plan", "_slots")

    @property
    def _entries(self) -> list:
        """The node's one entry (made when the generic backward needs it)."""
        p = self._plan
        slots = self._slots
        if p.const:
            dt = p.dtype
            slots = tuple(np.asarray(x, dt) if s is None else x
                          for x, s in zip(slots, p.slots))
        e = Entry(p.opdef, p.entry_kw, slots, _OUT_SLOTS)
        e.mask, e.needs_out, e.needs_in = p.mask, (p.needs_out,), p.needs_in
        return [e]

    def apply(self, grads: list, create_graph: bool) -> list:
        plan = self._plan
        vjp = plan.vjp
        g = grads[0]
        if (create_graph or vjp is None or type(g) is not ndarray or _capture.stack
                or _trace.stack or (len(_AMBIENT) != _N_AMBIENT and handler_for(()) is not None)):
            return OpNode.apply(self, grads, create_graph)
        saved = self._saved
        name = type(self).__name__
        out = saved[0].data(name) if plan.needs_out else None
        # unpacked last operand first, as PyTorch's MulBackward0 unpacks other, then self
        args = list(self._slots)
        for pos, s in plan.unpack:
            args[pos] = saved[s].data(name)
        for pos in plan.unread:
            args[pos] = None
        for pos in plan.const_read:
            args[pos] = np.asarray(args[pos], plan.dtype)
        cts = vjp(g, out, args, plan.mask, plan.in_types, plan.entry_kw)
        if cts is None:
            return OpNode.apply(self, grads, create_graph)
        if plan.simple:  # one tensor operand, first
            ct = cts[0]
            if ct is None:
                return [None]
            shape, dtype = plan.in_types[0]
            if type(ct) is not ndarray:
                ct = np.asarray(ct)
            if ct.shape != shape:
                ct = numpy_unbroadcast(ct, shape)
            if ct.dtype != dtype:
                ct = ct.astype(dtype)
            return [ct]
        res = [None] * self._nin
        for i, k, shape, dtype in plan.post:
            ct = cts[i]
            if ct is None:
                continue
            if type(ct) is not ndarray:
                ct = np.asarray(ct)
            if ct.shape != shape:
                ct = numpy_unbroadcast(ct, shape)
            if ct.dtype != dtype:
                ct = ct.astype(dtype)
            res[k] = ct if res[k] is None else res[k] + ct
        return res


def _sum_impl(x, *, axes):
    return np.add.reduce(x, axis=axes)  # np.sum's own ufunc call, without its wrappers


#: Faster equivalents of op-table NumPy references (same ufunc, fewer Python layers).
_IMPLS = {"reduce_sum": _sum_impl}


class _Plan:
    """What the generic path decides for one kind of call (see the module docstring)."""

    __slots__ = ("avals", "big", "cls", "const", "const_read", "dtype", "entry_kw", "fn",
                 "in_types", "input_pos", "mask", "needed", "needs_in", "needs_out",
                 "number_edges", "opdef", "out_type", "post", "record", "simple", "slots",
                 "targets", "unpack", "unread", "vjp")


_PLANS: dict = {}


def _make_plan(key: str, irop: str, kwargs: dict, operands: list, record: bool):
    """The plan of ``irop`` on ``operands`` (Tensors and Python scalars), or None."""
    tensors = [x for x in operands if isinstance(x, TensorBase)]
    dt = D.result_type(*operands)
    npdt = np.dtype(dt)
    if npdt.kind not in _FLOATS or any(t._cell.value.dtype != npdt for t in tensors):
        return None
    opdef = OPS[irop]
    p = _Plan()
    p.opdef, p.dtype, p.fn, p.entry_kw = opdef, npdt, _IMPLS.get(irop, opdef.impl), kwargs
    inputs: list = []
    slots = []
    for x in operands:
        if isinstance(x, TensorBase):  # x * x: two inputs, two edges, two saved tensors
            slots.append(-1 - len(inputs))
            inputs.append(x)
        else:
            slots.append(None)  # a constant: filled per call
    p.slots = tuple(slots)
    p.const = None in p.slots
    if p.const and len(slots) != 2:
        return None  # (every fast op with a number operand is binary)
    p.input_pos = tuple(i for i, x in enumerate(operands) if isinstance(x, TensorBase))
    p.number_edges = scalar_edges(key, operands)
    p.big = irop in bigmath.FUNCTIONS
    arrays = [x._cell.value if isinstance(x, TensorBase) else np.asarray(x, npdt)
              for x in operands]
    in_types = tuple((a.shape, a.dtype) for a in arrays)
    (out_t,) = opdef.rule(tuple(_tt(a) for a in arrays), **kwargs)
    p.out_type = (tuple(out_t.shape), np.dtype(out_t.dtype))
    p.record = record
    p.cls = node_class(NAMES.get(key, key), FastNode)
    p.mask = tuple(s is not None and inputs[-1 - s]._rg for s in slots)
    p.in_types = in_types
    p.targets = tuple(-1 - s if s is not None else -1 for s in slots)
    if not record:
        p.vjp = None
        return p
    needs_out, needs_in = rule_needs(irop, tuple(sorted(kwargs.items())), in_types,
                                     (p.out_type,), p.mask)
    p.needs_out = needs_out[0]
    p.needs_in = needs_in
    p.avals = {0: p.out_type, **{s: ty for s, ty in zip(slots, in_types) if s is not None}}
    p.needed = tuple(sorted({s for s, n in zip(slots, needs_in) if n and s is not None}))
    # backward's reads, last operand first; the tensor operands it does not read
    p.unpack = tuple((i, s) for i, s in reversed(tuple(enumerate(slots)))
                     if s is not None and s in p.needed)
    p.unread = tuple(i for i, s in enumerate(slots) if s is not None and s not in p.needed)
    p.simple = slots == (-1,)
    # operand index, input index, type: where each tensor operand's cotangent goes
    p.post = tuple((i, k, *ty) for i, (k, ty) in enumerate(zip(p.targets, in_types)) if k >= 0)
    p.const_read = tuple(i for i, (s, n) in enumerate(zip(slots, needs_in)) if s is None and n)
    p.vjp = NUMPY_VJPS.get(irop)
    return p


def _tt(a):
    from ..ir.types import TensorType

    return TensorType(a.shape, a.dtype)


def plain() -> bool:
    """``handler_for(()) is None`` (no trace or tracing capture open), in two lookups when
    the only ambient handlers are the known ones (the tracer's and the captures')."""
    if _capture.stack or _trace.stack:
        return False
    return len(_AMBIENT) == _N_AMBIENT or handler_for(()) is None


def run(key: str, irop: str, operands: list, kwargs: dict | None = None):
    """``irop`` on ``operands`` as the operation ``key``, or None for the generic path.

    Python scalars go to the ufunc as they are: NumPy converts them to the array's
    dtype (weak scalars), as the generic path's promotion does.
    """
    if len(operands) == 2 and kwargs is None:
        return run2(key, irop, operands[0], operands[1])
    if _state.scope is not None or _capture.stack or _trace.stack or _DUAL[0]:
        return None
    sig = [key, irop]
    arrays = []
    rg = False
    for x in operands:
        if isinstance(x, TensorBase):
            d = x._cell.value
            if type(d) is not ndarray or x._base is not None:
                return None
            sig += (d.dtype, d.shape, x._rg)
            arrays.append(d)
            rg = rg or x._rg
        elif type(x) in _PY_SCALARS:
            sig.append(type(x))
            arrays.append(x)
        else:
            return None
    if len(_AMBIENT) != _N_AMBIENT and handler_for(()) is not None:
        return None
    record = rg and _mode.grad
    sig.append(record)
    if kwargs:
        sig.append(tuple(kwargs.items()))
    sig = tuple(sig)
    plan = _PLANS.get(sig, _PLANS)
    if plan is _PLANS:
        plan = _new_plan(sig, key, irop, kwargs or {}, operands, record)
    if plan is None:
        return None
    return _finish(plan, arrays, kwargs, operands, record)


def run1(key: str, irop: str, x, kwargs: dict | None = None, kw_key: tuple | None = None):
    """``run(key, irop, [x], kwargs)`` for a Tensor ``x``, with less dispatch (``kw_key``:
    ``tuple(kwargs.items())`` if the caller has it)."""
    if _state.scope is not None or _capture.stack or _trace.stack or _DUAL[0]:
        return None
    d = x._cell.value
    if type(d) is not ndarray or x._base is not None:
        return None
    if len(_AMBIENT) != _N_AMBIENT and handler_for(()) is not None:
        return None
    rg = x._rg
    record = rg and _mode.grad
    if kwargs and kw_key is None:
        kw_key = tuple(kwargs.items())
    sig = (key, irop, d.dtype, d.shape, rg, record, kw_key)
    plan = _PLANS.get(sig, _PLANS)
    if plan is _PLANS:
        plan = _new_plan(sig, key, irop, kwargs or {}, [x], record)
    if plan is None:
        return None
    if plan.big:
        return _finish(plan, [d], kwargs, [x], record)
    token = _fp.set(_fp_ignore)
    try:
        out = plan.fn(d, **kwargs) if kwargs else plan.fn(d)
    finally:
        _fp.reset(token)
    if type(out) is not ndarray or out.dtype != plan.dtype:
        out = np.asarray(out, dtype=plan.dtype)
    t = _result(out)
    if record:
        _record1(plan, x, t)
    return t


def run2(key: str, irop: str, a, b):
    """``run(key, irop, [a, b])`` with less dispatch (Tensors and Python scalars)."""
    if _state.scope is not None or _capture.stack or _trace.stack or _DUAL[0]:
        return None
    ta = type(a)
    tb = type(b)
    if ta in _PY_SCALARS:
        if not isinstance(b, TensorBase):
            return None
        db = b._cell.value
        if type(db) is not ndarray or b._base is not None:
            return None
        rg = b._rg
        record = rg and _mode.grad
        sig = (key, irop, ta, db.dtype, db.shape, rg, record)
        da = a
    elif not isinstance(a, TensorBase):
        return None
    else:
        da = a._cell.value
        if type(da) is not ndarray or a._base is not None:
            return None
        if tb in _PY_SCALARS:
            rg = a._rg
            record = rg and _mode.grad
            sig = (key, irop, da.dtype, da.shape, rg, tb, record)
            db = b
        elif isinstance(b, TensorBase):
            db = b._cell.value
            if type(db) is not ndarray or b._base is not None:
                return None
            rg = a._rg or b._rg
            record = rg and _mode.grad
            sig = (key, irop, da.dtype, da.shape, a._rg, db.dtype, db.shape, b._rg, record,
                   a is b)
        else:
            return None
    if len(_AMBIENT) != _N_AMBIENT and handler_for(()) is not None:
        return None
    plan = _PLANS.get(sig, _PLANS)
    if plan is _PLANS:
        plan = _new_plan(sig, key, irop, {}, [a, b], record)
    if plan is None:
        return None
    if plan.big:
        return _finish(plan, [da, db], None, [a, b], record)
    token = _fp.set(_fp_ignore)
    try:
        out = plan.fn(da, db)
    finally:
        _fp.reset(token)
    if type(out) is not ndarray or out.dtype != plan.dtype:
        out = np.asarray(out, dtype=plan.dtype)
    t = _result(out)
    if record:
        if plan.const:
            _record_number(plan, a, b, t)
        else:
            _record2(plan, a, b, t)
    return t


def untracked(irop: str, x, *numbers):
    """``irop`` on a float Tensor ``x`` and Python numbers when nothing records (no grad to
    record, no trace, capture, enclosing operation or forward-mode level): the op's NumPy
    reference on the array, as the generic path computes it; None otherwise."""
    d = x._cell.value
    if (type(d) is not ndarray or d.dtype.kind not in _FLOATS or (x._rg and _mode.grad)
            or _DUAL[0] or _state.scope is not None or not plain()):
        return None
    for n in numbers:
        if type(n) not in _PY_SCALARS:
            return None
    token = _fp.set(_fp_ignore)
    try:
        out = OPS[irop].impl(d, *numbers)
    finally:
        _fp.reset(token)
    if type(out) is not ndarray or out.dtype != d.dtype:
        out = np.asarray(out, dtype=d.dtype)
    return _result(out)


def _new_plan(sig, key, irop, kwargs, operands, record):
    plan = _make_plan(key, irop, kwargs, operands, record)
    if len(_PLANS) >= 4096:
        _PLANS.clear()
    _PLANS[sig] = plan
    return plan


def _finish(plan, arrays, kwargs, operands, record):
    token = _fp.set(_fp_ignore)
    try:
        out = _compute(plan, arrays, kwargs)
    finally:
        _fp.reset(token)
    dt = plan.dtype
    if type(out) is not ndarray or out.dtype != dt:
        out = np.asarray(out, dtype=dt)
    t = _result(out)
    if record:
        _record(plan, operands, t)
    return t


def _compute(plan: _Plan, arrays: list, kwargs):
    if plan.big:
        return bigmath.apply(plan.opdef.name, plan.fn, arrays)
    if kwargs:
        return plan.fn(*arrays, **kwargs)
    return plan.fn(*arrays)
