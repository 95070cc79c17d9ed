"""W2: one SGD step of an MLP 784-512-512-10 (tanh), mean softmax cross-entropy, float32.

A step is the loss and the gradients w.r.t. all six weights and biases, then the update
``p -= lr * g``. Each implementation owns its copy of the parameters and updates them in
place (or, for JAX, returns new ones), so repeated calls train on. The check compares
the first step's loss and gradients (at the shared initial parameters) with NumPy's.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import libs
from .harness import Case, compare, compare_all

SIZES = (784, 512, 512, 10)
BATCH = 256
LR = 0.01


def data(quick: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = (784, 64, 64, 10) if quick else SIZES
    params = []
    for a, b in itertools.pairwise(sizes):
        params.append((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32))
        params.append((0.01 * rng.standard_normal(b)).astype(np.float32))
    batch = 32 if quick else BATCH
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    return tuple(params), x, y


def numpy_value_and_grad(p, x, y):
    """Forward and hand-written backward pass."""
    w1, b1, w2, b2, w3, b3 = p
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    z = h2 @ w3 + b3
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    logp = z - m - np.log(s)
    n = x.shape[0]
    loss = -np.sum(y * logp) / n
    dz = (e / s * y.sum(axis=1, keepdims=True) - y) / np.float32(n)
    da2 = (dz @ w3.T) * (1 - h2 * h2)
    da1 = (da2 @ w2.T) * (1 - h1 * h1)
    grads = (x.T @ da1, da1.sum(0), h1.T @ da2, da2.sum(0), h2.T @ dz, dz.sum(0))
    return loss, grads


def _copy(params):
    return [p.copy() for p in params]


def numpy_impl(params, x, y):
    def make():
        p = _copy(params)

        def step():
            loss, grads = numpy_value_and_grad(p, x, y)
            for w, g in zip(p, grads):
                w -= LR * g
            return loss, grads
        return step
    return make


def fusegrad_loss(p, x, y):
    import fusegrad.numpy as fnp
    from fusegrad.nn import functional as F

    w1, b1, w2, b2, w3, b3 = p
    h1 = fnp.tanh(x @ w1 + b1)
    h2 = fnp.tanh(h1 @ w2 + b2)
    logp = F.log_softmax(h2 @ w3 + b3, axis=1)
    return -fnp.mean(fnp.sum(y * logp, axis=1))


def fusegrad_impl(params, x, y):
    def make():
        import fusegrad as fg

        vg = fg.value_and_grad(fusegrad_loss)
        p = tuple(_copy(params))

        def step():
            loss, grads = vg(p, x, y)
            for w, g in zip(p, grads):
                w -= LR * g
            return loss, grads
        return step
    return make


def fusegrad_jit_impl(params, x, y, donate: bool = False):
    """The whole step (value_and_grad and update) as one ``fg.jit`` function. With
    ``donate``, the parameters are donated: the new parameters are written over the old
    ones (``fg.jit(..., donate_argnums=0)``), as JAX would with ``donate_argnums``; only
    the loss and the gradients are fresh arrays."""
    def make():
        import fusegrad as fg

        vg = fg.value_and_grad(fusegrad_loss)

        def train_step(p, x, y):
            loss, grads = vg(p, x, y)
            return loss, grads, tuple(w - LR * g for w, g in zip(p, grads))

        step_fn = fg.jit(train_step, donate_argnums=0 if donate else ())
        state = [tuple(_copy(params))]

        def step():
            loss, grads, state[0] = step_fn(state[0], x, y)
            return loss, grads
        return step
    return make


def jax_impl(params, x, y):
    def make():
        jax = libs.jax()
        jnp = jax.numpy

        def loss_fn(p, x, y):
            w1, b1, w2, b2, w3, b3 = p
            h1 = jnp.tanh(x @ w1 + b1)
            h2 = jnp.tanh(h1 @ w2 + b2)
            logp = jax.nn.log_softmax(h2 @ w3 + b3, axis=1)
            return -jnp.mean(jnp.sum(y * logp, axis=1))

        @jax.jit
        def train_step(p, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
            return loss, grads, tuple(w - LR * g for w, g in zip(p, grads))

        xj, yj = jax.device_put(x), jax.device_put(y)
        state = [tuple(jax.device_put(w) for w in params)]

        def step():
            loss, grads, new = train_step(state[0], xj, yj)
            state[0] = jax.block_until_ready(new)
            return loss, grads
        return step
    return make


def torch_impl(params, x, y):
    def make():
        torch = libs.torch()
        p = [torch.from_numpy(w.copy()).requires_grad_(True) for w in params]
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)

        def step():
            w1, b1, w2, b2, w3, b3 = p
            h1 = torch.tanh(xt @ w1 + b1)
            h2 = torch.tanh(h1 @ w2 + b2)
            logp = torch.log_softmax(h2 @ w3 + b3, dim=1)
            loss = -(yt * logp).sum(dim=1).mean()
            grads = torch.autograd.grad(loss, p)
            with torch.no_grad():
                for w, g in zip(p, grads):
                    w.sub_(LR * g)
            return loss.detach(), grads
        return step
    return make


def cases(quick: bool, threads: str) -> list[Case]:
    params, x, y = data(quick)
    want_loss, want = numpy_value_and_grad(params, x, y)

    def check(name, out):
        loss, grads = out
        compare(name, np.asarray(loss, np.float64).reshape(()), np.float64(want_loss), 1e-3,
                "loss")
        return compare_all(name, grads, want, 1e-3)

    impls = {
        "fusegrad": fusegrad_impl(params, x, y),
        "fusegrad jit step": fusegrad_jit_impl(params, x, y),
        "fusegrad jit step donated": fusegrad_jit_impl(params, x, y, donate=True),
        "numpy": numpy_impl(params, x, y),
        "jax.jit": jax_impl(params, x, y),
        "torch eager": torch_impl(params, x, y),
    }
    widths = "-".join(str(p.shape[0]) for p in params[::2]) + f"-{params[-1].shape[0]}"
    return [Case("W2", f"{widths} b={x.shape[0]}", impls, check, rtol=1e-3, unit="step",
                 meta={"batch": x.shape[0], "dtype": "float32"})]
