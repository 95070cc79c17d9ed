"""Functional optimizers for ``fg.jit``-compiled training steps: ``sgd``, ``momentum``,
``adam``, ``adamw``.

Each returns an :class:`Optimizer` pair of pure functions over pytrees (as optax's
gradient transformations, with the parameter update applied):

- ``init(params) -> state``
- ``update(grads, state, params) -> (new_params, new_state)``

Nothing is changed in place, so ``update`` runs on NumPy arrays and on tracers alike,
and a whole step compiles into one native function::

    opt = fg.optim.adam(1e-3)

    @fg.jit
    def step(params, state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y)
        params, state = opt.update(grads, state, params)
        return params, state, loss

    state = opt.init(params)
    for x, y in batches:
        params, state, loss = step(params, state, x, y)

The state holds the step count as an ``int64`` 0-d array, so a jitted step is traced
once, not once per step. ``lr`` is a number or a schedule ``lr(count) -> number``
(``count`` = the number of updates already applied, 0 on the first update). Every
update keeps each parameter's dtype: scalars computed from the step count are cast to
the parameter's dtype before they meet it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..tracer.pytree import tree_flatten, tree_flatten_up_to, tree_unflatten


class Optimizer(NamedTuple):
    """A functional optimizer: ``init(params) -> state``,
    ``update(grads, state, params) -> (new_params, new_state)``."""

    init: Callable[[Any], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]


class SgdState(NamedTuple):
    count: Any


class MomentumState(NamedTuple):
    count: Any
    velocity: Any


class AdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def _count0():
    return np.zeros((), np.int64)


def _leaves(params, *trees):
    """``params``' leaves, and each of ``trees`` flattened to ``params``' structure."""
    leaves, treedef = tree_flatten(params)
    return treedef, leaves, [tree_flatten_up_to(treedef, t) for t in trees]


def _like(value, leaf):
    """``value`` (a number or 0-d array) in ``leaf``'s dtype, so it never promotes it."""
    if type(value) in (int, float):  # Python numbers are weak: they never promote
        return value
    return value.astype(leaf.dtype)


def _lr(lr, count):
    return lr(count) if callable(lr) else lr


def _zeros(params):
    leaves, treedef = tree_flatten(params)
    return tree_unflatten(treedef, [np.zeros_like(p) for p in leaves])


def sgd(lr) -> Optimizer:
    """Plain gradient descent: ``p <- p - lr * g``."""

    def init(params):
        return SgdState(_count0())

    def update(grads, state, params):
        treedef, ps, (gs,) = _leaves(params, grads)
        rate = _lr(lr, state.count)
        new = [p - _like(rate, p) * g for p, g in zip(ps, gs)]
        return tree_unflatten(treedef, new), SgdState(state.count + 1)

    return Optimizer(init, update)


def momentum(lr, beta: float = 0.9, nesterov: bool = False) -> Optimizer:
    """Heavy-ball momentum, PyTorch's form: ``v <- beta * v + g``, then
    ``p <- p - lr * v``, or with ``nesterov`` ``p <- p - lr * (g + beta * v)``."""

    def init(params):
        return MomentumState(_count0(), _zeros(params))

    def update(grads, state, params):
        treedef, ps, (gs, vs) = _leaves(params, grads, state.velocity)
        rate = _lr(lr, state.count)
        new_p, new_v = [], []
        for p, g, v in zip(ps, gs, vs):
            v = beta * v + g
            step = g + beta * v if nesterov else v
            new_p.append(p - _like(rate, p) * step)
            new_v.append(v)
        return (tree_unflatten(treedef, new_p),
                MomentumState(state.count + 1, tree_unflatten(treedef, new_v)))

    return Optimizer(init, update)


def _adam(lr, b1, b2, eps, weight_decay) -> Optimizer:
    def init(params):
        return AdamState(_count0(), _zeros(params), _zeros(params))

    def update(grads, state, params):
        treedef, ps, (gs, ms, vs) = _leaves(params, grads, state.mu, state.nu)
        t = state.count + 1
        c1, c2 = 1 - b1**t, 1 - b2**t
        rate = _lr(lr, state.count)
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(ps, gs, ms, vs):
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * (g * g)
            step = (m / _like(c1, p)) / (np.sqrt(v / _like(c2, p)) + eps)
            if weight_decay:
                step = step + weight_decay * p
            new_p.append(p - _like(rate, p) * step)
            new_m.append(m)
            new_v.append(v)
        unflat = tree_unflatten
        return (unflat(treedef, new_p),
                AdamState(t, unflat(treedef, new_m), unflat(treedef, new_v)))

    return Optimizer(init, update)


def adam(lr, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam with bias correction, at step ``t = count + 1``::

        m <- b1 * m + (1 - b1) * g;   v <- b2 * v + (1 - b2) * g * g
        p <- p - lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)
    """
    return _adam(lr, b1, b2, eps, 0.0)


def adamw(lr, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-2) -> Optimizer:
    """Adam with decoupled weight decay: ``adam``'s step plus ``weight_decay * p``,
    both scaled by ``lr`` (``p <- p - lr * (adam_step + weight_decay * p)``)."""
    return _adam(lr, b1, b2, eps, weight_decay)
