"""Data movement in the lean generator's entries: the shared strided copy (``copies``)
for slices, transposes, broadcasts, slice updates and concatenations at every dtype it
handles, and products that read a transposed operand in place instead of copying it."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.lean import copies, engine

pytestmark = pytest.mark.compiled

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float32, np.float64]


@pytest.mark.parametrize("shape,dst,src,want", [
    ((4, 5), [5, 1], [5, 1], ([20], [1], [1])),  # contiguous: one run
    ((4, 5), [5, 1], [1, 4], ([4, 5], [5, 1], [1, 4])),  # a transpose stays 2-D
    ((1, 3, 1, 2), [6, 2, 2, 1], [6, 2, 2, 1], ([6], [1], [1])),  # extent-1 axes go
    ((1, 1), [1, 1], [0, 0], ([1], [1], [1])),  # one element
    ((2, 3, 4), [12, 4, 1], [24, 4, 1], ([2, 12], [12, 1], [24, 1])),  # a slice of rows
    ((3, 4), [4, 1], [0, 1], ([3, 4], [4, 1], [0, 1])),  # a broadcast row
])
def test_plan_coalesces_axes(shape, dst, src, want):
    assert copies.plan(shape, dst, src) == tuple(list(w) for w in want)


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _moves(x, xp=fnp):
    """Slices (negative and long steps), a 4-D transpose, concatenation on a middle
    axis and a broadcast: every copy the entry makes."""
    t = xp.transpose(x, (2, 0, 3, 1))
    s = x[1:, ::-2, :, 1::2]
    c = xp.concatenate([x[:, :1], x[:, 2:]], axis=1)
    b = xp.broadcast_to(x[0, 0, 0, :1], (3, 2))
    return t, s, c, b


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_copies_equal_numpy_at_every_dtype(dtype):
    x = _values(dtype, (3, 4, 2, 5))
    got = fg.jit(_moves)(x)
    for g, w in zip(got, _moves(x, np)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_slice_updates_and_scalar_fills(dtype):
    x = _values(dtype, (6, 5), seed=1)
    v = _values(dtype, (3, 2), seed=2)

    def f(x, v):
        return x.at[::2, 1:5:2].set(v), x.at[1:4, 0].set(x[0, 0])

    a, b = fg.jit(f)(x, v)
    ra, rb = x.copy(), x.copy()
    ra[::2, 1:5:2] = v
    rb[1:4, 0] = x[0, 0]
    np.testing.assert_array_equal(a, ra)
    np.testing.assert_array_equal(b, rb)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", ["x.T @ y", "x @ y.T", "x.T @ y.T"])
def test_products_read_transposed_operands_in_place(which, dtype, capsys):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 5) if which.startswith("x.T") else (5, 7)).astype(dtype)
    y = rng.standard_normal((4, 7) if which.endswith("y.T") else (7, 4)).astype(dtype)
    f = {"x.T @ y": lambda x, y: x.T @ y, "x @ y.T": lambda x, y: x @ y.T,
         "x.T @ y.T": lambda x, y: x.T @ y.T}[which]
    want = f(x.astype(np.float64), y.astype(np.float64))
    got = fg.jit(f)(x, y)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    fg.dump(f, x, y, stage="source")
    text = capsys.readouterr().out
    assert "fusegrad_copy" not in text  # no transposed copy is made: gemm's flags, or
    # (a narrow result) the first operand read with its strides by smallmm's loop
    assert "gemm" in text or (which == "x.T @ y" and "llvm.fma" in text)


def test_a_transpose_also_used_elsewhere_is_copied():
    x = np.arange(12.0).reshape(3, 4)

    def f(x):
        t = x.T
        return t @ x, t + 1.0

    p, q = fg.jit(f)(x)
    np.testing.assert_allclose(p, x.T @ x)
    np.testing.assert_array_equal(q, x.T + 1.0)


def test_the_copy_compiles_once():
    """The copy's module is the same text for every program: a new program that moves
    data compiles its own entry and kernels only."""
    x = np.arange(24.0).reshape(2, 3, 4)
    fg.jit(lambda v: fnp.transpose(v, (1, 2, 0)) * 2.0)(x)
    name = copies.name()
    before = engine.stats()
    fg.jit(lambda v: fnp.transpose(v, (2, 0, 1)) - 1.0)(x)
    after = engine.stats()
    assert after["compiled"] - before["compiled"] <= 2  # an entry and its kernel
    assert name in engine._added
