"""Ops the lean generator lowers natively (no NumPy segment), against NumPy bit for bit:
floor division, remainder and the Threefry hash in kernels (``scalar.py``: zeros'
signs, infinities, NaNs, division by zero and the least integer divided by -1
included), and ``cumsum``, ``argmax``, ``argmin`` and the stable ``argsort`` in the
entry (``scans.py``: NaNs, signed zeros, ties, every axis, extents of 0 and 1)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import fusegrad as fg
import fusegrad.numpy as fnp
import fusegrad.scipy.special as fsp
from fusegrad.ir import ops
from fusegrad.ir.threefry import hash_words
from tests.helpers import interpreted, lowered_natively

pytestmark = pytest.mark.compiled


def _divmod(a, b):
    return a // b, a % b


def _grid(values, dtype):
    a, b = np.meshgrid(np.array(values, dtype), np.array(values, dtype))
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_floor_divide_and_remainder_equal_numpy(dtype):
    a, b = _grid([7.5, -7.5, 3.0, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30,
                  5.0, 2.5, 0.1], dtype)
    assert lowered_natively(_divmod, a, b)
    q, r = fg.jit(_divmod)(a, b)
    with np.errstate(all="ignore"):
        want_q, want_r = np.floor_divide(a, b), np.remainder(a, b)
    for got, want in ((q, want_q), (r, want_r)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8])
def test_integer_floor_divide_and_remainder_equal_numpy(dtype):
    info = np.iinfo(dtype)
    values = {0, 1, 2, 3, 7, info.max, info.max - 1, info.min, info.min + 1}
    if info.min < 0:
        values |= {-1, -2, -3, -7}
    a, b = _grid(sorted(values), dtype)
    assert lowered_natively(_divmod, a, b)
    q, r = fg.jit(_divmod)(a, b)
    with np.errstate(all="ignore"):
        want_q, want_r = np.floor_divide(a, b), np.remainder(a, b)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(r, want_r)
    assert q.dtype == want_q.dtype and r.dtype == want_r.dtype


def test_threefry_and_random_draws_run_natively():
    rng = np.random.default_rng(0)
    words = [rng.integers(-2**40, 2**40, 257) for _ in range(4)]

    def both(*w):
        return ops.threefry2x32(*w, word=0), ops.threefry2x32(*w, word=1)

    assert lowered_natively(both, *words)
    got = fg.jit(both)(*words)
    for g, w in zip(got, hash_words(*words)):
        np.testing.assert_array_equal(g, w.astype(np.int64))

    def draw(key, x):
        return fnp.sum(fg.random.normal(key, (1000,)) * x)

    key, x = fg.random.key(3), np.linspace(0.0, 1.0, 1000)
    assert lowered_natively(draw, key, x)
    np.testing.assert_allclose(fg.jit(draw)(key, x),
                               np.sum(np.asarray(fg.random.normal(key, (1000,))) * x),
                               rtol=1e-13)


SCAN_SHAPES = [(7,), (3, 5), (2, 3, 4), (1, 6), (4, 1, 3)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.int8,
                                   np.uint8])
@pytest.mark.parametrize("name", ["cumsum", "argmax", "argmin"])
def test_scans_along_every_axis_equal_numpy(name, dtype):
    rng = np.random.default_rng(1)
    for shape in SCAN_SHAPES:
        x = (rng.standard_normal(shape) * 10).astype(dtype)
        if x.dtype.kind == "f" and x.size > 3:
            x.flat[2], x.flat[-1] = np.nan, -np.inf
        if x.size > 4:
            x.flat[4] = x.flat[3]  # a tie: the first one wins
        for axis in (*range(len(shape)), -1):
            kw = {"axis": axis, **({"dtype": x.dtype} if name == "cumsum" else {})}

            def f(x, kw=kw):
                return getattr(fnp, name)(x, **kw)

            assert lowered_natively(f, x)
            got, want = fg.jit(f)(x), getattr(np, name)(x, **kw)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} axis {axis}")


def test_gradient_of_a_cumulative_sum_runs_natively():
    def f(x):
        return fnp.sum(fnp.cumsum(fnp.sin(x), axis=1) ** 2)

    x = np.random.default_rng(2).standard_normal((5, 9))
    assert lowered_natively(fg.grad(f), x)
    c = np.cumsum(np.sin(x), axis=1)
    want = np.cos(x) * np.cumsum((2 * c)[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_allclose(fg.grad(f)(x), want, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64,
                                   *(pytest.param(t, marks=pytest.mark.slow)
                                     for t in (np.int32, np.int8, np.uint8))])
def test_stable_argsort_along_every_axis_equals_numpy(dtype):
    rng = np.random.default_rng(3)
    for shape in (*SCAN_SHAPES, (0,), (2, 0, 3), (37,), (3, 64)):
        x = rng.integers(-4, 5, size=shape).astype(dtype)  # many ties
        if x.dtype.kind == "f":
            x = x / 2
            x.flat[::3] = np.nan
            x.flat[1::5] = -0.0
            x.flat[2::7] = -np.inf
        for axis in (*range(len(shape)), -1):
            def f(x, axis=axis):
                return fnp.argsort(x, axis=axis)

            assert lowered_natively(f, x)
            got = fg.jit(f)(x)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, np.argsort(x, axis=axis, kind="stable"),
                                          err_msg=f"{shape} axis {axis}")


def test_sorting_and_its_gradient_run_natively():
    def f(x):
        return fnp.sum(fnp.sort(fnp.sin(x), axis=0) ** 3 * fnp.arange(1.0, 6.0)[:, None])

    x = np.random.default_rng(4).standard_normal((5, 4))
    assert lowered_natively(fg.grad(f), x)
    # (the sum's partials are added in another order than NumPy's)
    np.testing.assert_allclose(fg.jit(f)(x), interpreted(f, x), rtol=1e-14)
    np.testing.assert_array_equal(fg.grad(f)(x), interpreted(fg.grad(f), x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_incomplete_gamma_and_beta_call_scipys_c_functions(dtype):
    """Computed in float64 by ``cython_special`` (the ufuncs' own code), rounded."""
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.05, 30.0, 300), rng.uniform(0.05, 30.0, 300)
    x, u = rng.uniform(0.0, 40.0, 300), rng.uniform(0.0, 1.0, 300)
    a[:3], x[:3], u[:3] = (0.0, np.nan, 1.0), (0.0, 1.0, np.inf), (0.0, 1.0, np.nan)
    for name, args in (("gammainc", (a, x)), ("gammaincc", (a, x)), ("betainc", (a, b, u)),
                       ("betaincc", (a, b, u))):
        args = [v.astype(dtype) for v in args]
        f = getattr(fsp, name)
        assert lowered_natively(f, *args)
        with np.errstate(all="ignore"):
            want = getattr(scipy.special, name)(*(v.astype(np.float64) for v in args))
        np.testing.assert_array_equal(fg.jit(f)(*args), want.astype(dtype), err_msg=name)
