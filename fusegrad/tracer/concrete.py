"""Python control flow on traced values, where the argument values are known.

``fg.grad``, ``value_and_grad``, ``vjp``, ``jvp`` & co. trace the user's function on
the arrays they are called with. Such a trace carries a ``Concrete``: the values of
its parameters (arrays, or tracers of an enclosing trace that knows theirs). When the
user's code asks for a Python value of a tracer (``bool``, ``float``, ``int``, an
index, ``.item()``, ``np.asarray``, ``.tolist()``), the ops that tracer depends on are
evaluated with the NumPy reference implementations (each op at most once per trace),
the Python value is returned, and a ``Guard`` records the traced value and what Python
got. The trace is then valid for any arguments on which every guard gives the same
Python value again (``transforms.guards`` checks that before reusing compiled code).

A value returned to Python is a constant of the trace: no derivative flows through
``float(x)`` or ``np.asarray(x)`` (as in HIPS autograd). Abstract traces (``fg.jit``,
``fg.vmap``, the bodies of ``fg.cond`` / ``fg.while_loop``) have no ``Concrete`` and
keep the concretisation error.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from ..ir import Value
from ..ir.bind import eval_numpy
from ..ir.optable import OPS
from .core import Trace, Tracer, _concrete_error, user_location


class Guard(NamedTuple):
    """A traced value whose Python value the trace depends on."""

    value: Value  # a value of the traced Function
    kind: str  # "bool", "float", "int", "index", "complex", "item", "array", "tolist"
    expected: object  # the Python value the user's code got
    loc: str | None  # file:line of the conversion


def _array(a: np.ndarray) -> np.ndarray:
    out = np.array(a, copy=True)
    out.flags.writeable = False
    return out


#: guard kind -> the Python value of a concrete array (what the Tracer method returns)
CONVERT = {
    "bool": bool,
    "float": float,
    "int": int,
    "index": operator.index,
    "complex": complex,
    "item": lambda a: np.asarray(a).item(),
    "array": lambda a: _array(np.asarray(a)),
    "tolist": lambda a: np.asarray(a).tolist(),
}


def same(a, b) -> bool:
    """Whether two converted values are identical (floats bit for bit: -0.0 is not 0.0,
    a NaN is itself)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float | complex):
        return np.asarray(a).tobytes() == np.asarray(b).tobytes()
    return a == b


class NotConcrete(Exception):
    """A value depends on an abstract trace (``who``: its kind)."""

    def __init__(self, who: str | None):
        super().__init__(who)
        self.who = who


class Concrete:
    """The parameter values of one trace, and the values of its ops on demand."""

    __slots__ = ("args", "guards", "no_array", "producer", "scanned", "trace", "vals")

    def __init__(self, trace: Trace, args: list):
        self.trace = trace
        self.args = dict(zip(trace.builder.params, args))  # arrays or enclosing tracers
        self.vals: dict[Value, np.ndarray] = {}
        self.producer: dict[Value, object] = {}
        self.scanned = 0
        self.guards: list[Guard] = []
        self.no_array: set[Value] = set()  # values np.asarray must not convert

    def _param(self, v: Value):
        if v in self.args:
            x = self.args[v]
        else:
            x = next((obj for obj, p in self.trace.free.values() if p is v), None)
        if isinstance(x, Tracer):
            return peek(x)
        if x is None or not hasattr(x, "__array__"):
            raise NotConcrete(None)
        return np.asarray(x)

    def _op(self, v: Value):
        ops = self.trace.builder.ops
        while self.scanned < len(ops):
            op = ops[self.scanned]
            for r in op.results:
                self.producer[r] = op
            self.scanned += 1
        return self.producer.get(v)

    def peek(self, v: Value) -> np.ndarray:
        """The value of ``v`` on this trace's arguments (no guard recorded)."""
        vals = self.vals
        todo = [v]
        while todo:
            w = todo[-1]
            if w in vals:
                todo.pop()
                continue
            op = self._op(w)
            if op is None:
                vals[w] = self._param(w)
                todo.pop()
                continue
            missing = [u for u in op.operands if u not in vals]
            if missing:
                todo += missing
                continue
            out = eval_numpy(OPS[op.name], [vals[u] for u in op.operands], op.attrs,
                             op.regions)
            vals.update(zip(op.results, out if len(op.results) > 1 else (out,)))
            todo.pop()
        return vals[v]

    def convert(self, t: Tracer, kind: str, construct: str, msg_kind: str):
        if kind == "array" and t.value in self.no_array:
            raise _concrete_error(t, construct, msg_kind, None)
        try:
            a = self.peek(t.value)
        except NotConcrete as e:
            raise _concrete_error(t, construct, msg_kind, e.who) from None
        result = CONVERT[kind](a)
        self.guards.append(Guard(t.value, kind, result, user_location()))
        return result


def peek(t: Tracer) -> np.ndarray:
    """The value of tracer ``t`` if its trace knows its arguments' values."""
    source = t._trace.source
    if source is None:
        raise NotConcrete(t._trace.kind)
    return source.peek(t.value)


def concrete_leaves(leaves) -> bool:
    """Whether a trace of these argument leaves can know their values (arrays, scalars
    and tracers of enclosing traces, not abstract types)."""
    return all(isinstance(x, Tracer) or hasattr(x, "__array__") or isinstance(
        x, int | float | complex | bool) for x in leaves)
