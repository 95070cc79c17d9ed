"""With the default ``BLAS_SERIAL_MAX`` (2**28 multiply-adds), an MLP training step of
batch 256 and widths 784-512-10 (products of up to 103M multiply-adds) runs BLAS on
one thread, by ``fg.jit`` and by plain compiled ``fg.value_and_grad`` alike; a product
above the limit keeps the threads. Results equal NumPy's hand-written backward."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import blas_threads, compiled, lean_exec
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled

needs_blas = pytest.mark.skipif(not blas_threads.libraries(), reason="no BLAS library found")


def _loss(p, x, y):
    w1, b1, w2, b2 = p
    h = fnp.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    return fnp.sum((z - y) ** 2) / x.shape[0]


def _numpy_grads(p, x, y):
    w1, b1, w2, b2 = p
    h = np.tanh(x @ w1 + b1)
    dz = 2 * (h @ w2 + b2 - y) / x.shape[0]
    dh = (dz @ w2.T) * (1 - h * h)
    return x.T @ dh, dh.sum(0), h.T @ dz, dz.sum(0)


def _data():
    rng = np.random.default_rng(0)
    f = np.float32
    p = ((rng.standard_normal((784, 512)) / 28).astype(f), np.zeros(512, f),
         (rng.standard_normal((512, 10)) / 23).astype(f), np.zeros(10, f))
    return p, rng.standard_normal((256, 784)).astype(f), rng.standard_normal((256, 10)).astype(f)


def _spy(monkeypatch, segment, seen: list, record) -> None:
    """``seen.append(record())`` whenever ``segment``'s machine code runs."""
    call = segment.code.call

    def recording(*args):
        seen.append(record())
        return call(*args)

    monkeypatch.setattr(segment.code, "call", recording)


@pytest.fixture
def record(monkeypatch):
    """The BLAS thread count in force while each compiled segment of the lean executor
    runs (segments built during the test), with its largest product, BLAS allowed 2."""
    before = blas_threads.threads()
    blas_threads.set_threads(2)
    seen, init = [], lean_exec._Segment.__init__

    def spied(self, fn, *args, **kwargs):
        init(self, fn, *args, **kwargs)
        size = max(blas_threads.products(fn), default=0)
        _spy(monkeypatch, self, seen, lambda: (blas_threads.threads(), size))

    monkeypatch.setattr(lean_exec._Segment, "__init__", spied)
    try:
        yield seen
    finally:
        blas_threads.set_threads(before)


@needs_blas
@pytest.mark.parametrize("how", ["jit", "value_and_grad"])
def test_mlp_step_runs_blas_on_one_thread(record, how):
    if blas_threads.threads() < 2:
        pytest.skip("BLAS has a single thread here")
    p, x, y = _data()
    vg = fg.value_and_grad(_loss)
    loss, grads = (fg.jit(vg) if how == "jit" else vg)(p, x, y)
    big = [n for n, size in record if size == 256 * 784 * 512]
    assert big and all(n == 1 for n in big)
    assert blas_threads.threads() == 2  # restored
    w1, b1, w2, b2 = p
    want_loss = np.sum((np.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2) / 256
    assert_close(np.float64(loss), np.float64(want_loss), "f32")
    for g, want in zip(grads, _numpy_grads(p, x, y)):
        assert_close(np.asarray(g, np.float64), want.astype(np.float64), "f32")


@needs_blas
def test_product_above_the_limit_keeps_the_threads(record, monkeypatch):
    if blas_threads.threads() < 2:
        pytest.skip("BLAS has a single thread here")
    monkeypatch.setattr(config, "BLAS_SERIAL_MAX", 256 * 784 * 512 - 1)
    p, x, y = _data()
    fg.jit(fg.value_and_grad(_loss))(p, x, y)
    big = [n for n, size in record if size == 256 * 784 * 512]
    assert big and all(n == 2 for n in big)


class _FakeLibrary:
    def __init__(self, n):
        self.n, self.calls = n, []

    def get(self):
        return self.n

    def set(self, n):
        self.calls.append(n)
        self.n = n


def test_serial_leaves_a_one_thread_library_alone(monkeypatch):
    """Entering and leaving ``serial()`` sets only the libraries not on one thread
    already (each set is a ctypes call into OpenBLAS, on every compiled call)."""
    one, two = _FakeLibrary(1), _FakeLibrary(2)
    monkeypatch.setattr(blas_threads, "_found", [[one, two]])
    with blas_threads.serial():
        assert (one.n, two.n) == (1, 1)
        with blas_threads.serial():
            pass
        assert (one.n, two.n) == (1, 1)
    assert (one.n, two.n) == (1, 2)
    assert one.calls == [] and two.calls == [1, 2]


@needs_blas
@pytest.mark.parametrize("how", ["grad", "jit"])
def test_fast_path_runs_small_products_on_one_thread(monkeypatch, how):
    """The per-call fast path (``LeanExecutable.fast_caller``) of a function whose
    products are small keeps BLAS on one thread too, instead of falling back to the
    general call."""
    before = blas_threads.threads()
    blas_threads.set_threads(2)
    try:
        if blas_threads.threads() < 2:
            pytest.skip("BLAS has a single thread here")
        rng = np.random.default_rng(3)
        w, x = rng.standard_normal((8, 8)), rng.standard_normal((16, 8))

        def f(w, x):
            return fnp.sum(fnp.tanh(x @ w) ** 2)

        g = fg.grad(f) if how == "grad" else fg.jit(fg.grad(f))
        for _ in range(3):
            want = g(w, x)
        serial = [p for _, e in compiled._cache.values()
                  if isinstance(e, lean_exec.LeanExecutable) for p in e.parts
                  if isinstance(p, lean_exec._Segment) and p.serial is not None]
        assert serial
        seen, general = [], []
        for segment in serial:
            _spy(monkeypatch, segment, seen, blas_threads.threads)
        monkeypatch.setattr(lean_exec.LeanExecutable, "call_unchecked",
                            lambda self, args: general.append(1))
        monkeypatch.setattr(lean_exec.LeanExecutable, "__call__",
                            lambda self, *args: general.append(1))
        xf = np.asfortranarray(x)  # not C-contiguous: the fast path copies it
        got = g(w, xf)
        assert general == [] and seen == [1]
        assert blas_threads.threads() == 2
        assert_close(got, want, "exact64")
        h = np.tanh(x @ w)
        assert_close(got, x.T @ (2 * h * (1 - h * h)), "exact64")
    finally:
        blas_threads.set_threads(before)
