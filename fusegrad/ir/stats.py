"""Counters of the work the transforms do: traces, compiles and generated modules.

``fg.compile_stats()`` returns a snapshot: per function name, how many times it
was traced (``traces``) and how many executables were built for it (``compiles``),
plus the number of generated modules imported (``modules``, each one Numba
compile or cache load). ``fg.compile_stats(reset=True)`` returns the snapshot and
sets every counter back to zero. The counters are process-wide and thread-safe.
"""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
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
