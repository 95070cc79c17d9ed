"""Every FUSEGRAD_* environment variable, read in one place, with its default."""

from __future__ import annotations

import os


def _flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() not in ("", "0", "false", "no", "off")


#: Run every transform through the NumPy reference interpreter.
DISABLE_JIT: bool = _flag("FUSEGRAD_DISABLE_JIT")

#: Log every trace made by ``fg.jit`` and why it was needed (new signature).
LOG_COMPILES: bool = _flag("FUSEGRAD_LOG_COMPILES")

#: Check every compiled call's results for NaN/inf and name the op that made them
#: (``fg.debug_nans(True)`` sets it at run time; see docs/debugging.md).
DEBUG_NANS: bool = _flag("FUSEGRAD_DEBUG_NANS")

#: Verify the IR after every pass (always on in the test suite).
VERIFY: bool = _flag("FUSEGRAD_VERIFY")

#: Load cached machine code through LLVM's MCJIT rather than fusegrad's own loader of
#: object files (``codegen/lean/elf.py``), which a warm start uses to skip loading LLVM.
LOAD_WITH_LLVM: bool = _flag("FUSEGRAD_LOAD_WITH_LLVM")

#: Name every generated function that fusegrad's loader maps in ``/tmp/perf-<pid>.map``,
#: the file Linux ``perf`` reads symbols of generated code from, so ``perf report``
#: shows kernels by name (``codegen/lean/elf.py``; for code loaded by MCJIT use
#: ``FUSEGRAD_LOAD_WITH_LLVM=0``, the default).
PERF_MAP: bool = _flag("FUSEGRAD_PERF_MAP")

#: Instruction-set features to change from the host's in generated code, as LLVM
#: writes them (``-avx512f``: code for an AVX2 machine on an AVX-512 one; features that
#: need a removed one go with it). For measuring another kind of CPU's code; part of the
#: cache key.
CPU_FEATURES: str = os.environ.get("FUSEGRAD_CPU_FEATURES", "").replace(" ", "")

#: Run programs that treat the rows of a long axis one by one (and sum over them) as
#: loops over tiles of rows (``passes/tiling.py``); ``0`` runs them op by op.
ROW_TILING: bool = _flag("FUSEGRAD_ROW_TILING", True)

#: Remove fusegrad's own frames from the tracebacks of errors raised through its
#: transforms (``off`` shows them, e.g. to debug fusegrad itself).
TRACEBACK_FILTERING: bool = _flag("FUSEGRAD_TRACEBACK_FILTERING", True)


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


#: Compiled functions whose largest loop has at least this many elements run their
#: loops on several threads (fixed chunks: the same results on any thread count).
PARALLEL_THRESHOLD: int = _int("FUSEGRAD_PARALLEL_THRESHOLD", 1 << 18)

#: Processes that compile a program's modules at most (this one and helpers it forks,
#: ``codegen/lean/parallel.py``); 0: one per CPU this process may run on; 1: this one.
COMPILE_PROCESSES: int = _int("FUSEGRAD_COMPILE_PROCESSES", 0)

#: Compiled functions with matrix products (in loop bodies or not), none of more than
#: this many multiply-adds, run BLAS on one thread (0: never). 2**28 multiply-adds is
#: about 2 ms on one AVX-512 core: below that, a descheduled BLAS worker on a loaded
#: machine costs more than the split gains (docs/performance.md). Its former name,
#: ``FUSEGRAD_LOOP_BLAS_SERIAL_MAX`` (from when only loop bodies counted), is read when
#: this one is not set.
BLAS_SERIAL_MAX: int = _int("FUSEGRAD_BLAS_SERIAL_MAX",
                            _int("FUSEGRAD_LOOP_BLAS_SERIAL_MAX", 1 << 28))


#: LLVM optimisation level of generated code (0-3). At 1 a compile takes about half as
#: long as at 3 (the math library the loops inline is optimised once per machine either
#: way), but loops with many math calls may not vectorise: up to 8x slower.
OPT: int = _int("FUSEGRAD_OPT", 3)
if not 0 <= OPT <= 3:
    raise ValueError(f"FUSEGRAD_OPT must be 0, 1, 2 or 3, got {OPT}")


def _cache_dir() -> str:
    explicit = os.environ.get("FUSEGRAD_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fusegrad")


#: Where generated modules and their machine code are cached.
CACHE_DIR: str = _cache_dir()
