"""A process forked while another thread compiles can compile and run compiled code.

``fork`` copies only the forking thread; the locks a compiling thread held (Numba's
compiler lock, llvmlite's, fusegrad's per-module locks and lock files, the executable
cache's) would stay held in the child forever. Every child here runs under a timeout,
so a deadlock fails the test.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import compile as cg_compile
from tests.runtime.test_threading_layer import _wait_child

pytestmark = pytest.mark.compiled

X = np.linspace(0.1, 1.0, 200)


def _fresh(c: float):
    """A jitted function whose module no other test compiles (``c`` is in its source)."""
    return fg.jit(lambda x: fnp.sum(fnp.exp(fnp.cos(x * c)) * fnp.tanh(x) + c))


def _expected(c: float):
    return np.sum(np.exp(np.cos(X * c)) * np.tanh(X) + c)


def _numba_is_compiling(seconds: float = 120) -> bool:
    """Wait until another thread holds Numba's compiler lock."""
    from numba.core.compiler_lock import global_compiler_lock

    lock, deadline = global_compiler_lock._lock, time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not lock.acquire(blocking=False):
            return True
        lock.release()
        time.sleep(0.002)
    return False


def _run_in_child(body) -> int:
    """Fork; the child runs ``body()`` (True: success) and exits; the parent returns its
    exit code (a child that hangs is killed and fails the test)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if body() else 2
        finally:
            os._exit(code)
    return _wait_child(pid)


@pytest.mark.numba_codegen  # forks while Numba compiles
def test_a_child_forked_mid_compile_compiles_the_same_and_new_functions():
    fg.jit(lambda x: x + 1.0)(X)  # Numba loaded and warm
    c_busy, c_new = 1.0 + uuid.uuid4().int % 1000 / 7, 2.0 + uuid.uuid4().int % 1000 / 7
    busy, new = _fresh(c_busy), _fresh(c_new)
    t = threading.Thread(target=busy, args=(X,), daemon=True)
    t.start()
    assert _numba_is_compiling()

    def child():
        return (np.allclose(new(X), _expected(c_new))  # Numba's locks
                and np.allclose(busy(X), _expected(c_busy)))  # and the module's own

    assert _run_in_child(child) == 0
    t.join(120)
    assert np.allclose(busy(X), _expected(c_busy))


def _acquire_within(key: str, seconds: float) -> bool:
    """Whether ``key_lock(key)`` can be taken (and is released) within ``seconds``."""
    done = threading.Event()

    def take():
        with cg_compile.key_lock(key):
            done.set()

    threading.Thread(target=take, daemon=True).start()
    return done.wait(seconds)


def test_a_child_does_not_keep_the_module_locks_of_the_parents_threads():
    """The child's copy of a lock file a parent thread held is closed: neither the child
    nor the parent waits for it."""
    key = f"test-fork-{uuid.uuid4().hex}"
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with cg_compile.key_lock(key):
            inside.set()
            leave.wait(60)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if _acquire_within(key, 30) else 2  # once the parent's thread lets go
            time.sleep(3)  # alive while the parent takes the lock
        finally:
            os._exit(code)
    leave.set()
    t.join(10)
    assert _acquire_within(key, 2)  # the child, still alive, does not hold it
    assert _wait_child(pid) == 0


@pytest.mark.numba_codegen  # Numba's background compile of the parallel entry
def test_a_child_forked_during_a_background_compile_starts_it_again(monkeypatch):
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)
    c = 3.0 + uuid.uuid4().int % 1000 / 7
    g = fg.jit(lambda x: fnp.sin(x * c) * fnp.exp(-x * x))
    x = np.random.default_rng(0).normal(size=30_000)
    expected = g(x)  # starts compiling the parallel entry in the background
    (plan,) = g._cache.values()
    background = plan.exe.parallel
    if background is None:
        pytest.skip("one thread on this machine: no parallel entry")
    assert background.started and not background.done

    def child():
        deadline = time.monotonic() + 300
        while not background.done and time.monotonic() < deadline:
            if not np.array_equal(g(x), expected):
                return False
            time.sleep(0.05)
        return background.done and np.array_equal(g(x), expected)

    assert _run_in_child(child) == 0
