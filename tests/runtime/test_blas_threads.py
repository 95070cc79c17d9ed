"""Compiled calls with matrix products inside loop bodies run BLAS single-threaded.

OpenBLAS spreads each product over worker threads; inside a ``scan`` or ``while_loop``
that means many small parallel products back to back, each waiting for every worker,
which on a loaded machine makes the run time of a call erratic. The structural
property checked here: the BLAS thread count in force while the generated entry runs
is 1 for such calls, untouched for the others, and restored after the call.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import blas_threads
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled

BLAS = blas_threads.blas()
needs_blas = pytest.mark.skipif(BLAS is None, reason="no OpenBLAS found")


def _exe(jitted):
    (plan,) = jitted._cache.values()
    return plan.exe


@pytest.fixture
def two_threads():
    """BLAS allowed two threads (if the machine has them) for the test."""
    before = BLAS.get()
    BLAS.set_global(2)
    try:
        yield BLAS.get()
    finally:
        BLAS.set_global(before)


def _record_threads(exe):
    """Wrap ``exe``'s entry so each call records the BLAS thread count in force."""
    seen, entry = [], exe.entry

    def recording(*args):
        seen.append(blas_threads.threads())
        return entry(*args)

    exe.entry = recording
    return seen


def _interpreted(f, *args):
    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        return f(*args)
    finally:
        config.DISABLE_JIT = old


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(5, 16, 8)), rng.normal(size=(8, 8)) / 3


def _scan_of_products(w, xs):
    def body(h, x):
        h = fnp.tanh(x @ w + h)
        return h, fnp.sum(h)

    return fg.scan(body, fnp.zeros((16, 8)), xs)


def _grad_of_scan(w, xs):
    return fg.grad(lambda w: fnp.sum(_scan_of_products(w, xs)[1] ** 2))(w)


def _while_of_products(w, xs):
    def body(c):
        i, h = c
        return i + 1, fnp.tanh(h @ w)

    return fg.while_loop(lambda c: c[0] < 4, body, (0, xs[0]))[1]


def _cond_in_scan(w, xs):
    def body(h, x):
        h = fg.cond(fnp.sum(x) > 0, lambda a: a @ w, lambda a: a * 2.0, x + h)
        return h, fnp.max(h)

    return fg.scan(body, fnp.zeros((16, 8)), xs)


def _product_outside_loops(w, xs):
    h = fg.cond(fnp.sum(w) > 0, lambda a: a @ w, lambda a: a - 1.0, xs[0])
    return fnp.tanh(xs[1] @ w) + h


def _scan_without_products(w, xs):
    return fg.scan(lambda h, x: (h * 0.5 + x, fnp.sum(x)), fnp.zeros((16, 8)), xs)


IN_LOOPS = [_scan_of_products, _grad_of_scan, _while_of_products, _cond_in_scan]
NOT_IN_LOOPS = [_product_outside_loops, _scan_without_products]


@pytest.mark.parametrize("f", IN_LOOPS + NOT_IN_LOOPS, ids=lambda f: f.__name__)
def test_products_in_loop_bodies_are_detected(f):
    xs, w = _data()
    jitted = fg.jit(f)
    jitted(w, xs)
    exe = _exe(jitted)
    assert bool(blas_threads.loop_products(exe.fused)) == (f in IN_LOOPS)
    assert exe.serial_blas == (f in IN_LOOPS and BLAS is not None)


def test_loop_product_sizes_are_multiply_adds():
    xs, w = _data()
    jitted = fg.jit(_scan_of_products)
    jitted(w, xs)
    assert blas_threads.loop_products(_exe(jitted).fused) == [16 * 8 * 8]


@needs_blas
@pytest.mark.parametrize(("limit", "serial"), [(0, False), (16 * 8 * 8 - 1, False),
                                              (16 * 8 * 8, True)])
def test_large_loop_products_keep_the_blas_threads(monkeypatch, limit, serial):
    monkeypatch.setattr(config, "LOOP_BLAS_SERIAL_MAX", limit)
    xs, w = _data(3)
    jitted = fg.jit(_scan_of_products)
    jitted(w, xs)
    assert _exe(jitted).serial_blas == serial


@needs_blas
@pytest.mark.parametrize("f", IN_LOOPS, ids=lambda f: f.__name__)
def test_loop_products_run_on_one_blas_thread(f, two_threads):
    xs, w = _data(1)
    jitted = fg.jit(f)
    jitted(w, xs)
    seen = _record_threads(_exe(jitted))
    got = jitted(w, xs)
    jitted(w, xs)
    assert seen == [1, 1]
    assert BLAS.get() == two_threads  # restored
    for a, b in zip(fg.tree.tree_leaves(got), fg.tree.tree_leaves(_interpreted(f, w, xs)),
                    strict=True):
        assert_close(np.asarray(a), np.asarray(b), "exact64")


@needs_blas
@pytest.mark.parametrize("f", NOT_IN_LOOPS, ids=lambda f: f.__name__)
def test_other_calls_keep_the_blas_threads(f, two_threads):
    xs, w = _data(2)
    jitted = fg.jit(f)
    jitted(w, xs)
    seen = _record_threads(_exe(jitted))
    jitted(w, xs)
    assert seen == [two_threads]


@needs_blas
def test_overlapping_serial_blocks_restore_the_count_once_all_end(two_threads):
    inside, leave = threading.Event(), threading.Event()
    seen = []

    def other():
        with blas_threads.serial():
            inside.set()
            leave.wait(10)
        seen.append(blas_threads.threads())

    t = threading.Thread(target=other)
    with blas_threads.serial():
        t.start()
        assert inside.wait(10)
        assert blas_threads.threads() == 1
    seen.append(blas_threads.threads())  # the other thread still inside its block
    leave.set()
    t.join(10)
    assert seen == [1, two_threads]
    assert BLAS.get() == two_threads


@needs_blas
def test_serial_block_restores_the_count_after_an_error(two_threads):
    with pytest.raises(ZeroDivisionError), blas_threads.serial():
        assert blas_threads.threads() == 1
        1 / 0  # noqa: B018
    assert BLAS.get() == two_threads
