"""Single-threaded BLAS for compiled calls that multiply matrices inside loops.

Numba's ``np.dot`` calls the BLAS that ``scipy.linalg.cython_blas`` links (an OpenBLAS
in SciPy's wheels). OpenBLAS splits one product over its worker threads, which then
spin and wait for the next one. A loop body (``scan``, ``while_loop``) makes many small
products back to back: on a loaded machine a single descheduled worker stalls every
one of them, and a call that takes milliseconds sometimes takes hundreds. Such calls
(unless one of those products is large: ``config.LOOP_BLAS_SERIAL_MAX`` multiply-adds)
therefore run with BLAS limited to one thread, restored afterwards. The setting is
process-wide (OpenBLAS's pthreads builds have no per-thread count): while any such call
runs, every BLAS product of the process is single-threaded; the count in force before
the first of overlapping calls is restored when the last one ends.

When no OpenBLAS is found (another BLAS, or none loaded), ``serial()`` does nothing.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
from contextlib import contextmanager

from .. import _forksafe
from ..ir import Function

#: control ops whose regions run once per iteration
LOOPS = frozenset({"while_loop", "scan", "while_grad", "while_grad_vjp"})

#: (set, get) names of the process-wide thread count, per OpenBLAS build
_GLOBAL = (("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
           ("openblas_set_num_threads", "openblas_get_num_threads"))


class _Blas:
    """Thread-count controls of one loaded OpenBLAS."""

    def __init__(self, lib: ctypes.CDLL, set_name: str, get_name: str):
        self.path = lib._name
        self.get = getattr(lib, get_name)
        self.get.restype = ctypes.c_int
        self.get.argtypes = []
        self.set_global = getattr(lib, set_name)
        self.set_global.restype = None
        self.set_global.argtypes = [ctypes.c_int]


def _candidates() -> list[str]:
    """Shared libraries SciPy's BLAS wrappers may use, those already loaded first."""
    import scipy.linalg.cython_blas  # loads the library it links

    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                base = os.path.basename(p).lower()
                if "blas" in base and ".so" in base and p not in paths:
                    paths.append(p)
    except OSError:
        pass
    import scipy

    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    paths += [p for p in sorted(glob.glob(os.path.join(libs, "*openblas*"))) if p not in paths]
    # SciPy's own library before any other (NumPy bundles a second OpenBLAS)
    return sorted(paths, key=lambda p: "scipy.libs" not in p)


def _find() -> _Blas | None:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _GLOBAL:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                return _Blas(lib, set_name, get_name)
    return None


_blas: _Blas | bool | None = False  # False: not looked up yet


def blas() -> _Blas | None:
    """The OpenBLAS that compiled matrix products call, or None."""
    global _blas
    if _blas is False:
        try:
            _blas = _find()
        except ImportError:
            _blas = None
    return _blas


def threads() -> int:
    """BLAS's thread count (0 if unknown)."""
    b = blas()
    return b.get() if b is not None else 0


_lock = _forksafe.lock()
_depth = 0
_saved = 0


@contextmanager
def serial():
    """BLAS products inside the block use one thread."""
    global _depth, _saved
    b = blas()
    if b is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = b.get()
            b.set_global(1)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                b.set_global(_saved)


def loop_products(fn: Function, in_loop: bool = False) -> list[int]:
    """The multiply-add counts of the matrix products inside loop bodies of ``fn``
    (at any depth), one per product written in the code (not per iteration)."""
    sizes = []
    for op in fn.ops:
        if op.name == "matmul" and in_loop:
            a, out = op.operands[0].type, op.results[0].type
            sizes.append(math.prod(out.shape) * (a.shape[-1] if a.shape else 1))
        loop = in_loop or op.name in LOOPS
        for r in op.regions:
            sizes += loop_products(r, loop)
    return sizes


def wanted(fn: Function, limit: int) -> bool:
    """Whether calls of ``fn`` (fused) should run BLAS on one thread: it has products in
    loop bodies, none of more than ``limit`` multiply-adds, and an OpenBLAS is found."""
    sizes = loop_products(fn)
    return bool(sizes) and max(sizes) <= limit and blas() is not None
