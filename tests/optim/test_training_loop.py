"""A training epoch as one ``fg.jit`` call: ``fg.scan`` over stacked minibatches of a
step (value_and_grad + a functional optimizer + dropout with a fresh key per step)
equals the step-by-step loop and the NumPy interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.tracer.pytree import tree_leaves
from tests.helpers import assert_close

N_BATCHES, BATCH, D_IN, HIDDEN = 6, 16, 3, 8


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_BATCHES, BATCH, D_IN))
    y = np.sin(x @ np.array([1.0, -2.0, 0.5]))[..., None]
    return x, y


def _params():
    rng = np.random.default_rng(1)
    return {"w1": rng.normal(size=(D_IN, HIDDEN)) / np.sqrt(D_IN), "b1": np.zeros(HIDDEN),
            "w2": rng.normal(size=(HIDDEN, 1)) / np.sqrt(HIDDEN), "b2": np.zeros(1)}


def loss_fn(params, x, y, key):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    h = fg.random.dropout(key, h, 0.25)
    pred = h @ params["w2"] + params["b2"]
    return fnp.mean((pred - y) ** 2)


OPTIMIZERS = {"adam": fg.optim.adam(0.02), "momentum": fg.optim.momentum(0.05)}


def make_step(opt):
    def step(carry, batch):
        params, state, key = carry
        x, y = batch
        key, sub = fg.random.split(key)
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y, sub)
        params, state = opt.update(grads, state, params)
        return (params, state, key), loss

    return step


def make_epoch(opt):
    step = make_step(opt)

    @fg.jit
    def epoch(params, state, key, xs, ys):
        return fg.scan(step, (params, state, key), (xs, ys))

    return epoch


def _close(a, b, kind="exact64"):
    for u, v in zip(tree_leaves(a), tree_leaves(b), strict=True):
        if np.issubdtype(np.asarray(u).dtype, np.integer):
            assert np.array_equal(u, v)
        else:
            assert_close(np.asarray(u), np.asarray(v), kind)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_scanned_epoch_equals_step_by_step_loop(name):
    opt = OPTIMIZERS[name]
    xs, ys = _data()
    params = _params()
    key = fg.random.key(0)
    (p1, s1, k1), losses = make_epoch(opt)(params, opt.init(params), key, xs, ys)

    step = fg.jit(make_step(opt))
    carry, want = (params, opt.init(params), key), []
    for i in range(N_BATCHES):
        carry, loss = step(carry, (xs[i], ys[i]))
        want.append(loss)
    _close((p1, s1, k1), carry)
    _close(losses, np.array(want))
    assert k1.tolist() == carry[2].tolist()


def test_scanned_epoch_equals_interpreter():
    opt = OPTIMIZERS["adam"]
    xs, ys = _data()
    params = _params()
    epoch = make_epoch(opt)
    args = (params, opt.init(params), fg.random.key(3), xs, ys)
    compiled = epoch(*args)
    old = config.DISABLE_JIT
    try:
        config.DISABLE_JIT = True
        interpreted = epoch(*args)
    finally:
        config.DISABLE_JIT = old
    _close(compiled, interpreted)


def test_epochs_reduce_the_loss_and_dropout_keys_differ_per_step():
    opt = OPTIMIZERS["adam"]
    xs, ys = _data()
    params, key = _params(), fg.random.key(1)
    state = opt.init(params)
    epoch = make_epoch(opt)
    means = []
    for _ in range(15):
        key, sub = fg.random.split(key)
        (params, state, _), losses = epoch(params, state, sub, xs, ys)
        means.append(float(np.mean(losses)))
    assert means[-1] < 0.5 * means[0], means
    # one key per step: the masks of two steps differ
    k = fg.random.key(1)
    k, a = fg.random.split(k)
    _, b = fg.random.split(k)
    h = np.ones((BATCH, HIDDEN))
    assert not np.array_equal(fg.random.dropout(a, h, 0.25), fg.random.dropout(b, h, 0.25))


def test_fori_loop_epoch_with_fold_in_keys_equals_python_loop():
    """fori_loop over batch indices (the batch taken with a traced index), the dropout
    key of step i being fold_in(key, i)."""
    opt = OPTIMIZERS["momentum"]
    xs, ys = _data()
    params = _params()
    key = fg.random.key(4)

    def run(params, state, xs, ys):
        def body(i, carry):
            params, state = carry
            grads = fg.grad(loss_fn)(params, xs[i], ys[i], fg.random.fold_in(key, i))
            return opt.update(grads, state, params)

        return fg.fori_loop(0, N_BATCHES, body, (params, state))

    got = fg.jit(run)(params, opt.init(params), xs, ys)
    want = run(params, opt.init(params), xs, ys)  # eager: a Python loop
    _close(got, want)
