"""Reusing value-guarded traces: a few traces per signature, keyed by guard outcomes.

A trace made on concrete arguments (``tracer.concrete``) may depend on Python values
of traced values: its ``guards``. Its compiled code is valid for other arguments only
while every guard gives the same Python value again. ``Guarded`` keeps the traces of
one function and signature (most recently used first, at most ``MAX_TRACES``); a call
evaluates the guards of each trace in turn, with one small compiled function per
trace (the guard values as results: ``guard_function``), and runs the first trace
whose guards all hold, else the transform traces again and adds the new trace.

The compiled guard function is used only where, on the first arguments it is checked
on, it gives exactly the Python values the NumPy interpreter gives (what tracing
evaluates with; a compiled sum may round differently); otherwise that trace's guards
are evaluated with the NumPy interpreter. Inside an enclosing
trace (``grad(grad(f))``), the guard values are computed into that trace and turned
into Python values there, which records them as guards of the enclosing trace.

A function whose guards fail on nearly every call (``float(x)`` of an argument that
changes per call) would compile on every call: after ``RETRACE_WINDOW`` calls with
at least ``RETRACE_LIMIT`` retraces, ``RetraceWarning`` is issued once and that
signature is traced on every call and run with the NumPy interpreter (no compiles).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, deque

from .. import _forksafe, config
from ..ir import evaluate
from ..ir.printer import print_function
from ..passes.simplify import dce
from ..runtime.compiled import executable
from ..runtime.interpreter import run
from ..tracer import Tracer
from ..tracer.concrete import CONVERT, same
from ..tracer.core import _state as _trace_state

MAX_TRACES = 8
RETRACE_WINDOW = 8
RETRACE_LIMIT = 6


class RetraceWarning(UserWarning):
    """A function under ``fg.grad`` & co. takes a Python value of a traced value (``float(x)``,
    ``if x > 0``) that differs on nearly every call, so it is traced on every call."""


# Guard functions with equal text compute the same values: one object (and one compile)
# per text, so that the traces of one function's branches share their guard function.
_canonical: OrderedDict[str, object] = OrderedDict()
_canonical_lock = _forksafe.lock()


def _shared(fn):
    text = print_function(fn)
    with _canonical_lock:
        known = _canonical.get(text)
        if known is not None:
            _canonical.move_to_end(text)
            return known
        _canonical[text] = fn
        while len(_canonical) > 256:
            _canonical.popitem(last=False)
    return fn


class _Entry:
    """One trace's plan, its guard function and how to evaluate it."""

    __slots__ = ("compiled", "fn", "plan")

    def __init__(self, plan):
        self.plan = plan
        traced = plan.traced
        fn = traced.function.replace(results=tuple(g.value for g in traced.guards),
                                     name=f"{traced.function.name}_guards")
        self.fn = _shared(dce(fn))  # exactly the ops tracing evaluated (no rewrites)
        self.compiled: bool | None = None  # None: not decided yet

    def values(self, args) -> tuple:
        if self.compiled is None:  # compiled where it agrees with NumPy (sums may round apart)
            if config.DISABLE_JIT:
                self.compiled = False
            else:
                ref, got = run(self.fn, *args), executable(self.fn, "guards")(*args)
                self.compiled = all(same(CONVERT[g.kind](a), CONVERT[g.kind](b)) for g, a, b
                                    in zip(self.plan.traced.guards, ref, got))
                return ref
        if self.compiled:
            return executable(self.fn, "guards")(*args)
        return run(self.fn, *args)

    def check(self, leaves, memo: dict | None = None) -> tuple[bool, str | None]:
        """Whether every guard holds on ``leaves`` (and the line of the first that fails);
        ``memo``: guard values already computed for these arguments, per guard function."""
        args = (*leaves, *self.plan.traced.free)
        guards = self.plan.traced.guards
        if _trace_state.stack or any(isinstance(a, Tracer) for a in args):
            got = evaluate(self.fn, *args)  # into the enclosing trace: guards there too
        else:
            key = (self.fn, self.compiled, tuple(map(id, self.plan.traced.free)))
            got = memo.get(key) if memo is not None else None
            try:
                if got is None:
                    got = self.values(args)
            except Exception:  # a path's guard may not evaluate on other arguments
                return False, guards[0].loc
            if memo is not None:
                memo[(self.fn, self.compiled, tuple(map(id, self.plan.traced.free)))] = got
        for g, v in zip(guards, got):
            if not same(CONVERT[g.kind](v), g.expected):
                return False, g.loc
        return True, None


class Guarded:
    """The traces of one function for one signature, most recently used first."""

    def __init__(self, who: str, f):
        self.who, self.f = who, f
        self.entries: list[_Entry] = []
        self.history: deque = deque(maxlen=RETRACE_WINDOW)  # True: that call retraced
        self.interpret = False  # retraced too often: trace per call, never compile
        self.failed: str | None = None  # line of the last guard that failed
        self.lock = _forksafe.lock()

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, leaves):
        """The plan of a trace whose guards hold on ``leaves``, or None (trace again)."""
        if self.interpret:
            return None
        memo: dict = {}
        for e in list(self.entries):
            ok, loc = e.check(leaves, memo)
            if ok:
                self._used(e)
                return e.plan
            self.failed = self.failed or loc
        return None

    def fast(self, args):
        """``lookup`` for plain ndarray arguments of the signature, when every trace has
        no closed-over values and compiled guard and gradient code: the plan, or None
        (take the general path)."""
        if self.interpret:
            return None
        memo: dict = {}  # the traces of one function's paths often share a guard function
        for e in list(self.entries):
            if e.compiled is not True or e.plan.exe is None or e.plan.traced.free:
                return None
            got = memo.get(e.fn)
            if got is None:
                got = memo[e.fn] = executable(e.fn, "guards").call_unchecked(args)
            if all(same(CONVERT[g.kind](v), g.expected)
                   for g, v in zip(e.plan.traced.guards, got)):
                self._used(e)
                return e.plan
        return None

    def _used(self, e: _Entry) -> None:
        with self.lock:
            self.history.append(False)
            if self.entries and self.entries[0] is not e and e in self.entries:
                self.entries.remove(e)
                self.entries.insert(0, e)

    def add(self, plan) -> None:
        with self.lock:
            if self.entries:
                self.history.append(True)
            if (len(self.history) == RETRACE_WINDOW and sum(self.history) >= RETRACE_LIMIT
                    and not self.interpret):
                self.interpret = True
                _warn_retrace(self.who, self.f, self.failed or plan.traced.guards[0].loc)
            if self.interpret:
                plan.interpret = True
                return
            self.entries.insert(0, _Entry(plan))
            del self.entries[MAX_TRACES:]
        self.failed = None


def cached(plans: dict, key, leaves):
    """The cached plan for signature ``key`` usable on ``leaves``, or None."""
    hit = plans.get(key) if key is not None else None
    if isinstance(hit, Guarded):
        return hit.lookup(leaves)
    return hit


def store(plans: dict, key, plan, who: str, f) -> None:
    """Cache ``plan`` (cacheable) for signature ``key``: with the traces of its other
    paths if it has guards."""
    if not plan.traced.guards:
        plans[key] = plan
        return
    hit = plans.get(key)
    if not isinstance(hit, Guarded):
        hit = plans[key] = Guarded(who, f)
    hit.add(plan)


def enter(plan, leaves) -> None:
    """A new trace's guards, when it is applied inside an enclosing trace: computed and
    turned into Python values there (guards of the enclosing trace)."""
    if plan.traced.guards and (_trace_state.stack or any(
            isinstance(a, Tracer) for a in (*leaves, *plan.traced.free))):
        _Entry(plan).check(leaves)


_warned: set = set()
_warned_lock = _forksafe.lock()


def _warn_retrace(who: str, f, loc: str | None) -> None:
    key = (who, getattr(f, "__code__", None) or id(f))
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    name = getattr(f, "__name__", "f")
    where = f" at {loc}" if loc else ""
    msg = (f"fg.{who}({name}) was traced again on {RETRACE_LIMIT} of the last "
           f"{RETRACE_WINDOW} calls: the Python value it takes of a traced value{where} "
           "(float(), int(), .item(), np.asarray(), or an if/while condition) differs "
           "between calls, and each new value needs a new trace. It is now traced on "
           "every call and run with the NumPy interpreter, without compiling. Keep the "
           "value traced (fnp.where, fg.cond, fg.while_loop) to compile it once.")
    filename, _, line = (loc or "").rpartition(":")
    warnings.warn_explicit(msg, RetraceWarning, filename or "<unknown>",
                           int(line) if line.isdigit() else 0)
