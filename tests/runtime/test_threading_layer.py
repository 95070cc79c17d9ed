"""Parallel loops survive ``fork`` and concurrent callers.

After a compiled call ran its loops on several threads, a forked child (``os.fork``,
``multiprocessing`` with the ``fork`` start method, the default on Linux) must still
compute, and several Python threads must be able to call parallel code at once. GNU
OpenMP fails the first (the child is terminated, a fork ``Pool`` hangs), Numba's
``workqueue`` the second (two parallel launches at once abort the process), so
fusegrad runs on TBB and, without it, runs large loops on the calling thread alone.

Every child and thread is waited for with a timeout, so a hang fails the test.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import threading_layer
from fusegrad.runtime.lean_exec import LeanExecutable
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled


def _loss(x):
    return fnp.sum(fnp.cos(x) * fnp.exp(-0.25 * x * x) + fnp.tanh(x) * x)


GRAD = fg.jit(fg.grad(_loss))
N = 30_000


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=N)


def _grad_of(seed: int) -> np.ndarray:
    """The compiled gradient at ``_x(seed)`` (run in pool workers)."""
    return GRAD(_x(seed))


def _expected(seed: int) -> np.ndarray:
    x = _x(seed)
    return (-np.sin(x) * np.exp(-0.25 * x * x) - 0.5 * x * np.cos(x) * np.exp(-0.25 * x * x)
            + x / np.cosh(x) ** 2 + np.tanh(x))


@pytest.fixture(scope="module")
def parallel_grad():
    """``GRAD`` with its large loops compiled to run in chunks on the threading layer's
    threads, and run so in this process."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "PARALLEL_THRESHOLD", 1000)
        GRAD(_x(0))
    (plan,) = GRAD._cache.values()
    exe = plan.exe
    assert isinstance(exe, LeanExecutable)
    if not exe.threaded:
        pytest.skip("no thread-safe threading layer: chunks run on one thread")
    assert_close(GRAD(_x(0)), _expected(0), "exact64")
    return exe


def _wait_child(pid: int, seconds: float = 120) -> int:
    """The exit code of child ``pid``; killed (and the test failed) if it hangs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child hung for {seconds} s")


def _has_tbb() -> bool:
    from importlib import metadata

    try:
        metadata.distribution("tbb")
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not _has_tbb(), reason="no tbb wheel for this machine")
def test_the_threading_layer_is_tbb():
    """TBB (the ``tbb`` package, a dependency) is safe across fork and threads."""
    assert threading_layer.layer() == "tbb"
    import numba

    assert numba.threading_layer() == "tbb"


def test_a_forked_child_computes_after_parallel_calls(parallel_grad):
    expected = GRAD(_x(1))
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            code = 0 if np.array_equal(GRAD(_x(1)), expected) else 2
        finally:
            os._exit(code)
    assert _wait_child(pid) == 0


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_process_pool_computes_compiled_gradients(parallel_grad, method):
    seeds = [2, 3, 4, 5]
    with multiprocessing.get_context(method).Pool(2) as pool:
        got = pool.map_async(_grad_of, seeds).get(timeout=120)
    for seed, g in zip(seeds, got, strict=True):
        assert_close(g, _expected(seed), "exact64")


def test_threads_call_parallel_code_at_once(parallel_grad):
    seeds = list(range(10, 18))
    expected = {s: GRAD(_x(s)) for s in seeds}
    start, errors = threading.Barrier(len(seeds)), []

    def work(seed):
        try:
            start.wait(30)
            for _ in range(20):
                got = GRAD(_x(seed))
                if not np.array_equal(got, expected[seed]):
                    errors.append(seed)
        except Exception as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []
    for s in seeds:
        assert_close(expected[s], _expected(s), "exact64")


_WITHOUT_TBB = """
import os, sys, threading
import numpy as np
import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import lean
from fusegrad.runtime import threading_layer
from fusegrad.runtime.lean_exec import LeanExecutable

threading_layer._load_tbb = lambda: False  # as if the tbb package were missing
config.PARALLEL_THRESHOLD = 1000
grad = fg.jit(fg.grad(lambda x: fnp.sum(fnp.cos(x) * fnp.exp(-0.25 * x * x))))
xs = [np.random.default_rng(s).normal(size=30_000) for s in range(8)]
grad(xs[0])
(plan,) = grad._cache.values()
exe = plan.exe
assert isinstance(exe, LeanExecutable)
assert lean.chunked_kernels(exe.fused)  # loops that TBB would run on its threads
assert not exe.threaded  # on workqueue: one chunk after another, on the caller's thread
import numba
assert threading_layer.layer() == numba.threading_layer() == "workqueue"
expected = [grad(x) for x in xs]
bad, start = [], threading.Barrier(8)

def work(i):
    start.wait()
    for _ in range(30):
        if not np.array_equal(grad(xs[i]), expected[i]):
            bad.append(i)

threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not bad, bad
pid = os.fork()
if pid == 0:
    os._exit(0 if np.array_equal(grad(xs[1]), expected[1]) else 2)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
print("ok")
"""


def test_without_tbb_large_loops_stay_on_the_callers_thread():
    """On the fallback layer (``workqueue``, which aborts the process when two threads
    launch parallel work at once) the lean executor runs large loops' chunks one after
    another on the calling thread: concurrent callers get their answers, and a forked
    child computes."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("NUMBA_THREADING_LAYER", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_WITHOUT_TBB)], env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
