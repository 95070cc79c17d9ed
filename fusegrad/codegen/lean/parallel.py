"""Compiling a program's modules on several processes.

llvmlite makes every call into LLVM under one process-wide lock, so threads cannot
optimise two modules at once. When a program has several modules that are not in the
disk cache yet and the process may run on more than one CPU
(``FUSEGRAD_COMPILE_PROCESSES``), ``compile_modules``
forks helpers: this process and they draw the modules one at a time from a pipe,
costliest first, and each optimises and compiles what it draws into the disk cache
(as ``engine.add`` would: the same object files, the same bits); then every module is
added to the engine in order, loaded from the cache. A helper that fails or is killed only
leaves its modules to be compiled here. The fork waits for any LLVM call in progress
(``runtime.numba_fork`` holds llvmlite's lock across it), and a helper touches nothing
but LLVM and its own files before ``os._exit``.
"""

from __future__ import annotations

import os
import time
import warnings

from ... import config
from ...ir.stats import add_phase
from . import engine, symbols

#: modules a helper is worth forking for (a fork of a large process costs ~10-30 ms;
#: a kernel's optimisation and machine code ~20-100 ms)
PER_HELPER = 3
#: helpers at most, whatever the number of CPUs
MAX_HELPERS = 7
#: modules at most whose indices fit a pipe's buffer at once (64 KiB of 4-byte indices)
_MAX_PIPED = 1 << 14


def _processes() -> int:
    """``FUSEGRAD_COMPILE_PROCESSES``, or the CPUs this process may run on."""
    if config.COMPILE_PROCESSES > 0:
        return config.COMPILE_PROCESSES
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cost(m) -> int:
    """A module's expected compile work: its IR's size, an entry's much less (it is not
    optimised) and a kernel calling the math library more (the library is linked in)."""
    text, _, link, kind = m
    return len(text) // 8 if kind == "entry" else len(text) * (2 if link is not None else 1)


def _draw(fd: int, todo: list):
    """The modules of ``todo`` whose indices this process reads from the pipe ``fd`` (4
    bytes each, written before anyone reads: each read takes one whole index)."""
    while True:
        raw = os.read(fd, 4)
        if len(raw) < 4:
            return
        yield todo[int.from_bytes(raw, "little")]


def _compile_into_cache(share) -> None:
    """Optimise and compile each ``(text, name, link, kind)`` of ``share`` and keep its
    object file."""
    llvm = engine._llvm()
    for text, name, link, kind in share:
        mod = llvm.parse_assembly(text)
        mod.name = name
        engine.compile_object(mod, link, kind)


def compile_modules(modules: list) -> set[str]:
    """Add ``modules`` (``(ir_text, name, link, kind)``, as ``engine.add`` takes them) to
    the engine, compiling those not cached on up to ``MAX_HELPERS`` helper processes
    besides this one when there are enough of them and CPUs to run them. Returns the
    names of those compiled (not reused or loaded)."""
    todo = list({m[1]: m for m in modules if m[1] not in engine._added
                 and not os.path.exists(engine._object_path(m[1]))}.values())
    helpers = min(_processes() - 1, MAX_HELPERS, len(todo) // PER_HELPER - 1)
    if helpers < 1 or not hasattr(os, "fork") or len(todo) > _MAX_PIPED:
        return {m[1] for m in modules if engine.add(*m)}
    # the work in a pipe, costliest first: each process draws the next module when it is
    # free, so a share never waits on a misjudged one
    todo.sort(key=_cost, reverse=True)
    read, write = os.pipe()
    os.write(write, b"".join(i.to_bytes(4, "little") for i in range(len(todo))))
    os.close(write)
    children = []
    for _ in range(helpers):
        with warnings.catch_warnings():  # Python 3.12+ warns of fork with threads: the
            warnings.simplefilter("ignore", DeprecationWarning)  # helper runs LLVM only
            pid = os.fork()
        if pid == 0:  # a helper: LLVM and its own files only, then out
            code = 1
            try:
                _compile_into_cache(_draw(read, todo))
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    try:
        _compile_into_cache(_draw(read, todo))
    finally:
        os.close(read)
    t1 = time.perf_counter()
    for pid in children:
        os.waitpid(pid, 0)
    add_phase("waiting for helper processes", time.perf_counter() - t1)
    compiled = {m[1] for m in todo if os.path.exists(engine._object_path(m[1]))}
    # in their order (an entry after the kernels it calls), loaded from the cache (or
    # compiled here if a helper failed); the engine counts them as compiled
    symbols.provide(sorted({s for m in modules for s in symbols.host_symbols(m[0])}))
    here = set()
    if not engine.load_objects([m[1] for m in modules]):  # all at once, else one by one
        here = {m[1] for m in modules if engine.add(*m)}
    engine.count_compiled(len(compiled - here))
    return compiled | here
