"""Compiled execution of a Function: simplify, fuse, compile with the lean code
generator, call.

``executable(fn)`` returns a callable running ``fn`` as native code
(``lean_exec.LeanExecutable``). The code generator is imported by the first compile,
not by ``import fusegrad``. A user mistake caught inside compiled code (an index out of
bounds) raises the interpreter's error; an internal code-generation failure raises
``CodegenError`` with the path of a dumped reproducer (the IR text), never a silent
fallback.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections import OrderedDict

from .. import _forksafe, config
from .._sources import sha256
from ..codegen import compile as cg_compile
from ..ir import Function
from ..ir.errors import FusegradError
from ..ir.printer import print_function
from ..ir.stats import add_phase, count_compile
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import gc_pause
from . import lean_exec, numba_fork, pass_cache
from .float16 import Float16Error, _refuse_float16  # noqa: F401  (Float16Error: public here)


class CodegenError(FusegradError, RuntimeError):
    """fusegrad failed to compile a valid Function (a bug in fusegrad: please report it)."""


def _forget_other_threads() -> None:
    """In a forked child: the threads building executables did not survive the fork;
    their executables are built again on demand."""
    _building.clear()


os.register_at_fork(after_in_child=_forget_other_threads)
numba_fork.install()


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _log(message: str) -> None:
    print(f"fusegrad: {message}", file=sys.stderr)


def _internal(fn: Function, err: Exception) -> CodegenError:
    text = print_function(fn, locs=True)
    name = sha256(text.encode()).hexdigest()[:16]
    try:
        path = os.path.join(cg_compile._directory(), f"repro_{name}.fgir")
        cg_compile.write_atomic(path, text)  # replaces a symlink there, never its target
    except OSError:
        path = "(could not be written)"
    return CodegenError(
        f"internal error while compiling @{fn.name}: {type(err).__name__}: {err}\n"
        f"The IR that failed is in {path}. Set FUSEGRAD_DISABLE_JIT=1 to run it with the "
        "NumPy interpreter meanwhile, and please report the file."
    )


_cache: OrderedDict[int, tuple[Function, lean_exec.LeanExecutable]] = OrderedDict()
_cache_lock = _forksafe.lock()
_CACHE_SIZE = 512
#: id(fn) -> (fn, lock) while ``fn`` is being compiled (``fn`` keeps its id unique).
_building: dict[int, tuple[Function, threading.Lock]] = {}


def _build(fn: Function, reason: str) -> lean_exec.LeanExecutable:
    """The lean code generator's executable for ``fn``."""
    _refuse_float16(fn)
    try:
        with gc_pause.paused():  # IR made (or read) by the thousand, no cycles
            name, fused, plan = _passes(fn)
    except FusegradError:
        raise
    except Exception as e:
        raise _internal(fn, e) from e
    try:
        # a plan from the pass cache: the machine code is loaded, not built (building it
        # makes llvmlite's IR, whose objects do form cycles)
        with gc_pause.paused() if plan is not None else contextlib.nullcontext():
            exe = lean_exec.build(fn, fused, reason, _run_region, plan)
    except FusegradError:
        raise
    except Exception as e:
        raise _internal(fn, e) from e
    if plan is None and name is not None:
        pass_cache.store(name, (fused, exe.plan))
    if config.LOG_COMPILES:
        kernels, compiled = exe.kernels()
        parts = ", ".join(f"{k} {_ms(v)}" for k, v in exe.phases.items())
        _log(f"compiled @{fn.name} ({reason}; lean code generator, {kernels} kernels: "
             f"{compiled} compiled, {kernels - compiled} reused or loaded) in "
             f"{_ms(sum(exe.phases.values()))}: {parts}")
    return exe


def _passes(fn: Function) -> tuple[str | None, Function, list | None]:
    """``(name, fused, plan)``: ``fuse(simplify(fn))`` and the segments it was compiled
    in, read from the pass cache when a process compiled the same program before
    (``pass_cache``; ``name`` is the entry's, the plan None if the passes ran here)."""
    t0 = time.perf_counter()
    name = pass_cache.key(fn)
    entry = pass_cache.load(name) if name is not None else None
    add_phase("cache load", time.perf_counter() - t0)
    if entry is None:
        return name, fuse(simplify(fn)), None
    return name, *entry


def _run_region(region: Function):
    """The executable of a control-flow region that compiled code runs."""
    return executable(region, "control-flow region")


def executable(fn: Function, reason: str = "new function",
               donated: frozenset[int] = frozenset()) -> lean_exec.LeanExecutable:
    """The compiled form of ``fn`` (kept for the most recently used Functions); built once
    even when several threads ask for it at the same time. ``donated`` (indices of
    parameters whose arrays the caller gives up): results the program may write over
    them are (``LeanExecutable.donate``)."""
    key = id(fn)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is fn:
            _cache.move_to_end(key)
            return hit[1]
        lock = _building.setdefault(key, (fn, _forksafe.lock()))[1]
    with lock:
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None and hit[0] is fn:
                return hit[1]
        try:
            exe = _build(fn, reason)
            exe.donate(donated)
            count_compile(fn.name)
            with _cache_lock:
                _cache[key] = (fn, exe)
                while len(_cache) > _CACHE_SIZE:
                    _cache.popitem(last=False)
        finally:
            with _cache_lock:
                _building.pop(key, None)
    return exe
