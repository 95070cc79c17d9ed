"""Threads: first calls of a transform compile once per signature; eager autograd
graphs of different threads stay separate; ``.grad`` accumulation from several
threads sums exactly; ``no_grad`` is per thread.

Every join has a timeout, so a deadlock fails the test instead of hanging it.
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import compile as cg_compile

THREADS = 8
TIMEOUT = 120.0
#: The traced functions sleep while being traced (Python code runs only then), so
#: that a trace takes long enough for the other threads to arrive during it.
SLOW_TRACE = 0.05


def run_threads(work, n: int = THREADS) -> list:
    """``work(i)`` on ``n`` threads released together; their results, in thread order.

    Re-raises the first exception a thread raised; fails if a thread is still running
    after ``TIMEOUT`` seconds.
    """
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def body(i):
        try:
            barrier.wait(TIMEOUT)
            results[i] = work(i)
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    alive = [t for t in threads if t.is_alive()]
    assert not alive, f"{len(alive)} thread(s) still running after {TIMEOUT} s (deadlock?)"
    if errors:
        raise errors[0]
    return results


def _stats(kind: str, name: str) -> int:
    return fg.compile_stats()[kind].get(name, 0)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """A cold, empty cache directory for this test."""
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cg_compile, "_fallback_dir", None)
    return tmp_path / "cache"


@pytest.mark.compiled
def test_jit_same_signature_compiles_once(fresh_cache):
    def conc_jit_same(x, y):
        time.sleep(SLOW_TRACE)
        return fnp.tanh(x) * y + fnp.exp(-x)

    f = fg.jit(conc_jit_same)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(5, 11)) for _ in range(THREADS)]
    y = rng.normal(size=(5, 11))
    modules = fg.compile_stats()["modules"]
    got = run_threads(lambda i: f(xs[i], y))
    for x, g in zip(xs, got):
        np.testing.assert_allclose(g, np.tanh(x) * y + np.exp(-x), rtol=1e-12, atol=1e-14)
    assert _stats("traces", "conc_jit_same") == 1
    assert _stats("compiles", "conc_jit_same") == 1
    assert fg.compile_stats()["modules"] == modules + 1


@pytest.mark.compiled
def test_jit_different_signatures_compile_once_each(fresh_cache):
    def conc_jit_shapes(x):
        time.sleep(SLOW_TRACE)
        return fnp.sin(x) * 2.0 + x

    f = fg.jit(conc_jit_shapes)
    shapes = [(3,), (4,), (2, 3), (6,)]
    xs = [np.linspace(-1.0, 1.0, int(np.prod(shapes[i % 4]))).reshape(shapes[i % 4]) + i
          for i in range(THREADS)]
    got = run_threads(lambda i: f(xs[i]))
    for x, g in zip(xs, got):
        np.testing.assert_allclose(g, np.sin(x) * 2.0 + x, rtol=1e-12, atol=1e-14)
    assert _stats("traces", "conc_jit_shapes") == len(shapes)
    assert _stats("compiles", "conc_jit_shapes") == len(shapes)


@pytest.mark.compiled
def test_grad_compiles_once(fresh_cache):
    def conc_grad(w, x):
        time.sleep(SLOW_TRACE)
        return fnp.sum(fnp.log1p(fnp.exp(x @ w)))

    df = fg.grad(conc_grad)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 3))
    ws = [rng.normal(size=3) for _ in range(THREADS)]
    got = run_threads(lambda i: df(ws[i], x))
    for w, g in zip(ws, got):
        s = 1.0 / (1.0 + np.exp(-(x @ w)))
        np.testing.assert_allclose(g, x.T @ s, rtol=1e-12, atol=1e-14)
    assert _stats("traces", "conc_grad") == 1
    assert _stats("compiles", "conc_grad_grad") == 1


@pytest.mark.compiled
def test_vmap_compiles_once(fresh_cache):
    def conc_vmap(x, y):
        time.sleep(SLOW_TRACE)
        return fnp.sum(x * y) + fnp.max(x)

    vf = fg.vmap(conc_vmap, in_axes=(0, None))
    rng = np.random.default_rng(2)
    y = rng.normal(size=7)
    xs = [rng.normal(size=(4, 7)) for _ in range(THREADS)]
    got = run_threads(lambda i: vf(xs[i], y))
    for x, g in zip(xs, got):
        np.testing.assert_allclose(g, x @ y + x.max(axis=1), rtol=1e-12, atol=1e-14)
    assert _stats("traces", "conc_vmap") == 1
    assert _stats("compiles", "conc_vmap_vmap") == 1


@pytest.mark.compiled
def test_jvp_generates_one_module(fresh_cache):
    def conc_jvp(x):
        return fnp.cos(x) * x * x

    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(3, 13)) for _ in range(THREADS)]
    ts = [rng.normal(size=(3, 13)) for _ in range(THREADS)]
    modules = fg.compile_stats()["modules"]
    got = run_threads(lambda i: fg.jvp(conc_jvp, (xs[i],), (ts[i],)))
    for x, t, (out, tan) in zip(xs, ts, got):
        np.testing.assert_allclose(out, np.cos(x) * x * x, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(tan, (-np.sin(x) * x * x + 2 * x * np.cos(x)) * t,
                                   rtol=1e-12, atol=1e-14)
    # fg.jvp keeps no cache of its own (a trace per call), but the generated
    # module is shared: written, imported and compiled once.
    assert fg.compile_stats()["modules"] == modules + 1


def test_unwritable_cache_directory_falls_back_to_one_directory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(config, "CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(cg_compile, "_fallback_dir", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dirs = run_threads(lambda i: cg_compile._directory())
    assert len(set(dirs)) == 1
    assert dirs[0] != str(blocker / "cache")
    assert sum("not writable" in str(w.message) for w in caught) == 1


def test_eager_backward_from_many_threads():
    """8 threads x 1,000 backward calls, each on its own graph."""
    calls = 1000

    def work(i):
        rng = np.random.default_rng(100 + i)
        for _ in range(calls):
            xv = rng.normal(size=3)
            x = fg.tensor(xv, requires_grad=True)
            y = (x * x * float(i + 1)).sum() + (x.sin()).sum()
            y.backward()
            expected = 2.0 * (i + 1) * xv + np.cos(xv)
            if not np.allclose(x.grad.numpy(), expected, rtol=1e-13, atol=1e-15):
                return (xv, x.grad.numpy())
        return None

    bad = run_threads(work)
    assert bad == [None] * THREADS


def test_shared_leaf_accumulates_exactly():
    w = fg.tensor(np.zeros(4), requires_grad=True)
    reps = 200

    def work(i):
        c = fg.tensor(np.arange(4.0) + i)
        for _ in range(reps):
            (w * c).sum().backward()

    run_threads(work)
    expected = reps * sum(np.arange(4.0) + i for i in range(THREADS))
    np.testing.assert_array_equal(w.grad.numpy(), expected)


def test_no_grad_is_thread_local():
    entered = threading.Event()
    checked = threading.Event()
    seen = {}

    def in_no_grad(_):
        with fg.no_grad():
            entered.set()
            assert checked.wait(TIMEOUT)
            x = fg.tensor([1.0, 2.0], requires_grad=True)
            seen["inside"] = (fg.is_grad_enabled(), (x * 2).requires_grad)
        seen["after"] = fg.is_grad_enabled()

    def outside(_):
        assert entered.wait(TIMEOUT)
        x = fg.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        seen["other"] = (fg.is_grad_enabled(), y.requires_grad, y.grad_fn is not None)
        checked.set()

    run_threads(lambda i: (in_no_grad if i == 0 else outside)(i), n=2)
    assert seen == {"inside": (False, False), "after": True, "other": (True, True, True)}


def test_compile_stats_reset(monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", True)

    def conc_stats(x):
        return x * 3.0

    f = fg.jit(conc_stats)
    f(np.ones(2))
    f(np.ones(2))
    f(np.ones(3))
    snap = fg.compile_stats(reset=True)
    assert snap["traces"]["conc_stats"] == 2
    assert "conc_stats" not in snap["compiles"]  # the interpreter compiles nothing
    assert fg.compile_stats() == {"traces": {}, "compiles": {}, "modules": 0}
