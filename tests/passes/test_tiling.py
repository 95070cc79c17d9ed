"""Row tiling (``passes/tiling.py``): programs over the rows of a long axis run as a
loop over tiles of rows, with the same results as the interpreter op by op (sums over
rows to rounding); programs whose rows interact are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.passes import tiling
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.tree import tree_leaves
from tests.helpers import assert_close, check_grads, interpreted

pytestmark = pytest.mark.compiled

ROWS = 2048


def _params(rng, width=16):
    return (rng.normal(size=(1, width)), 0.1 * rng.normal(size=width),
            rng.normal(size=(width, width)) / 4, 0.1 * rng.normal(size=width),
            rng.normal(size=(width, 1)) / 4, 0.1 * rng.normal(size=1))


def _mlp(p, x):
    w1, b1, w2, b2, w3, b3 = p
    h = fnp.tanh(x[:, None] * w1 + b1)
    h = fnp.tanh(h @ w2 + b2)
    return (h @ w3)[:, 0] + b3[0]


def _pinn_loss(p, x):
    uxx = fg.elementwise_grad(fg.elementwise_grad(lambda z: _mlp(p, z)))(x)
    return fnp.mean((uxx + fnp.sin(x)) ** 2)


def _tiled(f, *args) -> bool:
    fused = fuse(simplify(fg.make_ir(f)(*args)))
    return any(op.name == "scan" for op in fused.ops)


def _compare(f, *args):
    got, ref = f(*args), interpreted(f, *args)
    for g, r in zip(tree_leaves(got), tree_leaves(ref)):
        assert_close(g, r, "exact64")


def test_a_third_order_physics_loss_runs_tiled_with_the_interpreters_gradient():
    rng = np.random.default_rng(0)
    p, x = _params(rng), np.linspace(-3, 3, ROWS)
    g = fg.grad(_pinn_loss)
    assert _tiled(g, p, x)
    _compare(g, p, x)


def test_row_results_are_stacked_back():
    """Per-row results (the network's output, a row-wise norm) leave the loop as the
    rows of one array, next to sums over rows."""
    rng = np.random.default_rng(1)
    p, x = _params(rng), rng.normal(size=ROWS)

    def f(p, x):
        u = _mlp(p, x)
        return u, fnp.sum(u ** 2), fnp.max(u), fnp.min(x * u)

    assert _tiled(f, p, x)
    _compare(fg.jit(f), p, x)


def test_weight_gradients_of_a_wide_batch_are_summed_over_tiles():
    rng = np.random.default_rng(2)
    w1, w2 = rng.normal(size=(8, 32)) / 3, rng.normal(size=(32, 4)) / 5
    x, y = rng.normal(size=(4096, 8)), rng.normal(size=(4096, 4))

    def loss(w1, w2, x, y):
        return fnp.mean((fnp.tanh(x @ w1) @ w2 - y) ** 2)

    g = fg.value_and_grad(loss, argnums=(0, 1))
    assert _tiled(g, w1, w2, x, y)
    _compare(g, w1, w2, x, y)


def test_second_order_gradients_through_a_tiled_program():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(3, 5)) / 2
    x = rng.normal(size=(1024, 3))

    def f(w):
        return fnp.sum(fnp.sin(x @ w) ** 2)

    def g(w):  # reverse over reverse through the sum over rows: rows read the sum
        return fnp.sum(fg.grad(f)(w) ** 2)

    assert _tiled(fg.grad(f), w) and not _tiled(fg.grad(g), w)
    check_grads(f, (w,), order=2)
    _compare(fg.grad(g), w)
    _compare(fg.jit(fg.hessian(f)), w)  # (a batch of directions first: not tiled)


def test_rows_that_read_a_sum_over_rows_are_not_tiled():
    """Standardising by the batch mean needs every row before any row: op by op."""
    rng = np.random.default_rng(4)
    w, x = rng.normal(size=(4, 4)), rng.normal(size=(2048, 4))

    def f(w, x):
        h = x @ w
        h = h - fnp.mean(h, axis=0)
        return fnp.sum(fnp.tanh(h) ** 2)

    g = fg.grad(f)
    assert not _tiled(g, w, x)
    _compare(g, w, x)


def test_wide_products_short_axes_and_awkward_lengths_are_not_tiled():
    rng = np.random.default_rng(5)
    wide = rng.normal(size=(96, 8))
    x = rng.normal(size=(2048, 96))
    assert not _tiled(lambda w, x: fnp.sum(fnp.tanh(x @ w)), wide, x)  # inner axis 96
    short = rng.normal(size=(512, 8))
    assert not _tiled(lambda w, x: fnp.sum(fnp.tanh(x @ w)), wide[:8], short)
    prime = rng.normal(size=(2053, 8))  # 2053 is prime: no tile of 8 to 64 rows
    assert not _tiled(lambda w, x: fnp.sum(fnp.tanh(x @ w)), wide[:8], prime)
    f = fg.grad(lambda w, x: fnp.sum(fnp.tanh(x @ w)))
    _compare(f, wide[:8], prime)


def test_tiling_can_be_turned_off(monkeypatch):
    rng = np.random.default_rng(6)
    p, x = _params(rng), np.linspace(-1, 1, ROWS)
    monkeypatch.setattr(config, "ROW_TILING", False)
    assert not _tiled(fg.grad(_pinn_loss), p, x)


def test_tile_sizes_divide_the_rows_and_stay_in_the_budget():
    assert tiling._tile_size(4096, 256) == 64
    assert tiling._tile_size(3000, 256) == 60
    assert tiling._tile_size(4096, 8) == 1024  # a quarter of the rows at most
    assert tiling._tile_size(2053, 256) is None


@pytest.mark.parametrize("name", ["iota", "parameter", "select", "row max", "logsumexp",
                                  "float32"])
def test_more_row_programs_tiled_with_the_interpreters_results(name):
    """An index array of the rows read a tile at a time, a parameter returned as it is,
    selects, reductions along a row and float32."""
    rng = np.random.default_rng(7)
    w, x = rng.normal(size=(4, 8)), rng.normal(size=(ROWS, 4))
    f = {"iota": lambda w, x: fnp.sum(fnp.arange(ROWS)[:, None] * fnp.tanh(x @ w)),
         "parameter": lambda w, x: (x, fnp.sum(fnp.tanh(x @ w))),
         "select": lambda w, x: fnp.sum(fnp.where(x @ w > 0, x @ w, 0.0)),
         "row max": fg.grad(lambda w, x: fnp.sum(fnp.max(fnp.tanh(x @ w), axis=1))),
         "logsumexp": fg.grad(lambda w, x: fnp.sum(fnp.log(fnp.sum(fnp.exp(x @ w), axis=1)))),
         "float32": lambda w, x: fnp.sum(fnp.tanh(x.astype(np.float32) @ w.astype(np.float32))),
         }[name]
    assert _tiled(f, w, x)
    got, ref = fg.jit(f)(w, x), interpreted(f, w, x)
    for g, r in zip(tree_leaves(got), tree_leaves(ref)):
        assert_close(g, r, "f32" if np.asarray(r).dtype == np.float32 else "exact64")
