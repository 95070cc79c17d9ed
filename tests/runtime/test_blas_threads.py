"""Compiled calls whose matrix products are all small run BLAS single-threaded.

OpenBLAS spreads each product over worker threads; for small products, in a ``scan``
body or not, each waits for every worker, which on a loaded machine makes the run time
of a call erratic. The structural property checked here: the BLAS thread count in
force while the generated entry runs is 1 for such calls, untouched for the others
(no products, or a large one), and restored after the call, from whichever thread.
The lean executor decides this per compiled segment (``lean_exec._Segment.serial``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import blas_threads, lean_exec
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled

BLAS = blas_threads.libraries()
needs_blas = pytest.mark.skipif(not BLAS, reason="no BLAS library found")


def _exe(jitted):
    (plan,) = jitted._cache.values()
    return plan.exe


@pytest.fixture
def two_threads():
    """BLAS allowed two threads (if the machine has them) for the test."""
    before = blas_threads.threads()
    blas_threads.set_threads(2)
    try:
        yield blas_threads.threads()
    finally:
        blas_threads.set_threads(before)


def _segments(exe) -> list:
    """The compiled segments of ``exe`` (a ``lean_exec.LeanExecutable``)."""
    assert isinstance(exe, lean_exec.LeanExecutable)
    return [p for p in exe.parts if isinstance(p, lean_exec._Segment)]


def _serial_blas(exe) -> bool:
    """Whether ``exe``'s products run on one BLAS thread: every compiled segment with
    products runs inside ``blas_threads.serial()`` (and no segment without them does)."""
    segments = _segments(exe)
    assert all(s.serial is None for s in segments if not blas_threads.products(s.fn))
    with_products = [s for s in segments if blas_threads.products(s.fn)]
    return bool(with_products) and all(s.serial is not None for s in with_products)


def _record_threads(exe, monkeypatch):
    """Wrap the machine code of ``exe``'s segments so each run records the BLAS thread
    count in force."""
    seen = []
    for segment in _segments(exe):
        call = segment.code.call

        def recording(*args, call=call):
            seen.append(blas_threads.threads())
            return call(*args)

        monkeypatch.setattr(segment.code, "call", recording)
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


def _step_of_products(w, xs):
    """A training step: products outside any loop (the demo's compiled step)."""
    return fg.grad(lambda w: fnp.sum(fnp.tanh(xs[0] @ w) @ w.T))(w)


WITH_PRODUCTS = [_scan_of_products, _grad_of_scan, _while_of_products, _cond_in_scan,
                 _product_outside_loops, _step_of_products]
WITHOUT_PRODUCTS = [_scan_without_products]


@pytest.mark.parametrize("f", WITH_PRODUCTS + WITHOUT_PRODUCTS, ids=lambda f: f.__name__)
def test_products_are_found_wherever_they_are(f):
    xs, w = _data()
    jitted = fg.jit(f)
    jitted(w, xs)
    exe = _exe(jitted)
    assert bool(blas_threads.products(exe.fused)) == (f in WITH_PRODUCTS)
    assert _serial_blas(exe) == (f in WITH_PRODUCTS and bool(BLAS))


def test_product_sizes_are_multiply_adds():
    xs, w = _data()
    jitted = fg.jit(_scan_of_products)
    jitted(w, xs)
    assert blas_threads.products(_exe(jitted).fused) == [16 * 8 * 8]


@needs_blas
@pytest.mark.parametrize(("limit", "serial"), [(0, False), (16 * 8 * 8 - 1, False),
                                              (16 * 8 * 8, True)])
@pytest.mark.parametrize("f", [_scan_of_products, _product_outside_loops],
                         ids=lambda f: f.__name__)
def test_large_products_keep_the_blas_threads(monkeypatch, f, limit, serial):
    monkeypatch.setattr(config, "BLAS_SERIAL_MAX", limit)
    xs, w = _data(3)
    jitted = fg.jit(f)
    jitted(w, xs)
    assert _serial_blas(_exe(jitted)) == serial


@pytest.mark.parametrize(("env", "limit"), [
    ({"FUSEGRAD_BLAS_SERIAL_MAX": "7"}, 7),
    ({"FUSEGRAD_LOOP_BLAS_SERIAL_MAX": "9"}, 9),  # the former name still works
    ({"FUSEGRAD_BLAS_SERIAL_MAX": "7", "FUSEGRAD_LOOP_BLAS_SERIAL_MAX": "9"}, 7),
    ({}, 1 << 28),
])
def test_the_limit_is_read_from_the_environment(env, limit):
    base = {k: v for k, v in os.environ.items()
            if k not in ("FUSEGRAD_BLAS_SERIAL_MAX", "FUSEGRAD_LOOP_BLAS_SERIAL_MAX")}
    r = subprocess.run([sys.executable, "-c", "from fusegrad import config; "
                        "print(config.BLAS_SERIAL_MAX)"], env={**base, **env},
                       capture_output=True, text=True, timeout=120, check=True)
    assert int(r.stdout) == limit


@needs_blas
@pytest.mark.parametrize("f", WITH_PRODUCTS, ids=lambda f: f.__name__)
def test_small_products_run_on_one_blas_thread(f, two_threads, monkeypatch):
    xs, w = _data(1)
    jitted = fg.jit(f)
    jitted(w, xs)
    seen = _record_threads(_exe(jitted), monkeypatch)
    got = jitted(w, xs)
    jitted(w, xs)
    assert seen == [1, 1]
    assert blas_threads.threads() == two_threads  # restored
    for a, b in zip(fg.tree.tree_leaves(got), fg.tree.tree_leaves(_interpreted(f, w, xs)),
                    strict=True):
        assert_close(np.asarray(a), np.asarray(b), "exact64")


@needs_blas
@pytest.mark.parametrize("f", WITHOUT_PRODUCTS, ids=lambda f: f.__name__)
def test_other_calls_keep_the_blas_threads(f, two_threads, monkeypatch):
    xs, w = _data(2)
    jitted = fg.jit(f)
    jitted(w, xs)
    seen = _record_threads(_exe(jitted), monkeypatch)
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
    assert blas_threads.threads() == two_threads


@needs_blas
def test_serial_block_restores_the_count_after_an_error(two_threads):
    with pytest.raises(ZeroDivisionError), blas_threads.serial():
        assert blas_threads.threads() == 1
        1 / 0  # noqa: B018
    assert blas_threads.threads() == two_threads


@needs_blas
def test_a_child_forked_inside_a_serial_block_gets_the_count_back(two_threads):
    """The thread inside the block does not survive the fork: the child restores the
    count it would have restored."""
    from tests.runtime.test_threading_layer import _wait_child

    inside, leave = threading.Event(), threading.Event()

    def other():
        with blas_threads.serial():
            inside.set()
            leave.wait(30)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if blas_threads.threads() == two_threads else 2
        finally:
            os._exit(code)
    leave.set()
    t.join(10)
    assert _wait_child(pid) == 0
    assert blas_threads.threads() == two_threads


def _conv_step(w, x):
    """A convolution and its gradient."""
    from fusegrad.nn import functional as F

    return fg.grad(lambda w: fnp.sum(fnp.tanh(F.conv2d(x, w, padding=1)) ** 2))(w)


@needs_blas
def test_ops_between_segments_share_the_single_blas_thread(two_threads, monkeypatch):
    # an op run with NumPy between compiled segments whose products go to NumPy's BLAS
    # (a library of its own): the convolutions, kept out of the compiled segments here
    # (the lean generator lowers them), are on one thread while the call runs, and the
    # count comes back after
    from fusegrad.codegen import lean
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify
    from fusegrad.runtime import compiled
    from fusegrad.tracer import trace_pytree

    rng = np.random.default_rng(5)
    w, x = rng.normal(size=(4, 3, 3, 3)), rng.normal(size=(2, 3, 8, 8))
    traced = trace_pytree(_conv_step, (w, x))
    fn = traced.function
    with monkeypatch.context() as m:
        real = lean.lowers
        m.setattr(lean, "lowers", lambda op: op.name != "conv" and real(op))
        exe = lean_exec.build(fn, fuse(simplify(fn)), "test", compiled._run_region)
    assert exe.serial is not None and any(getattr(p, "name", "") == "conv" for p in exe.parts)
    libs = blas_threads.libraries()
    seen = []
    real_op = lean_exec.run_op

    def recording(name, op, args):
        if op.name == "conv":
            seen.append([lib.get() for lib in libs])
        return real_op(name, op, args)

    monkeypatch.setattr(lean_exec, "run_op", recording)
    (got,) = exe(w, x, *traced.free)
    assert seen and all(n == 1 for counts in seen for n in counts)
    assert [lib.get() for lib in libs] == [two_threads] * len(libs)
    assert_close(got, _interpreted(_conv_step, w, x), "exact64")
