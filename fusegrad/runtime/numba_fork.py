"""A child forked while another thread compiles can compile too.

Numba compiles under one process-wide lock (``global_compiler_lock``), and llvmlite
makes every call into LLVM under another. A fork copies only the forking thread: a
compile running in another thread is abandoned in the child, with both locks held by a
thread that is not there, so the child's first compile would wait forever.

Around ``os.fork()`` this module therefore:

* before the fork, waits for the LLVM call in progress, if any, to return, and holds
  llvmlite's lock across the fork: the child's copy of LLVM's state is then never
  caught half-way through a call (the fork waits at most one LLVM call: an
  optimisation pass over one module, a second or so);
* in the child, if Numba's compiler lock was held by another thread, re-creates it
  unlocked and forgets the abandoned compile: the typing call stacks are emptied, the
  dispatchers it was compiling no longer count as being compiled (Numba would take a
  call to them for recursion), and the locks of ``functools.cached_property`` (one per
  property before Python 3.12, held while Numba's analyses compute one) are released.
  The abandoned compile leaves nothing else that a later compile reads: a dispatcher
  records a signature only once it is compiled, and compiled code joins the JIT engine
  as whole, linked modules. This costs the child a walk over the garbage collector's
  objects (about 50 ms), only after such a fork.

The hooks do nothing until Numba has been imported.
"""

from __future__ import annotations

import functools
import gc
import os
import sys


def _llvm_lock():
    """llvmlite's lock around LLVM calls (an ``RLock``), or None if not loaded."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lock = getattr(getattr(getattr(ffi, "lib", None), "_lock", None), "_lock", None)
    return lock if hasattr(lock, "acquire") else None


def _before() -> None:
    lock = _llvm_lock()
    if lock is not None:
        lock.acquire()


def _after_in_parent() -> None:
    lock = _llvm_lock()
    if lock is not None:
        lock.release()


def _after_in_child() -> None:
    lock = _llvm_lock()
    if lock is not None:
        lock.release()
    if "numba.core.compiler_lock" in sys.modules:
        _forget_abandoned_compile()


def _forget_abandoned_compile() -> None:
    from numba.core.compiler_lock import global_compiler_lock

    lock = global_compiler_lock._lock
    if lock.acquire(blocking=False):  # no other thread was compiling
        lock.release()
        return
    lock._at_fork_reinit()
    from numba.core.dispatcher import CompilingCounter, _DispatcherBase
    from numba.core.typing.context import CallStack

    for obj in gc.get_objects():
        if isinstance(obj, _DispatcherBase):
            if obj._compiling_counter.counter:
                obj._compiling_counter = CompilingCounter()
        elif isinstance(obj, CallStack):
            obj._stack.clear()
            obj._fail_cache.clear()
            obj._lock._at_fork_reinit()
        elif isinstance(obj, functools.cached_property) and hasattr(obj, "lock"):
            _unlock_if_held(obj.lock)  # Python < 3.12: one lock per property, all instances


def _unlock_if_held(lock) -> None:
    """Unlock an ``RLock`` held by a thread that did not survive the fork."""
    if lock.acquire(blocking=False):
        lock.release()
    else:
        lock._at_fork_reinit()


_installed: list[bool] = []


def install() -> None:
    """Register the fork hooks (once; the executor does before its first compile)."""
    if not _installed:
        _installed.append(True)
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                            after_in_child=_after_in_child)
