"""Donated parameters take results in place (``codegen.lean.inplace``, ``lean_exec``).

With ``donate_argnums`` a result of a donated parameter's shape and dtype computed by a
loop kernel is written over that parameter's array, where nothing reads the parameter
afterwards; everything else still gets a fresh array, and a result the caller holds is
never overwritten by a later call.
"""

from __future__ import annotations

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.lean.inplace import donatable
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.tracer import trace


def _sgd(p, x):
    loss, g = fg.value_and_grad(lambda w: fnp.sum(fnp.tanh(x @ w) ** 2))(p)
    return loss, g, p - 0.1 * g


def _reference(p, x):
    h = np.tanh(x @ p)
    g = x.T @ (2 * h * (1 - h * h))
    return np.sum(h * h), g, p - 0.1 * g


def test_new_parameters_are_written_over_the_donated_ones():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8))
    p = rng.standard_normal((8, 4))
    step = fg.jit(_sgd, donate_argnums=0)
    for _ in range(3):
        want = _reference(p.copy(), x)
        before = p
        loss, g, p = step(p, x)
        assert p is before  # the donated array holds the new parameters
        np.testing.assert_allclose(loss, want[0], rtol=1e-12)
        np.testing.assert_allclose(g, want[1], rtol=1e-12)
        np.testing.assert_allclose(p, want[2], rtol=1e-12)
        assert not np.shares_memory(g, p) and not np.shares_memory(g, x)


def test_same_bits_as_without_donation():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    p = rng.standard_normal((8, 4)).astype(np.float32)
    plain, donating = fg.jit(_sgd), fg.jit(_sgd, donate_argnums=0)
    q = p.copy()
    for _ in range(3):
        a, b = plain(p, x), donating(q, x)
        for u, v in zip(a, b):
            assert np.array_equal(np.asarray(u), np.asarray(v))
        p, q = a[2], b[2]


def test_results_held_by_the_caller_are_not_overwritten():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 8))
    p = rng.standard_normal((8, 4))
    step = fg.jit(_sgd, donate_argnums=0)
    kept = []
    for _ in range(3):
        _, g, p = step(p, x)
        kept.append((g, g.copy(), p.copy()))
    for g, g_copy, _ in kept:
        assert np.array_equal(g, g_copy)
    assert kept[-1][0] is not kept[-2][0]
    # without donation the parameters' arrays keep their contents
    plain = fg.jit(_sgd)
    p0 = p.copy()
    _, _, new = plain(p, x)
    assert np.array_equal(p, p0) and new is not p


def test_an_argument_viewing_a_donated_one_keeps_it_whole():
    rng = np.random.default_rng(3)
    p = rng.standard_normal((8, 8))
    step = fg.jit(lambda p, q: (p - 0.5 * q, fnp.sum(q)), donate_argnums=0)
    want, total = p - 0.5 * p.T, np.sum(p)
    orig = p.copy()
    new, s = step(p, p.T)  # q views p (copied: it is strided)
    np.testing.assert_allclose(new, want, rtol=1e-14)
    np.testing.assert_allclose(s, total, rtol=1e-12)
    p = orig.copy()
    new, s = step(p, p[::1])  # q views p, contiguous: p may not be overwritten
    np.testing.assert_allclose(new, 0.5 * orig, rtol=1e-14)
    assert np.array_equal(p, orig) and new is not p
    p = orig
    same = p.copy()
    new, _ = step(same, same)  # one array passed twice
    np.testing.assert_allclose(new, 0.5 * p, rtol=1e-14)
    view = np.ones((16, 8))[::2]  # a donated view gets a fresh result
    base = view.base.copy()
    step(view, np.zeros((8, 8)))
    assert np.array_equal(view.base, base)


def _pairs(f, *args, donated=(0,)):
    return donatable(fuse(simplify(trace(f, *args))), frozenset(donated))


def test_which_results_may_take_a_donated_parameter():
    a, b = np.ones((4, 3)), np.ones((4, 3))
    assert _pairs(lambda p, q: p * 2.0 + q, a, b) == ((0, 0),)
    # read after the kernel that would overwrite it
    assert _pairs(lambda p, q: (p * 2.0, fnp.sum(p @ q.T)), a, b) == ()
    # the parameter is itself a result
    assert _pairs(lambda p, q: (p + q, p), a, b) == ()
    # a reduction of it is computed by an earlier kernel: the update may overwrite it
    assert _pairs(lambda p, q: p + fnp.sum(p, axis=0), a, b) == ((0, 0),)
    # not of the result's shape
    assert _pairs(lambda p, q: fnp.sum(p, axis=0), a, b) == ()
    # a slice of it is copied before the kernel runs
    assert _pairs(lambda p, q: q[:, :1] + p[:1, :], a, b) == ((0, 0),)
    # a product's result is not a loop kernel's
    assert _pairs(lambda p, q: p @ q.T[:, :4], np.ones((4, 4)), np.ones((4, 4))) == ()
    assert _pairs(lambda p, q: p * 2.0 + q, a, b, donated=()) == ()
    assert _pairs(lambda p, q: p * 2.0 + q, a, b, donated=(1,)) == ((0, 1),)


def test_a_reduction_of_the_parameter_before_its_update():
    p = np.random.default_rng(5).standard_normal((4, 3))
    want = p + np.sum(p, axis=0) + p[:1, :]
    got = fg.jit(lambda p: p + fnp.sum(p, axis=0) + p[:1, :], donate_argnums=0)(p)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_reading_the_parameter_after_its_update_in_the_same_call():
    rng = np.random.default_rng(4)
    p, q = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))

    def f(p, q):
        new = p - 0.1 * q
        return new, fnp.sum(p * p)  # p read again by a later kernel

    want = (p - 0.1 * q, np.sum(p * p))
    new, s = fg.jit(f, donate_argnums=0)(p, q)
    np.testing.assert_allclose(new, want[0], rtol=1e-14)
    np.testing.assert_allclose(s, want[1], rtol=1e-12)
