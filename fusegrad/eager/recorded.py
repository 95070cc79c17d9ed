"""``OpNode``: the node of one recorded Tensor operation, backpropagated with the VJP rules.

A user-facing operation (``x * y``, ``x.mean()``, ``x.norm()``) binds one or
more IR ops; they are recorded as a small sub-graph over *slots*: ``-1 - k``
is the operation's ``k``-th tensor input, ``j >= 0`` a value the operation
made, anything else a constant. Its backward walks that sub-graph in reverse
and calls ``VJP_RULES`` on each op, so eager and traced gradients share every
rule and composites need no rule of their own. Broadcasting is undone in one
place, ``vjp_rules.unbroadcast``.

Which values a rule reads is found once per (op, attributes, types, which
inputs need a gradient) by tracing the rule and keeping what its needed
cotangents depend on (``rule_needs``); only those are saved, so an in-place
change to a value no rule reads is not an error (as in PyTorch).
"""

from __future__ import annotations

import functools

import numpy as np

from ..ir import array as A
from ..ir.bind import bind, handler_for
from ..ir.types import TensorType
from ..passes.autodiff.vjp_rules import VJP_RULES, load_families, unbroadcast
from ..passes.simplify import dce
from ..tracer import Trace
from . import tensor_base as TB
from .node import Node
from .numpy_vjps import NUMPY_VJPS, numpy_unbroadcast

load_families()  # every op's VJP rule: the eager backward looks them up by name


class Entry:
    """One recorded IR op: ``outs = opdef(*slots, **kwargs)``."""

    __slots__ = ("kwargs", "mask", "needs_in", "needs_out", "opdef", "outs", "slots")

    def __init__(self, opdef, kwargs, slots, outs):
        self.opdef = opdef
        self.kwargs = kwargs
        self.slots = slots
        self.outs = outs
        self.mask = None
        self.needs_out = self.needs_in = ()


def _is_slot(s) -> bool:
    return isinstance(s, int)


@functools.lru_cache(maxsize=4096)
def rule_needs(name: str, kw_key: tuple, in_types: tuple, out_types: tuple, mask: tuple):
    """Which results and operands ``name``'s VJP rule reads to make the cotangents in ``mask``."""
    rule = VJP_RULES[name]
    kwargs = dict(kw_key)
    in_types = tuple(TensorType(*t) for t in in_types)
    out_types = tuple(TensorType(*t) for t in out_types)
    with Trace(f"{name}_needs") as t:
        gs = [t.new_arg(ty) for ty in out_types]
        outs = [t.new_arg(ty) for ty in out_types]
        ins = [t.new_arg(ty) for ty in in_types]
        single = len(out_types) == 1
        cts = rule(gs[0] if single else tuple(gs), outs[0] if single else tuple(outs), *ins,
                   **kwargs)
        for c, m in zip(cts, mask):
            if m and isinstance(c, BaseException):  # no derivative for a needed operand
                raise c
        results = [t.to_value(c) for c, m in zip(cts, mask) if m and c is not None]
        fn = dce(t.builder.build(results))
    used = set(fn.results)
    for op in fn.ops:
        used.update(op.operands)
    return (tuple(o.value in used for o in outs), tuple(i.value in used for i in ins))


def _kw_key(kwargs: dict) -> tuple:
    return tuple(sorted(kwargs.items()))


@functools.lru_cache(maxsize=1024)
def placeholder(ty):
    """A stand-in for a value no needed cotangent depends on (rules still take it).

    Read-only (a broadcast view), so one per ``(shape, dtype)`` is shared."""
    return np.broadcast_to(np.zeros((), ty[1]), ty[0])


#: PyTorch's names of saved inputs (``_saved_self``, ...) -> input slot.
_SAVED_ATTRS = {"self": -1, "other": -2, "exponent": -2, "mat2": -2, "tensor": -2}


class OpNode(Node):
    """The ``grad_fn`` of a recorded operation (subclassed per PyTorch name)."""

    __slots__ = ("_avals", "_entries", "_nin", "_out_slots", "_replay", "_saved")

    def __init__(self, next_edges, entries, out_slots, avals, saved, replay):
        super().__init__(next_edges)
        self._nin = len(next_edges)
        self._entries = entries  # the live entries, in forward order
        self._out_slots = out_slots
        self._avals = avals  # slot -> (shape, dtype) of every slot that carries a cotangent
        self._saved = saved  # slot -> SavedTensor
        self._replay = replay  # entries recomputing intermediates under create_graph

    @property
    def num_outputs(self) -> int:
        return len(self._out_slots)

    def release(self) -> None:
        for s in self._saved.values():
            s.free()

    # --- PyTorch's saved-tensor attributes ------------------------------------------

    def _saved_slot(self, key: str):
        if key == "result":
            return self._out_slots[0] if self._out_slots else None
        return _SAVED_ATTRS.get(key)

    def __getattr__(self, attr: str):
        for prefix, raw in (("_raw_saved_", True), ("_saved_", False)):
            if attr.startswith(prefix):
                slot = self._saved_slot(attr[len(prefix):])
                saved = self._saved.get(slot) if slot is not None else None
                if saved is not None:
                    return saved if raw else saved.tensor(self)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    # --- backward -------------------------------------------------------------------

    def apply(self, grads: list, create_graph: bool) -> list:
        if not create_graph and len(self._entries) == 1:
            res = self._apply_one(self._entries[0], grads)
            if res is not None:
                return res
        env: dict = {}
        cts: dict = {}
        for slot, g in zip(self._out_slots, grads):
            if g is not None:
                cts[slot] = g
        for e in reversed(self._entries):
            if not any(o in cts for o in e.outs):
                continue
            in_cts = self._run_rule(e, cts, env, create_graph)
            for s, m, ct in zip(e.slots, e.mask, in_cts):
                if m and isinstance(ct, BaseException):  # no derivative for this operand
                    raise ct
                if m and ct is not None:
                    self._add(cts, s, ct)
        return [cts.get(-1 - k) for k in range(self._nin)]

    def _apply_one(self, e: Entry, grads: list):
        """``apply`` of a node of one entry over its inputs, by the rule's NumPy
        transcription, without the general walk's dicts; None where it does not apply."""
        g = grads[0]
        if type(g) is not np.ndarray or self._out_slots != e.outs or len(e.outs) != 1:
            return None
        f = NUMPY_VJPS.get(e.opdef.name)
        if f is None or handler_for(()) is not None:
            return None
        for s, m in zip(e.slots, e.mask):
            if m and s >= 0:
                return None
        res = self._numpy_rule(f, e, g, {})
        if res is None:
            return None
        out = [None] * self._nin
        avals = self._avals
        for s, m, ct in zip(e.slots, e.mask, res):
            if not m or ct is None:
                continue
            if isinstance(ct, BaseException):  # no derivative for this operand
                raise ct
            shape, dtype = avals[s]
            if ct.shape != shape:
                ct = numpy_unbroadcast(ct, shape)
            if ct.dtype != dtype:
                ct = A.astype(ct, dtype)
            k = -1 - s
            out[k] = ct if out[k] is None else out[k] + ct
        return out

    def _run_rule(self, e: Entry, cts: dict, env: dict, create_graph: bool):
        if not create_graph and len(e.outs) == 1:
            f = NUMPY_VJPS.get(e.opdef.name)
            if f is not None and type(cts[e.outs[0]]) is np.ndarray and handler_for(()) is None:
                res = self._numpy_rule(f, e, cts[e.outs[0]], env)
                if res is not None:
                    return res
        return self._generic_rule(e, cts, env, create_graph)

    def _numpy_rule(self, f, e: Entry, g, env: dict):
        """The rule's NumPy transcription (``numpy_vjps``), or None if it does not apply."""
        out = self._value(e.outs[0], env, False) if e.needs_out[0] else None
        args = []
        types = []
        for s, n in zip(reversed(e.slots), reversed(e.needs_in)):  # other, then self
            if _is_slot(s):
                args.append(self._value(s, env, False) if n else None)
                types.append(self._avals[s])
            else:
                args.append(s)
                types.append((s.shape, s.dtype))
        args.reverse()
        types.reverse()
        res = f(g, out, args, e.mask, types, e.kwargs)
        if res is None:
            return None
        return tuple(np.asarray(c) if isinstance(c, np.generic) else c for c in res)

    def _generic_rule(self, e: Entry, cts: dict, env: dict, create_graph: bool):
        def arg(s, needed):
            if not _is_slot(s):
                return s
            return self._value(s, env, create_graph) if needed else placeholder(self._types(s))

        if len(e.outs) == 1:
            g = cts[e.outs[0]]
            out = arg(e.outs[0], e.needs_out[0])
        else:
            g = tuple(cts.get(o) for o in e.outs)
            out = tuple(arg(o, n) for o, n in zip(e.outs, e.needs_out))
        args = [arg(s, n) for s, n in zip(reversed(e.slots), reversed(e.needs_in))]
        args.reverse()  # unpacked other, then self (PyTorch's order)
        return VJP_RULES[e.opdef.name](g, out, *args, **e.kwargs)

    def _types(self, slot):
        return self._avals[slot]

    def _add(self, cts: dict, slot: int, ct) -> None:
        shape, dtype = self._avals[slot]
        if tuple(ct.shape) != shape:
            ct = numpy_unbroadcast(ct, shape) if type(ct) is np.ndarray and handler_for(
                ()) is None else unbroadcast(ct, shape)
        if ct.dtype != dtype:
            ct = A.astype(ct, dtype)
        cts[slot] = cts[slot] + ct if slot in cts else ct

    def _value(self, slot: int, env: dict, create_graph: bool):
        if slot in env:
            return env[slot]
        saved = self._saved.get(slot)
        if not create_graph:
            value = saved.data(self.name())
        elif saved is not None and saved.kind != "internal":
            value = saved.tensor(self)
        else:
            self._recompute(env)
            return env[slot]
        env[slot] = value
        return value

    def _recompute(self, env: dict) -> None:
        """Replay the ops making the intermediates, on tensors with history (create_graph)."""
        for e in self._replay:
            if all(o in env for o in e.outs):
                continue
            args = [self._value(s, env, True) if _is_slot(s) else s for s in e.slots]
            out = bind(e.opdef.name, *args, **e.kwargs)
            env.update(zip(e.outs, out if isinstance(out, tuple) else (out,)))


#: Operations whose Python-number operand PyTorch wraps as a tensor input: their node has
#: an edge ``(None, 0)`` for it (``(2 * a).grad_fn.next_functions`` has two entries).
_NUMBER_EDGE_OPS = frozenset({"add", "sub", "mul", "div"})
_NUMBER_EDGE = (None, 0)


def scalar_edges(key: str, operands) -> tuple:
    """The ``(None, 0)`` edges PyTorch's node of operation ``key`` has for Python numbers."""
    if key not in _NUMBER_EDGE_OPS:
        return ()
    return tuple(_NUMBER_EDGE for x in operands if not isinstance(x, TB.TensorBase))


def data_of(x):
    return x._data if isinstance(x, TB.TensorBase) else x
