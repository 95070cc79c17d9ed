"""Single-threaded BLAS for compiled calls whose matrix products are all small.

Numba's ``np.dot`` calls the BLAS that ``scipy.linalg.cython_blas`` links (an OpenBLAS in
SciPy's wheels). OpenBLAS splits one product over its worker threads, which then spin
and wait for the next one. For a small product the split gains little, and on a loaded
machine one descheduled worker stalls it: a compiled training step of 128x64 @ 64x64
products took from 1 to 32 ms instead of 0.3 ms (``fusegrad demo``), a ``scan`` of
small products hundreds of milliseconds instead of a few. Compiled calls whose products,
wherever they are (in loop bodies or not), are all at most ``config.BLAS_SERIAL_MAX``
multiply-adds therefore run with BLAS limited to one thread, restored afterwards. The
setting is process-wide (OpenBLAS's pthreads builds have no per-thread count): while
any such call runs, every BLAS product of the library is single-threaded; the count in
force before the first of overlapping calls is restored when the last one ends.

The library is found once: SciPy's bundled OpenBLAS, opened directly with its own
``scipy_openblas_get/set_num_threads`` (importing ``scipy.linalg`` and ``threadpoolctl``
to find it cost 0.6 s of a first call); where SciPy bundles none, ``threadpoolctl``
finds the BLAS libraries loaded. Entering and leaving ``serial()`` then
costs a few ctypes calls (about 1.5 us in all). For OpenBLAS's pthreads builds, the
count is set with the library's own ``openblas_set_num_threads``: threadpoolctl's
``set_num_threads`` lets only the first thread that calls it change OpenBLAS's count
(later callers silently do nothing), and fusegrad's calls leave from any thread.
With no BLAS library found, ``serial()`` does nothing.
"""

from __future__ import annotations

import math
import os
from collections import deque
from itertools import product

from .. import _forksafe
from ..ir import Function


class _Library:
    """Get and set the thread count of one BLAS library, from any thread."""

    __slots__ = ("get", "path", "set")

    def __init__(self, path: str, get, set_):
        self.path, self.get, self.set = path, get, set_

    @classmethod
    def of(cls, controller) -> _Library:
        """The library behind a ``threadpoolctl`` controller."""
        if controller.internal_api == "openblas" and controller.threading_layer != "openmp":
            for prefix, suffix in product(("scipy_", ""), ("", "64_", "_64")):
                get = getattr(controller.dynlib, f"{prefix}openblas_get_num_threads{suffix}",
                              None)
                set_ = getattr(controller.dynlib, f"{prefix}openblas_set_num_threads{suffix}",
                               None)
                if get is not None and set_ is not None:
                    return cls(controller.filepath, get, set_)
        return cls(controller.filepath, controller.get_num_threads,
                   controller.set_num_threads)


def _bundled() -> list[_Library]:
    """SciPy's bundled OpenBLAS, the library the lean generator's products call, with
    its own thread-count functions (no ``scipy.linalg`` or ``threadpoolctl`` import),
    then NumPy's (``numpy.libs``), whose LAPACK compiled ``cholesky``, ``solve`` and
    ``slogdet`` call and which the ops run between compiled segments call; [] without
    SciPy's."""
    from ..codegen.lean import symbols

    lib = _counted(symbols.bundled_blas(), "")
    return ([lib, *filter(None, [_counted(symbols.numpy_blas(), "64_")])]
            if lib is not None else [])


def _counted(lib, suffix: str) -> _Library | None:
    """``lib`` (a ``ctypes.CDLL`` or None) with its ``scipy_openblas_*_num_threads``
    functions of symbol ``suffix``, or None."""
    import ctypes

    get = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None) if lib else None
    set_ = getattr(lib, f"scipy_openblas_set_num_threads{suffix}", None) if lib else None
    if get is None or set_ is None:
        return None
    get.restype, get.argtypes = ctypes.c_int, []
    set_.restype, set_.argtypes = None, [ctypes.c_int]
    return _Library(lib._name, get, set_)


def _find() -> list[_Library]:
    bundled = _bundled()
    if bundled:
        return bundled
    import scipy
    import scipy.linalg.cython_blas  # loads the library compiled products call
    from threadpoolctl import ThreadpoolController

    found = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
    site = os.path.dirname(os.path.dirname(os.path.realpath(scipy.__file__)))
    scipys = [c for c in found
              if os.path.realpath(c.filepath).startswith(os.path.join(site, "scipy"))]
    return [_Library.of(c) for c in scipys or found]


_found: list[list[_Library]] = []


def libraries() -> list[_Library]:
    """The BLAS libraries whose threads ``serial()`` controls (found on the first call)."""
    if not _found:
        try:
            _found.append(_find())
        except ImportError:  # no SciPy or no threadpoolctl: nothing to control
            _found.append([])
    return _found[0]


def threads() -> int:
    """The thread count of the first controlled library (0 if there is none)."""
    libs = libraries()
    return libs[0].get() if libs else 0


def set_threads(n: int) -> None:
    """Set the thread count of every controlled library."""
    for lib in libraries():
        lib.set(n)


class _Serial:
    """``with serial():`` BLAS products inside the block use one thread."""

    __slots__ = ()

    def __enter__(self):
        global _depth, _saved
        with _lock:
            if _depth == 0:
                libs = libraries()
                _saved = [lib.get() for lib in libs]
                for lib, n in zip(libs, _saved):
                    if n != 1:  # a library already on one thread is left alone
                        lib.set(1)
            _depth += 1

    def __exit__(self, *exc):
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0:
                _restore()


_SERIAL = _Serial()
_lock = _forksafe.lock()
_depth = 0
_saved: list[int] = []


def serial() -> _Serial:
    """A context manager: BLAS products inside the block use one thread."""
    return _SERIAL


def _restore() -> None:
    for lib, n in zip(libraries(), _saved):
        if n is not None and n != 1:  # None: a library that does not report its count
            lib.set(n)


def _after_fork_in_child() -> None:
    """The threads inside ``serial()`` blocks did not survive the fork: restore the count
    they would have restored."""
    global _depth
    if _depth:
        _depth = 0
        _restore()


os.register_at_fork(after_in_child=_after_fork_in_child)


def products(fn: Function) -> list[int]:
    """The multiply-add counts of the matrix products of ``fn``, at any depth (loop
    bodies included), one per product written in the code (not per iteration)."""
    sizes, pending = [], deque([fn])
    while pending:
        for op in pending.popleft().ops:
            if op.name == "matmul":
                a, out = op.operands[0].type, op.results[0].type
                sizes.append(math.prod(out.shape) * (a.shape[-1] if a.shape else 1))
            elif op.name == "conv":  # one product per image and group (ir.conv_ops)
                w, out = op.operands[1].type, op.results[0].type
                sizes.append(math.prod(out.shape[1:]) // op.attrs["groups"]
                             * math.prod(w.shape[1:]))
            pending.extend(op.regions)
    return sizes


def wanted(fn: Function, limit: int) -> bool:
    """Whether calls of ``fn`` (fused) should run BLAS on one thread: it has matrix
    products, none of more than ``limit`` multiply-adds, and a BLAS library is found."""
    sizes = products(fn)
    return bool(sizes) and max(sizes) <= limit and bool(libraries())
