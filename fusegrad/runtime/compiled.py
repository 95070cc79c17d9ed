"""Compiled execution of a Function: fuse, generate, load, call.

``executable(fn)`` returns a callable running ``fn`` as native code. Numba and the code
generator are imported by the first compile, not by ``import fusegrad``. A user
mistake caught inside compiled code (an index out of bounds, say) is re-run
through the interpreter, which raises the full, precise error; an internal
code-generation failure raises ``CodegenError`` with the path of a dumped
reproducer (the IR text), never a silent fallback.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import math
import os
import pickle
import sys
import threading
import time
import warnings
from collections import OrderedDict

import numpy as np

from .. import _forksafe, config
from ..codegen import compile as cg_compile
from ..codegen.buffers import plan as buffer_plan
from ..ir import Function
from ..ir.errors import FusegradError
from ..ir.printer import print_function
from ..ir.stats import add_phase, count_compile, take_phases
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import gc_pause
from . import blas_threads, debug_nans, lean_exec, numba_fork, pass_cache, threading_layer
from .buffer_pool import BufferPool
from .float16 import Float16Error, _refuse_float16  # noqa: F401  (Float16Error: public here)
from .hot_call import hot_call
from .interpreter import run


class CodegenError(FusegradError, RuntimeError):
    """fusegrad failed to compile a valid Function (a bug in fusegrad: please report it)."""


#: what unpickling a damaged cache entry raises (UnicodeDecodeError before ValueError)
_DAMAGED = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, UnicodeDecodeError,
            OverflowError)


class Executable:
    """``fn`` compiled: call it with concrete arrays, get a tuple of arrays."""

    __slots__ = ("dims", "entry", "fn", "fused", "hot_states", "module", "out_dtypes",
                 "parallel", "phases", "pool", "rare", "reason", "serial_blas", "source", "tier",
                 "warm")

    def __init__(self, fn: Function, donated: frozenset[int] = frozenset(),
                 reason: str = "new function"):
        self.fn, self.reason = fn, reason
        _refuse_float16(fn)
        try:
            self.fused = fuse(simplify(fn))
            t0 = time.perf_counter()
            buffers = buffer_plan(self.fused, donated, config.REUSE_BUFFERS)
            self.source, dims = _generate(self.fused, buffers)
            if donated and "def entry_exact" in self.source:
                # the exact entry re-runs the call from its inputs: none may be overwritten
                buffers = buffer_plan(self.fused, frozenset(), config.REUSE_BUFFERS)
                self.source, dims = _generate(self.fused, buffers)
            self.pool = BufferPool(buffers) if buffers.slots else None
            self.module = cg_compile.load(self.source)
            add_phase("codegen", time.perf_counter() - t0)
        except FusegradError:
            raise
        except Exception as e:
            raise _internal(fn, e) from e
        import numba

        self.entry = self.module.entry
        self.parallel = None
        if hasattr(self.module, "entry_parallel") and numba.config.NUMBA_NUM_THREADS > 1 and (
                _loop_size(self.fused) >= config.PARALLEL_THRESHOLD) and threading_layer.layer():
            self.parallel = _variant(self.module, "entry_parallel", self.source,
                                     _PARALLEL_WHY)
        self.tier = None
        if config.COMPILE == "background":
            self.tier = _variant(self.module, "entry", self.source, "FUSEGRAD_COMPILE=background")
        self.dims = np.asarray(dims, dtype=np.int64)
        self.out_dtypes = tuple(t.dtype for t in fn.out_types)
        self.rare = hasattr(self.module, "entry_exact")
        self.warm = False
        self.hot_states: list[list] = []  # the entry points held by ``fast_caller``s
        # small matrix products: one BLAS thread (see runtime/blas_threads.py)
        self.serial_blas = blas_threads.wanted(self.fused, config.BLAS_SERIAL_MAX)
        self.phases = take_phases()  # trace, passes, codegen: for FUSEGRAD_LOG_COMPILES

    def _entry(self, conv):
        """Run the fast entry; if it flags rare inputs, the exact one. The first call
        compiles (or loads the machine code) under the module's lock."""
        if self.pool is not None:
            arena = self.pool.take()
            try:
                return self._run(conv + self.pool.slots(arena, conv))
            finally:
                self.pool.give(arena)
        return self._run(conv)

    def _run(self, conv):
        if self.serial_blas:
            with blas_threads.serial():
                return self._call(conv)
        return self._call(conv)

    def _call(self, conv):
        if not self.warm:
            if self.tier is not None:
                if self.tier.ready(self.dims, conv) is None:
                    return None  # not compiled yet: the caller runs the interpreter
                self.warm = True
            else:
                self._compile(conv)
        parallel = self.parallel and self.parallel.ready(self.dims, conv)
        if parallel is not None:
            out = threading_layer.call(parallel, self.entry, self.dims, *conv)
        else:
            out = self.entry(self.dims, *conv)
        if self.rare:
            if out[-1]:
                out = self.module.entry_exact(self.dims, *conv)
            else:
                out = out[:-1]
        return out

    def _compile(self, conv) -> None:
        """Compile the serial entry for these arguments' types, or load its machine code,
        under the module's lock; log how long it took when asked to."""
        import numba

        sig = tuple(numba.typeof(a) for a in (self.dims, *conv))
        hits, reused = self.entry.stats.cache_hits[sig], sig in self.entry.overloads
        t0 = time.perf_counter()
        with cg_compile.key_lock(cg_compile.module_key(self.source)), opt_level(config.OPT):
            self.entry.compile(sig)
        self.warm = True
        if config.LOG_COMPILES:
            machine = ("machine code reused" if reused else "cache load"
                       if self.entry.stats.cache_hits[sig] > hits else "Numba/LLVM")
            phases = {**self.phases, machine: time.perf_counter() - t0}
            parts = ", ".join(f"{k} {_ms(v)}" for k, v in phases.items())
            _log(f"compiled @{self.fn.name} ({self.reason}; serial entry) in "
                 f"{_ms(sum(phases.values()))}: {parts}")

    def __call__(self, *args):
        conv = []
        for a, p in zip(args, self.fn.params):
            a = np.asarray(a)
            if a.dtype != p.type.dtype or a.shape != p.type.shape:
                return run(self.fn, *args)  # the interpreter raises the precise error
            conv.append(a[()] if a.ndim == 0 else a)
        out = self._checked(conv, args)
        out = tuple(np.asarray(r, dtype=t) for r, t in zip(out, self.out_dtypes))
        if config.DEBUG_NANS:
            debug_nans.check(self.fn, args, out)
        return out

    def _reload(self, err: Exception) -> None:
        self.module = cg_compile.purge(self.source, err)
        self.entry = self.module.entry
        self.warm = False
        for state in self.hot_states:  # the fast callers: the general call until compiled
            state[0] = None
        self.tier = None  # compile the fresh module in this call
        if self.parallel is not None:
            self.parallel = _variant(self.module, "entry_parallel", self.source, _PARALLEL_WHY)

    def _checked(self, conv, args):
        """The entry's raw results; user errors re-raised by the interpreter, a damaged
        cache entry (Numba loads machine code lazily, at the first call) purged and
        compiled again. While the machine code compiles in the background
        (``FUSEGRAD_COMPILE=background``), the interpreter's results."""
        try:
            out = self._entry(conv)
            return run(self.fn, *args) if out is None else out
        except _DAMAGED as e:
            err = e
        except (IndexError, ValueError, ZeroDivisionError) as e:
            run(self.fn, *args)  # a user error: the interpreter raises it precisely
            err = e  # the interpreter succeeded: the loaded code is at fault
        except Exception as e:
            if type(e).__module__.startswith("numba"):
                raise _internal(self.fn, e) from e
            raise
        self._reload(err)
        return self._entry(conv)

    def fast_caller(self, extra: tuple = ()):
        """A lean ``call_unchecked``: a callable taking the ndarray arguments that precede
        ``extra`` (already known to have the right types) and returning the results from
        index ``first`` on (``caller(args, first)``), or None when this Executable needs
        the general call (a parallel entry, donated slots). Anything out of
        the ordinary (not compiled yet, rare inputs, an error, ``FUSEGRAD_DEBUG_NANS``)
        goes through ``call_unchecked``."""
        if self.parallel is not None or (self.pool is not None and self.pool.donates):
            return None
        return hot_call(self, extra)

    def call_unchecked(self, args):
        """``self(*args)`` for ndarray arguments already known to have the right types."""
        out = self._checked([a[()] if a.ndim == 0 else a for a in args], args)
        out = [r if type(r) is np.ndarray else np.asarray(r, dtype=t)
               for r, t in zip(out, self.out_dtypes)]
        if config.DEBUG_NANS:
            debug_nans.check(self.fn, args, out)
        return out


class _Background:
    """One entry of a module (``entry`` or ``entry_parallel``), compiled in another process
    the first time a call asks for it, then loaded from the cache here: a compile in this
    process would hold the GIL for a second or more and stall the calls that the serial
    entry or the interpreter serve meanwhile. If that process fails, it compiles here."""

    __slots__ = ("dispatcher", "done", "lock", "name", "path", "source", "started", "why")

    def __init__(self, module, name: str, source: str, why: str):
        self.dispatcher, self.name, self.source, self.why = getattr(module, name), name, \
            source, why
        self.path = module.__file__
        self.done = self.started = False
        self.lock = _forksafe.lock()

    def ready(self, dims, conv):
        """The dispatcher if it is compiled, else None (starting its compile)."""
        if self.done:
            return self.dispatcher
        with self.lock:
            if not self.started:
                import numba

                self.started = True
                sig = tuple(numba.typeof(a) for a in (dims, *conv))
                threading.Thread(target=self._build, args=(sig,), daemon=True,
                                 name=f"fusegrad-compile-{self.name}").start()
        return None

    def _build(self, sig) -> None:
        t0 = time.perf_counter()
        try:
            if not _in_disk_cache(self.path, self.name):  # else a load here is quick
                _compile_in_subprocess(self.path, self.name, sig)
            with cg_compile.key_lock(cg_compile.module_key(self.source)), opt_level(config.OPT):
                self.dispatcher.compile(sig)
        except Exception as e:  # the serial entry or the interpreter keep serving
            warnings.warn(f"fusegrad: {self.name} failed to compile in the background "
                          f"({type(e).__name__}: {e}); calls keep running without it",
                          RuntimeWarning, stacklevel=1)
            return
        self.done = True
        if config.LOG_COMPILES:
            _log(f"{self.name} ({self.why}) compiled in the background in "
                 f"{_ms(time.perf_counter() - t0)}")


_variants: dict[tuple[int, str], _Background] = {}
_variants_lock = _forksafe.lock()


def _variant(module, name: str, source: str, why: str) -> _Background:
    """The one ``_Background`` of ``module.<name>`` (shared by the Functions of its text)."""
    with _variants_lock:
        v = _variants.get((id(module), name))
        if v is None or v.dispatcher is not getattr(module, name):
            v = _variants[id(module), name] = _Background(module, name, source, why)
        return v


def _forget_other_threads() -> None:
    """In a forked child: the threads building executables or compiling entries in the
    background did not survive the fork. Their executables are built again on demand;
    their entries start compiling again when a call wants them."""
    _building.clear()
    for v in _variants.values():
        if not v.done:
            v.started = False
    _children.clear()  # the parent's compile processes: not this child's to stop at exit


os.register_at_fork(after_in_child=_forget_other_threads)
numba_fork.install()


_SUBPROCESS = """
import importlib.util, pickle, sys
from fusegrad.runtime.compiled import opt_level
sig = pickle.loads(sys.stdin.buffer.read())
name = "fusegrad_generated." + sys.argv[1].rsplit("/", 1)[-1][:-3]  # as codegen.compile
spec = importlib.util.spec_from_file_location(name, sys.argv[1])
module = sys.modules[name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with opt_level(int(sys.argv[3])):
    getattr(module, sys.argv[2]).compile(sig)
"""


def _compile_in_subprocess(path: str, name: str, sig) -> None:
    """Compile entry ``name`` of the module at ``path`` for ``sig`` in a child process,
    which leaves the machine code in Numba's cache beside the module (quietly: a failure
    only means this process compiles it itself)."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with contextlib.suppress(Exception):
        child = subprocess.Popen([sys.executable, "-c", _SUBPROCESS, path, name, str(config.OPT)],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env)
        with _children_lock:
            _children.add(child)
        try:
            child.communicate(pickle.dumps(sig), timeout=600)
        finally:
            with _children_lock:
                _children.discard(child)
            if child.poll() is None:
                child.kill()


_children: set = set()
_children_lock = _forksafe.lock()


@atexit.register
def _stop_children() -> None:
    """A process that exits does not leave compiles it no longer needs running."""
    with _children_lock:
        for child in _children:
            with contextlib.suppress(OSError):
                child.kill()


def _in_disk_cache(path: str, name: str) -> bool:
    """Whether Numba's cache beside the module at ``path`` has an index for entry ``name``
    (written by an earlier process that compiled it)."""
    base = os.path.basename(path)[:-3]
    return bool(glob.glob(os.path.join(os.path.dirname(path), "__pycache__",
                                       f"{base}.{name}-*.nbi")))


@contextlib.contextmanager
def opt_level(level: int):
    """Numba compiles at LLVM optimisation ``level`` inside the block (Numba's level is
    process-wide, so the block holds Numba's compiler lock)."""
    from numba.core import config as numba_config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        old = numba_config.OPT
        numba_config.OPT = type(old)(level)
        try:
            yield
        finally:
            numba_config.OPT = old


_PARALLEL_WHY = "loops of at least FUSEGRAD_PARALLEL_THRESHOLD elements"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _log(message: str) -> None:
    print(f"fusegrad: {message}", file=sys.stderr)


def _generate(fused: Function, buffers):
    from ..codegen.module import generate

    return generate(fused, buffers) if buffers.slots else generate(fused)


def _loop_size(fused: Function) -> int:
    """Elements of the largest loop kernel."""
    return max((math.prod(v.type.shape) for op in fused.ops if op.name == "fused"
                for v in (*op.operands, *op.results)), default=0)


def _internal(fn: Function, err: Exception) -> CodegenError:
    text = print_function(fn, locs=True)
    name = hashlib.sha256(text.encode()).hexdigest()[:16]
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


_cache: OrderedDict[tuple, tuple[Function, Executable]] = OrderedDict()
_cache_lock = _forksafe.lock()
_CACHE_SIZE = 512
#: id(fn) -> (fn, lock) while ``fn`` is being compiled (``fn`` keeps its id unique).
_building: dict[tuple, tuple[Function, threading.Lock]] = {}


def _build(fn: Function, donated: frozenset[int], reason: str):
    """By default (``FUSEGRAD_BACKEND=lean``), the lean code generator's executable for
    ``fn``; with ``FUSEGRAD_BACKEND=numba``, Numba's."""
    if config.BACKEND == "numba":
        return Executable(fn, donated, reason)
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
               donated: frozenset[int] = frozenset()) -> Executable:
    """The compiled form of ``fn`` (kept for the most recently used Functions), which may
    overwrite the arrays of parameters ``donated`` (indices) with results; built once
    even when several threads ask for it at the same time."""
    key = (id(fn), donated)
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
            exe = _build(fn, donated, reason)
            count_compile(fn.name)
            with _cache_lock:
                _cache[key] = (fn, exe)
                while len(_cache) > _CACHE_SIZE:
                    _cache.popitem(last=False)
        finally:
            with _cache_lock:
                _building.pop(key, None)
    return exe
