"""Floor division, remainder and the Threefry hash in native kernels
(``codegen/lean/scalar.py``): NumPy's results bit for bit, zeros' signs, infinities,
NaNs, division by zero and the least integer divided by -1 included, and lowered
natively (no NumPy segment)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen import lean
from fusegrad.ir import TensorType, ops
from fusegrad.ir.threefry import hash_words
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.tracer import trace_pytree

pytestmark = pytest.mark.compiled


def _lowered(f, *args) -> bool:
    types = tuple(TensorType(np.shape(a), np.asarray(a).dtype) for a in args)
    fused = fuse(simplify(trace_pytree(f, types, name="f").function))
    return all(lean.lowers(op) for op in fused.ops)


def _divmod(a, b):
    return a // b, a % b


def _grid(values, dtype):
    a, b = np.meshgrid(np.array(values, dtype), np.array(values, dtype))
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_floor_divide_and_remainder_equal_numpy(dtype):
    a, b = _grid([7.5, -7.5, 3.0, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30,
                  5.0, 2.5, 0.1], dtype)
    assert _lowered(_divmod, a, b)
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
    assert _lowered(_divmod, a, b)
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

    assert _lowered(both, *words)
    got = fg.jit(both)(*words)
    for g, w in zip(got, hash_words(*words)):
        np.testing.assert_array_equal(g, w.astype(np.int64))

    def draw(key, x):
        return fnp.sum(fg.random.normal(key, (1000,)) * x)

    key, x = fg.random.key(3), np.linspace(0.0, 1.0, 1000)
    assert _lowered(draw, key, x)
    np.testing.assert_allclose(fg.jit(draw)(key, x),
                               np.sum(np.asarray(fg.random.normal(key, (1000,))) * x),
                               rtol=1e-13)
