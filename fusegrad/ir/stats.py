"""Counters of the work the transforms do: traces, compiles and generated modules.

``fg.compile_stats()`` returns a snapshot: per function name, how many times it
was traced (``traces``) and how many executables were built for it (``compiles``),
plus the number of generated modules imported (``modules``, each one Numba
compile or cache load). ``fg.compile_stats(reset=True)`` returns the snapshot and
sets every counter back to zero. The counters are process-wide and thread-safe.

It also times the phases of a compile for ``FUSEGRAD_LOG_COMPILES``: ``timed("trace")``
wraps a function so that its time (minus the time of timed phases it calls: each
moment counts once) adds to this thread's pending phases, which the executor takes
with ``take_phases()`` when it builds the compiled function.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter

from .. import _forksafe

_lock = _forksafe.lock()
_traces: Counter = Counter()
_compiles: Counter = Counter()
_modules = [0]


def count_trace(name: str) -> None:
    with _lock:
        _traces[name] += 1


def count_compile(name: str) -> None:
    with _lock:
        _compiles[name] += 1


def count_module() -> None:
    with _lock:
        _modules[0] += 1


def compile_stats(reset: bool = False) -> dict:
    """``{"traces": {name: n}, "compiles": {name: n}, "modules": n}`` (a copy)."""
    with _lock:
        snap = {"traces": dict(_traces), "compiles": dict(_compiles), "modules": _modules[0]}
        if reset:
            _traces.clear()
            _compiles.clear()
            _modules[0] = 0
    return snap


_phases = threading.local()


def timed(phase: str):
    """Decorator: the wrapped function's own time counts towards ``phase``."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            stack = _stack()
            now = time.perf_counter()
            if stack:  # pause the enclosing phase
                outer, since = stack[-1]
                _pending()[outer] += now - since
            stack.append((phase, now))
            try:
                return fn(*args, **kwargs)
            finally:
                done = time.perf_counter()
                _pending()[phase] += done - stack.pop()[1]
                if stack:
                    stack[-1] = (stack[-1][0], done)

        return run

    return wrap


def add_phase(phase: str, seconds: float) -> None:
    _pending()[phase] += seconds


def take_phases() -> dict[str, float]:
    """This thread's phase times since the last call (seconds), cleared."""
    out = dict(_pending())
    _phases.pending = Counter()
    return out


def _stack() -> list:
    if not hasattr(_phases, "stack"):
        _phases.stack = []
    return _phases.stack


def _pending() -> Counter:
    if not hasattr(_phases, "pending"):
        _phases.pending = Counter()
    return _phases.pending
