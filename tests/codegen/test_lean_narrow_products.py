"""Products with a narrow result computed by ``codegen/lean/smallmm.py``'s register-
blocked loop: every column tail (whole blocks, single vectors of each width, single
elements), every row tail, both dtypes, a transposed first operand; against NumPy."""

from __future__ import annotations

import io

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.lean import smallmm
from tests.helpers import assert_close, interpreted, same_bits

pytestmark = pytest.mark.compiled

# (m, k, n): n from 1 to past a block of AVX-512 doubles (32) and floats, odd rows
SHAPES = [(4, 1, 2), (5, 3, 2), (7, 5, 3), (9, 8, 4), (13, 6, 5), (6, 7, 8), (11, 9, 12),
          (23, 4, 15), (17, 16, 16), (30, 17, 31), (37, 32, 32), (41, 33, 33), (64, 64, 64),
          (100, 19, 47), (8, 200, 10)]


def _kind(dtype):
    return "f32" if dtype == np.float32 else "exact64"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m,k,n", SHAPES, ids=str)
def test_narrow_products_equal_numpy(m, k, n, dtype):
    rng = np.random.default_rng(m * 131 + n)
    a = rng.normal(size=(m, k)).astype(dtype)
    b = rng.normal(size=(k, n)).astype(dtype)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
    assert_close(fg.jit(lambda a, b: a @ b)(a, b), ref, _kind(dtype))
    # the first operand read transposed in place (a weight gradient's a^T @ g)
    s = np.ascontiguousarray(a.T)
    assert_close(fg.jit(lambda s, b: s.T @ b)(s, b), ref, _kind(dtype))


def test_the_narrow_loop_is_chosen_for_narrow_results_only():
    x = np.zeros((64, 32))
    y = np.zeros((32, 32))
    op = fg.make_ir(lambda x, y: x @ y)(x, y).ops[-1]
    assert op.name == "matmul" and smallmm.used(op, False, False)
    assert not smallmm.used(op, False, True)  # a transposed second operand: BLAS
    wide = fg.make_ir(lambda x, y: x @ y)(x, np.zeros((32, 65))).ops[-1]
    assert not smallmm.used(wide, False, False)
    column = fg.make_ir(lambda x, y: x @ y)(x, np.zeros((32, 1))).ops[-1]
    assert not smallmm.used(column, False, False)  # gemv, as NumPy


def test_a_row_has_the_same_bits_whatever_block_it_falls_in():
    """Each element is one chain of fused multiply-adds over k: the rows of a product
    of 4 to 12 rows equal the same rows of a product of 13 (blocks of rows, then the
    rows one at a time)."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(13, 24)), rng.normal(size=(24, 20))
    whole = fg.jit(lambda a, b: a @ b)(a, b)
    for rows in (4, 6, 7, 12):
        same_bits(fg.jit(lambda a, b: a @ b)(a[:rows].copy(), b), whole[:rows])


def test_gradients_through_narrow_products_equal_the_interpreter():
    rng = np.random.default_rng(3)
    w1, w2 = rng.normal(size=(5, 24)), rng.normal(size=(24, 3))
    x = rng.normal(size=(40, 5))

    def loss(w1, w2, x):
        return fnp.sum(fnp.tanh(fnp.tanh(x @ w1) @ w2) ** 2)

    g = fg.grad(loss, argnums=(0, 1))
    for got, ref in zip(g(w1, w2, x), interpreted(g, w1, w2, x)):
        assert_close(got, ref, "exact64")


@pytest.mark.parametrize("lanes,nv,mr", [(4, 2, 6), (4, 1, 8), (2, 1, 3), (8, 3, 5)])
def test_every_blocking_gives_the_same_products(lanes, nv, mr, monkeypatch):
    """The blockings of other machines (AVX2's 4 doubles by 2 vectors by 6 rows, SSE's
    2 doubles) compute the same bits: one chain of fused multiply-adds per element."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(29, 13)), rng.normal(size=(13, 27))
    want = fg.jit(lambda a, b: a @ b)(a, b)
    monkeypatch.setattr(smallmm, "blocking", lambda dtype, n: (lanes, nv, mr))

    def f(a, b):  # another program (not the one compiled above), the same product
        return a @ b, a[0]

    same_bits(fg.jit(f)(a, b)[0], want)
    fg.dump(f, a, b, stage="source", file=(out := io.StringIO()))
    assert f"<{lanes} x double>" in out.getvalue()
