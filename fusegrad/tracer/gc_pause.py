"""``paused()``: the cyclic garbage collector off while a program is traced or loaded.

Tracing a GPT training step makes ~2,600 ops, their values, tracers and the eager
layer's records; loading its compiled form makes as many IR objects again. Each
700 allocations start a collection, and the older generations' collections walk
every object the process holds (NumPy's, llvmlite's, the model's): a tenth of a warm
start. Those objects are not garbage, and what these phases drop is freed by
reference counting, so the collector is paused for them and runs again after (only
if it was on: a program that turned it off keeps it off). Process-wide, as the
collector is: the last thread to leave turns it back on; a child forked meanwhile
starts with it as its parent had it before.
"""

from __future__ import annotations

import contextlib
import gc
import os

from .. import _forksafe

_lock = _forksafe.lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


def _after_fork_in_child() -> None:
    global _depth
    if _depth and _was_enabled:
        gc.enable()
    _depth = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
