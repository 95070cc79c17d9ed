"""A process forked while another thread compiles can compile and run compiled code.

``fork`` copies only the forking thread; the locks a compiling thread held (the lean
code generator's engine lock, held while LLVM optimises and loads a module, llvmlite's,
fusegrad's per-module locks and lock files, the executable cache's) would stay held in
the child forever, and the child's copy of LLVM's engine holds that thread's work
half-done. Every child here runs under a timeout, so a deadlock fails the test.
"""

from __future__ import annotations

import os
import threading
import uuid

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen.lean import engine
from fusegrad.runtime import lean_exec, threading_layer
from tests.runtime.test_threading_layer import _wait_child

pytestmark = pytest.mark.compiled

X = np.linspace(0.1, 1.0, 200)


def _fresh(c: float):
    """A jitted function whose module no other test compiles (``c`` is in its source)."""
    return fg.jit(lambda x: fnp.sum(fnp.exp(fnp.cos(x * c)) * fnp.tanh(x) + c))


def _expected(c: float):
    return np.sum(np.exp(np.cos(X * c)) * np.tanh(X) + c)


def _pause_llvm(monkeypatch, where: str):
    """``(inside, go)``: the next module this process's LLVM engine works on stops at
    ``where`` (``"optimise"``: optimised, its machine code not emitted yet; ``"finalize"``:
    handed to MCJIT, not finalized yet), holding the engine's lock, and sets ``inside``;
    it goes on once ``go`` is set. A forked child's compiles do not stop."""
    inside, go = threading.Event(), threading.Event()
    parent = os.getpid()

    def stop():
        if os.getpid() == parent and not inside.is_set():
            inside.set()
            go.wait(120)

    if where == "optimise":
        optimise = engine._optimise

        def paused(mod, level):
            optimise(mod, level)
            stop()

        monkeypatch.setattr(engine, "_optimise", paused)
    else:
        ee = engine._engine()
        finalize = ee.finalize_object

        def paused():
            stop()
            finalize()

        monkeypatch.setattr(ee, "finalize_object", paused)
    return inside, go


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


@pytest.mark.parametrize("where", ["optimise", "finalize"])
def test_a_child_forked_mid_compile_compiles_the_same_and_new_functions(monkeypatch, where):
    fg.jit(lambda x: x + 1.0)(X)  # LLVM loaded and warm
    c_busy, c_new = 1.0 + uuid.uuid4().int % 1000 / 7, 2.0 + uuid.uuid4().int % 1000 / 7
    busy, new = _fresh(c_busy), _fresh(c_new)
    inside, go = _pause_llvm(monkeypatch, where)
    t = threading.Thread(target=busy, args=(X,), daemon=True)
    t.start()
    try:
        assert inside.wait(120) and engine._lock.locked()  # held by the thread's compile

        def child():
            return (np.allclose(new(X), _expected(c_new))  # the engine's locks and state
                    and np.allclose(busy(X), _expected(c_busy)))  # and the module's own

        assert _run_in_child(child) == 0
    finally:
        go.set()
    t.join(120)
    assert not t.is_alive()
    assert np.allclose(busy(X), _expected(c_busy))


def test_a_child_forked_while_a_threaded_function_compiles_runs_it_on_threads(
        monkeypatch):
    """A function whose large loops run in chunks on the threading layer's threads: a
    child forked while a thread compiles it compiles it again and runs it, threaded."""
    if threading_layer.layer() not in threading_layer.THREAD_SAFE:
        pytest.skip("no thread-safe threading layer: chunks run on one thread")
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)
    c = 3.0 + uuid.uuid4().int % 1000 / 7
    g = fg.jit(lambda x: fnp.sin(x * c) * fnp.exp(-x * x))
    x = np.random.default_rng(0).normal(size=30_000)
    expected = np.sin(x * c) * np.exp(-x * x)
    inside, go = _pause_llvm(monkeypatch, "optimise")
    t = threading.Thread(target=g, args=(x,), daemon=True)
    t.start()
    try:
        assert inside.wait(120) and engine._lock.locked()

        def child():
            got = g(x)
            (plan,) = g._cache.values()
            return (isinstance(plan.exe, lean_exec.LeanExecutable) and plan.exe.threaded
                    and np.allclose(got, expected, rtol=1e-12, atol=1e-14)
                    and np.array_equal(g(x), got))

        assert _run_in_child(child) == 0
    finally:
        go.set()
    t.join(120)
    assert not t.is_alive()
    (plan,) = g._cache.values()
    assert plan.exe.threaded
    np.testing.assert_allclose(g(x), expected, rtol=1e-12, atol=1e-14)
