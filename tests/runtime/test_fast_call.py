"""The per-call fast path of compiled gradients and jit (``LeanExecutable.fast_caller``).

A call with plain ndarrays of a signature seen before runs the compiled code without
the executable's general call; anything unusual (a new shape or dtype, a strided or
read-only array, rare inputs, ``FUSEGRAD_DEBUG_NANS``) still gets the right answer.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import lean_exec
from tests.helpers import check_grads


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def w1_np(x):
    return np.sum(np.sin(x) * np.exp(-0.5 * x * x) + np.tanh(x) * x)


def w1_grad(x):
    e = np.exp(-0.5 * x * x)
    t = np.tanh(x)
    return np.cos(x) * e - x * np.sin(x) * e + t + x * (1 - t * t)


@pytest.fixture
def slow_calls(monkeypatch):
    """How many calls took the lean executable's general call (``LeanExecutable.__call__``
    and ``call_unchecked``; the fast path, ``fast_caller``'s closure, does not)."""
    count = [0]
    for name in ("__call__", "call_unchecked"):
        general = getattr(lean_exec.LeanExecutable, name)

        def counting(self, *args, general=general):
            count[0] += 1
            return general(self, *args)

        monkeypatch.setattr(lean_exec.LeanExecutable, name, counting)
    monkeypatch.setattr(config, "DISABLE_JIT", False)
    monkeypatch.setattr(config, "DEBUG_NANS", False)
    return count


def test_repeated_calls_take_the_fast_path(slow_calls):
    g = fg.grad(w1)
    x = np.linspace(-2, 2, 16)
    np.testing.assert_allclose(g(x), w1_grad(x), rtol=1e-12, atol=1e-14)
    g(x)
    before = slow_calls[0]
    for k in range(50):
        y = x + 0.01 * k
        np.testing.assert_allclose(g(y), w1_grad(y), rtol=1e-12, atol=1e-14)
    assert slow_calls[0] == before


def test_value_and_grad_and_jit_take_the_fast_path(slow_calls):
    vg, j = fg.value_and_grad(w1), fg.jit(w1)
    x = np.linspace(-1, 3, 16)
    vg(x), vg(x), j(x), j(x)
    before = slow_calls[0]
    for k in range(20):
        y = x * (1 + 0.1 * k)
        v, dx = vg(y)
        assert type(v) is np.ndarray and v.shape == () and v.dtype == np.float64
        np.testing.assert_allclose(v, w1_np(y), rtol=1e-12)
        np.testing.assert_allclose(dx, w1_grad(y), rtol=1e-12, atol=1e-14)
        out = j(y)
        assert type(out) is np.ndarray and out.shape == ()
        np.testing.assert_allclose(out, w1_np(y), rtol=1e-12)
    assert slow_calls[0] == before


def test_results_are_fresh_arrays_not_shared_between_calls():
    g = fg.grad(w1)
    x1, x2 = np.linspace(-1, 1, 16), np.linspace(0, 4, 16)
    r1 = g(x1)
    r1b = g(x1)
    r2 = g(x2)
    assert r1 is not r1b and not np.shares_memory(r1, r1b) and not np.shares_memory(r1, r2)
    np.testing.assert_allclose(r1, w1_grad(x1), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r2, w1_grad(x2), rtol=1e-12, atol=1e-14)
    r1[:] = 7.0  # the caller owns its result: the next call is unaffected
    np.testing.assert_allclose(g(x1), w1_grad(x1), rtol=1e-12, atol=1e-14)


def test_several_threads_get_their_own_answers():
    g = fg.grad(lambda x, y: fnp.sum(fnp.tanh(x * y) * fnp.exp(-x)), argnums=(0, 1))
    base = np.linspace(0.1, 1.0, 16)
    g(base, base)  # compiled before the threads start
    errors = []

    def work(k):
        try:
            for i in range(200):
                x, y = base * (k + 1), base + 0.001 * i
                gx, gy = g(x, y)
                s = 1 - np.tanh(x * y) ** 2
                np.testing.assert_allclose(gx, np.exp(-x) * (y * s - np.tanh(x * y)),
                                           rtol=1e-11, atol=1e-14)
                np.testing.assert_allclose(gy, np.exp(-x) * x * s, rtol=1e-11, atol=1e-14)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_new_shape_or_dtype_takes_the_general_path(slow_calls):
    g = fg.grad(w1)
    x = np.linspace(-1, 1, 16)
    g(x), g(x)
    before = slow_calls[0]
    x17 = np.linspace(-1, 1, 17)
    np.testing.assert_allclose(g(x17), w1_grad(x17), rtol=1e-12, atol=1e-14)
    assert slow_calls[0] > before
    x32 = x.astype(np.float32)
    got = g(x32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, w1_grad(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g(x), w1_grad(x), rtol=1e-12, atol=1e-14)


def test_strided_and_read_only_arrays_of_a_known_shape():
    g, j = fg.grad(w1), fg.jit(w1)
    x = np.linspace(-1, 1, 16)
    g(x), g(x), j(x), j(x)
    strided = np.linspace(-3, 3, 32)[::2]
    assert strided.shape == x.shape and not strided.flags.c_contiguous
    np.testing.assert_allclose(g(strided), w1_grad(strided), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(j(strided), w1_np(strided), rtol=1e-12)
    ro = np.linspace(0, 2, 16)
    ro.flags.writeable = False
    np.testing.assert_allclose(g(ro), w1_grad(ro), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g(x), w1_grad(x), rtol=1e-12, atol=1e-14)


def test_rare_inputs_and_zero_d_arguments():
    g = fg.grad(lambda x, s: fnp.sum(fnp.sin(x * s)), argnums=(0, 1))
    x, s = np.linspace(-1, 1, 16), np.asarray(0.5)
    g(x, s), g(x, s)
    for big in (1.0, 1e6, 1e300):  # huge trig arguments: the exact entry
        y = x * big
        gx, gs = g(y, s)
        np.testing.assert_allclose(gx, np.cos(y * s) * s, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gs, np.sum(np.cos(y * s) * y), rtol=1e-9,
                                   atol=1e-9 * np.abs(y).sum())
        assert gs.shape == () and type(gs) is np.ndarray


def test_debug_nans_is_checked_on_every_call():
    g = fg.grad(lambda x: fnp.sum(fnp.sqrt(x)))
    x = np.linspace(1, 2, 16)
    g(x), g(x), g(-x)
    with pytest.raises(FloatingPointError), fg.debug_nans():
        g(-x)
    assert np.isnan(g(-x)).all()  # the mode off again: NaNs returned, no check
    np.testing.assert_allclose(g(x), 0.5 / np.sqrt(x), rtol=1e-13)


def test_compiled_gradient_against_finite_differences():
    x = np.linspace(-1.5, 1.5, 16)
    check_grads(w1, [x], order=2)
    g = fg.jit(fg.grad(w1))
    g(x)
    np.testing.assert_allclose(g(x), w1_grad(x), rtol=1e-12, atol=1e-14)


def test_jit_with_donated_arguments_keeps_the_general_call():
    j = fg.jit(lambda a, b: a * 2.0 + b, donate_argnums=0)
    b = np.arange(8.0)
    for k in range(3):
        a = np.full(8, float(k))
        np.testing.assert_allclose(j(a, b), 2.0 * k + b)
