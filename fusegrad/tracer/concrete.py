"""Python values of traced values, where the argument values are known.

``fg.grad``, ``value_and_grad``, ``vjp``, ``jvp`` & co. trace the user's function on
the arrays they are called with. Such a trace carries a ``Concrete``: the values of
its parameters (arrays, or tracers of an enclosing trace that knows theirs). When the
user's code asks for a Python value of a tracer (``bool``, ``float``, ``int``, an
index, ``.item()``, ``np.asarray``, ``.tolist()``), the ops that tracer depends on are
evaluated with the NumPy reference implementations (each op at most once per trace),
the Python value is returned, and a ``Guard`` records the traced value and what Python
got. The trace is then valid for any arguments on which every guard gives the same
Python value again (``transforms.guards`` checks that before reusing compiled code).

A Python value is a constant of the trace: no derivative flows through it. So a
conversion (``float``, ``int``, ``complex``, ``.item()``, ``.tolist()``, ``__array__``)
of a value that *depends on a differentiated input* raises ``TracerConversionError``
instead of giving a wrong gradient (``Concrete.depends``: a float or complex value
computed, through ops other than ``stop_gradient`` and the ops with no derivative,
from a differentiated parameter or from a tracer of an enclosing trace that depends on
one there). ``bool()`` (``if``/``while``) and indices decide the path, not a value the
derivative flows through: they stay guarded. Abstract traces (``fg.jit``,
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
from .core import Trace, Tracer
from .messages import CONVERSIONS, concrete_error, conversion_error, user_location

#: ops through which no derivative flows: ``stop_gradient`` here; the autodiff pass
#: registers its list of ops with no derivative (``register_cuts``)
CUTS: set[str] = {"stop_gradient"}


def register_cuts(names) -> None:
    """Op names through which no derivative flows (a value computed by one does not
    depend on the op's operands for ``Concrete.depends``)."""
    CUTS.update(names)


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

    __slots__ = ("args", "dep", "guards", "no_array", "producer", "scanned", "trace", "vals",
                 "wrt")

    def __init__(self, trace: Trace, args: list, wrt=()):
        self.trace = trace
        self.args = dict(zip(trace.builder.params, args))  # arrays or enclosing tracers
        self.wrt = frozenset(trace.builder.params[k] for k in wrt)  # differentiated params
        self.dep: dict[Value, bool] = {}  # Value -> whether it depends on ``wrt``
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

    def _param_depends(self, v: Value) -> bool:
        if v in self.wrt:
            return True
        x = self.args.get(v)
        if x is None:
            x = next((obj for obj, p in self.trace.free.values() if p is v), None)
        return isinstance(x, Tracer) and depends(x)

    def depends(self, v: Value) -> bool:
        """Whether ``v`` is a float or complex value through which a derivative flows
        back to a differentiated input (memoised; one pass over the ops it reads)."""
        dep = self.dep
        todo = [v]
        while todo:
            w = todo[-1]
            if w in dep:
                todo.pop()
                continue
            if not w.type.is_inexact:
                dep[w] = False
                todo.pop()
                continue
            op = self._op(w)
            if op is None:
                dep[w] = self._param_depends(w)
                todo.pop()
                continue
            if op.name in CUTS:
                dep[w] = False
                todo.pop()
                continue
            missing = [u for u in op.operands if u not in dep]
            if missing:
                todo += missing
                continue
            dep[w] = any(dep[u] for u in op.operands)
            todo.pop()
        return dep[v]

    def convert(self, t: Tracer, kind: str, construct: str, msg_kind: str):
        if kind == "array" and t.value in self.no_array:
            raise concrete_error(t.value.type, CONVERSIONS["array"], msg_kind, None)
        if kind in CONVERSIONS and self.depends(t.value):
            raise conversion_error(t.value.type, kind, None, dependent=True)
        try:
            a = self.peek(t.value)
        except NotConcrete as e:
            if kind in CONVERSIONS:
                raise conversion_error(t.value.type, kind, e.who, dependent=False) from None
            raise concrete_error(t.value.type, construct, msg_kind, e.who) from None
        result = CONVERT[kind](a)
        self.guards.append(Guard(t.value, kind, result, user_location()))
        return result


def depends(t: Tracer) -> bool:
    """Whether tracer ``t`` depends on an input its trace differentiates (False in a
    trace that does not know its values)."""
    source = t._trace.source
    return source is not None and source.depends(t.value)


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
