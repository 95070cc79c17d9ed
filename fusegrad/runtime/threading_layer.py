"""The Numba threading layer that runs parallel loops, and how concurrent callers share it.

Numba has three layers. ``tbb`` is safe for concurrent callers and across ``fork``.
``omp`` (GNU OpenMP on Linux) is safe for concurrent callers, but a process that forks
after using it loses the child ("fork() called from a process already using GNU
OpenMP, this is unsafe"), and ``fork`` is the default start method of ``multiprocessing``
(and so of Dask's and joblib's process pools) on Linux. ``workqueue`` survives a fork,
but two threads launching parallel work at once abort the process.

fusegrad therefore asks for ``safe`` (TBB, from the ``tbb`` package). pip installs TBB's
library in ``<prefix>/lib``, which the dynamic loader does not search, so it is loaded
by its path first. Without TBB the layer is ``workqueue`` and parallel calls take
turns: a call that finds another thread's parallel call running runs the serial entry
instead (the same bits: loops run in fixed chunks). A layer chosen by the user
(``NUMBA_THREADING_LAYER``), or already started by other code of the process, is kept;
only ``workqueue`` takes turns.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import warnings

from .. import _forksafe

#: layers that several threads may use at once
THREAD_SAFE = frozenset({"tbb", "omp"})

_chosen: list[str | None] = []  # [layer] once started ([None]: no layer could start)
_choosing = _forksafe.lock()
_turn: threading.Lock | None = None  # held by the one parallel call (workqueue only)


def _load_tbb() -> bool:
    """Load the TBB library of the ``tbb`` package, if installed, so that Numba's TBB
    layer (linked against ``libtbb.so.12`` without a search path) finds it."""
    if sys.platform != "linux":
        return False  # elsewhere the package's library is on the loader's path
    from importlib import metadata

    try:
        files = metadata.distribution("tbb").files or ()
    except metadata.PackageNotFoundError:
        return False
    for f in files:
        if f.name == "libtbb.so.12":
            try:
                ctypes.CDLL(str(f.locate()), mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                return False
    return False


def _start(requested: str) -> None:
    import numba
    from numba.np.ufunc import parallel

    numba.config.THREADING_LAYER = requested
    parallel._launch_threads()  # raises ValueError if the layer cannot load


def layer() -> str | None:
    """The threading layer parallel loops run on (started on the first call), or None
    if none could start (loops then stay on one thread, with one warning)."""
    if not _chosen:
        with _choosing:
            if not _chosen:
                _chosen.append(_choose())
    return _chosen[0]


def _choose() -> str | None:
    global _turn
    import numba

    try:
        if numba.config.THREADING_LAYER == "default":  # not chosen by the user
            _load_tbb()
            try:
                _start("safe")
            except ValueError:
                _start("workqueue")
        else:
            _start(numba.config.THREADING_LAYER)
        name = numba.threading_layer()
    except Exception as e:
        warnings.warn(f"fusegrad: no Numba threading layer could start ({e}); compiled "
                      "loops run on one thread", RuntimeWarning, stacklevel=4)
        return None
    if name not in THREAD_SAFE:
        _turn = _forksafe.lock()
    return name


def call(parallel, serial, *args):
    """``parallel(*args)``; on a layer that is not thread-safe, ``serial(*args)`` while
    another thread's parallel call runs."""
    turn = _turn
    if turn is None:
        return parallel(*args)
    if not turn.acquire(blocking=False):
        return serial(*args)
    try:
        return parallel(*args)
    finally:
        turn.release()

