"""Functional optimizers (``fg.optim.sgd/momentum/adam/adamw``) against hand-written
NumPy updates, on pytrees, with and without ``fg.jit``."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.tracer.pytree import tree_leaves, tree_map
from tests.helpers import assert_close

STEPS = 20


def _loss(params, x):
    """A smooth non-quadratic loss over a dict of a tuple and an array."""
    w1, b1 = params["layer"]
    h = fnp.tanh(x @ w1 + b1)
    return fnp.sum(h * h) + fnp.sum(params["scale"] * params["scale"] * params["scale"] ** 2)


def _params(dtype=np.float64):
    rng = np.random.default_rng(0)
    return {"layer": (rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=4).astype(dtype)),
            "scale": rng.normal(size=(2,)).astype(dtype)}


X = np.random.default_rng(1).normal(size=(5, 3))


def _grads(params):
    return fg.grad(_loss)(params, X)


# --- hand-written references (one leaf at a time) ------------------------------------


def _ref_sgd(p, g, s, t, lr=0.05):
    return p - lr * g, s


def _ref_momentum(p, g, v, t, lr=0.05, beta=0.9, nesterov=False):
    v = beta * v + g
    return p - lr * ((g + beta * v) if nesterov else v), v


def _ref_adam(p, g, mv, t, lr=0.05, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    m, v = mv
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat, vhat = m / (1 - b1**t), v / (1 - b2**t)
    return p - lr * (mhat / (np.sqrt(vhat) + eps) + wd * p), (m, v)


CASES = {
    "sgd": (fg.optim.sgd(0.05), _ref_sgd, lambda p: None),
    "momentum": (fg.optim.momentum(0.05), _ref_momentum, np.zeros_like),
    "nesterov": (fg.optim.momentum(0.05, beta=0.8, nesterov=True),
                 lambda p, g, v, t: _ref_momentum(p, g, v, t, beta=0.8, nesterov=True),
                 np.zeros_like),
    "adam": (fg.optim.adam(0.05), _ref_adam, lambda p: (np.zeros_like(p), np.zeros_like(p))),
    "adamw": (fg.optim.adamw(0.05, b1=0.8, weight_decay=0.1),
              lambda p, g, s, t: _ref_adam(p, g, s, t, b1=0.8, wd=0.1),
              lambda p: (np.zeros_like(p), np.zeros_like(p))),
}


def _reference(ref, init_slot, params, steps):
    leaves = [np.array(p) for p in tree_leaves(params)]
    slots = [init_slot(p) for p in leaves]
    struct = fg.tree.structure(params)
    for t in range(1, steps + 1):
        grads = tree_leaves(_grads(fg.tree.unflatten(struct, leaves)))
        out = [ref(p, g, s, t) for p, g, s in zip(leaves, grads, slots)]
        leaves, slots = [o[0] for o in out], [o[1] for o in out]
    return fg.tree.unflatten(struct, leaves)


def _run(opt, params, steps, step=None):
    def plain_step(params, state):
        return opt.update(_grads(params), state, params)

    step = step or plain_step
    state = opt.init(params)
    for _ in range(steps):
        params, state = step(params, state)
    return params, state


def _assert_trees_close(got, want, kind="exact64"):
    assert fg.tree.structure(got) == fg.tree.structure(want)
    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        assert g.dtype == w.dtype
        assert_close(g, w, kind)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy_reference_over_20_steps(name):
    opt, ref, init_slot = CASES[name]
    params = _params()
    got, state = _run(opt, params, STEPS)
    _assert_trees_close(got, _reference(ref, init_slot, params, STEPS))
    assert int(state.count) == STEPS and state.count.dtype == np.int64


@pytest.mark.parametrize("name", sorted(CASES))
def test_update_is_pure(name):
    opt, _, _ = CASES[name]
    params = _params()
    before = tree_map(np.copy, params)
    state = opt.init(params)
    state_before = tree_map(np.copy, state)
    opt.update(_grads(params), state, params)
    _assert_trees_close(params, before)
    _assert_trees_close(state, state_before)


def test_keeps_float32():
    opt = fg.optim.adam(0.05)
    params = _params(np.float32)
    got, state = _run(opt, params, 3)
    assert {p.dtype for p in tree_leaves(got)} == {np.dtype(np.float32)}
    assert {m.dtype for m in tree_leaves(state.mu)} == {np.dtype(np.float32)}


def test_learning_rate_schedule_sees_the_count():
    seen = []

    def schedule(count):
        seen.append(int(count))
        return 0.1 / (1.0 + count)

    params = {"w": np.ones(3)}
    opt = fg.optim.sgd(schedule)
    got, _ = _run(opt, params, 3, step=lambda p, s: opt.update({"w": np.ones(3)}, s, p))
    assert seen == [0, 1, 2]
    assert_close(got["w"], np.ones(3) - 0.1 - 0.05 - 0.1 / 3, "exact64")


def test_jit_step_traces_once_and_is_one_function():
    opt = fg.optim.adam(0.05)
    traces = []

    def step(params, state, x):
        traces.append(1)
        loss, grads = fg.value_and_grad(_loss)(params, x)
        params, state = opt.update(grads, state, params)
        return params, state, loss

    params = _params()
    state = opt.init(params)
    fn = fg.make_ir(step)(params, state, X)
    names = {op.name for op in fn.ops}
    assert isinstance(fn, fg.Function) and "sqrt" in names and "matmul" in names
    jitted = fg.jit(step)
    traces.clear()
    for _ in range(4):
        params, state, _ = jitted(params, state, X)
    assert len(traces) == 1


@pytest.mark.compiled
def test_compiled_steps_equal_uncompiled():
    """Every optimizer, one compiled function: the same 20 steps with and without jit."""
    opts = {k: CASES[k][0] for k in ("sgd", "nesterov", "adam", "adamw")}

    def step(params, states, x):
        grads = fg.grad(_loss)(params, x)
        out = {k: opt.update(grads, states[k], params) for k, opt in opts.items()}
        return out["adamw"][0], {k: o[1] for k, o in out.items()}

    params = _params()
    states = {k: opt.init(params) for k, opt in opts.items()}
    jitted = fg.jit(step)
    p_j, s_j, p_e, s_e = params, states, params, states
    for _ in range(STEPS):
        p_j, s_j = jitted(p_j, s_j, X)
    from fusegrad import config

    config.DISABLE_JIT = True
    try:
        for _ in range(STEPS):
            p_e, s_e = step(p_e, s_e, X)
    finally:
        config.DISABLE_JIT = False
    _assert_trees_close(p_j, p_e)
    _assert_trees_close(s_j, s_e)
