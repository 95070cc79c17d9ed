"""W3: a physics-informed loss, float64: u = MLP 1-32-32-1 (tanh) of each point x,
loss = mean((u''(x) + sin x)²) over 4096 points, gradient w.r.t. the weights.

u'' is taken by differentiating the network twice with respect to its input (each point
independent: ``fg.elementwise_grad`` twice, or ``fg.vmap(fg.grad(fg.grad(u)))`` of the
network of one point ("fusegrad vmap"), ``vmap(grad(grad))`` in JAX, two
``autograd.grad(create_graph=True)`` in PyTorch), then the loss is differentiated
w.r.t. the weights: third-order automatic differentiation. The NumPy reference carries
the first and second input derivatives forward by hand and back-propagates through them.
"""

from __future__ import annotations

import itertools

import numpy as np

from . import libs
from .harness import Case, compare_all

POINTS = 4096


def data(quick: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = (1, 32, 32, 1)
    params = []
    for a, b in itertools.pairwise(sizes):
        params.append(rng.standard_normal((a, b)) / np.sqrt(a))
        params.append(0.1 * rng.standard_normal(b))
    x = np.linspace(-np.pi, np.pi, 256 if quick else POINTS)
    return tuple(params), x


def numpy_grad(p, x):
    """Forward (values, first and second x-derivatives) and backward, by hand."""
    w1, b1, w2, b2, w3, _b3 = p
    w, v = w1[0], w3[:, 0]
    h1 = np.tanh(x[:, None] * w + b1)
    s1 = 1 - h1 * h1
    h1p = s1 * w
    h1pp = -2 * h1 * s1 * w * w
    h2 = np.tanh(h1 @ w2 + b2)
    s2 = 1 - h2 * h2
    a2p, a2pp = h1p @ w2, h1pp @ w2
    q = a2pp - 2 * h2 * a2p * a2p
    h2pp = s2 * q
    r = h2pp @ v + np.sin(x)
    gr = 2 * r / x.shape[0]
    g_h2pp = gr[:, None] * v
    g_w3 = (h2pp.T @ gr)[:, None]
    g_q = g_h2pp * s2
    g_h2 = g_q * (-2 * a2p * a2p) - 2 * h2 * (g_h2pp * q)
    g_a2p = g_q * (-4 * h2 * a2p)
    g_a2 = g_h2 * s2
    g_w2 = h1pp.T @ g_q + h1p.T @ g_a2p + h1.T @ g_a2
    g_b2 = g_a2.sum(0)
    g_h1pp, g_h1p, g_h1 = g_q @ w2.T, g_a2p @ w2.T, g_a2 @ w2.T
    g_h1 = g_h1 + g_h1pp * (-2 * s1 * w * w)
    g_s1 = g_h1pp * (-2 * h1 * w * w) + g_h1p * w
    g_w = (g_h1pp * (-4 * h1 * s1 * w)).sum(0) + (g_h1p * s1).sum(0)
    g_a1 = (g_h1 - 2 * h1 * g_s1) * s1
    g_w = g_w + (g_a1 * x[:, None]).sum(0)
    return (g_w[None, :], g_a1.sum(0), g_w2, g_b2, g_w3, np.zeros(1))


def fusegrad_impl(params, x):
    def make():
        import fusegrad as fg
        import fusegrad.numpy as fnp

        def u(p, x):
            w1, b1, w2, b2, w3, b3 = p
            h = fnp.tanh(x[:, None] * w1 + b1)
            h = fnp.tanh(h @ w2 + b2)
            return (h @ w3)[:, 0] + b3[0]

        def loss(p, x):
            uxx = fg.elementwise_grad(fg.elementwise_grad(lambda z: u(p, z)))(x)
            return fnp.mean((uxx + fnp.sin(x)) ** 2)

        g = fg.grad(loss)
        return lambda: g(params, x)
    return make


def fusegrad_vmap_impl(params, x):
    """The natural way: u of one point, ``vmap(grad(grad(u)))`` over the points."""
    def make():
        import fusegrad as fg
        import fusegrad.numpy as fnp

        def u(p, x):  # one point
            w1, b1, w2, b2, w3, b3 = p
            h = fnp.tanh(x * w1[0] + b1)
            h = fnp.tanh(h @ w2 + b2)
            return (h @ w3)[0] + b3[0]

        uxx = fg.vmap(fg.grad(fg.grad(u, 1), 1), in_axes=(None, 0))

        def loss(p, x):
            return fnp.mean((uxx(p, x) + fnp.sin(x)) ** 2)

        g = fg.grad(loss)
        return lambda: g(params, x)
    return make


def numpy_impl(params, x):
    return lambda: (lambda: numpy_grad(params, x))


def jax_impl(params, x):
    def make():
        jax = libs.jax()
        jnp = jax.numpy

        def u(p, x):  # one point
            w1, b1, w2, b2, w3, b3 = p
            h = jnp.tanh(x * w1[0] + b1)
            h = jnp.tanh(h @ w2 + b2)
            return (h @ w3)[0] + b3[0]

        uxx = jax.vmap(jax.grad(jax.grad(u, 1), 1), (None, 0))

        def loss(p, x):
            return jnp.mean((uxx(p, x) + jnp.sin(x)) ** 2)

        g = jax.jit(jax.grad(loss))
        pj, xj = jax.device_put(params), jax.device_put(x)
        return lambda: jax.block_until_ready(g(pj, xj))
    return make


def torch_impl(params, x):
    def make():
        torch = libs.torch()
        p = [torch.from_numpy(w.copy()).requires_grad_(True) for w in params]
        xt = torch.from_numpy(x)

        def run():
            w1, b1, w2, b2, w3, b3 = p
            xr = xt.clone().requires_grad_(True)
            h = torch.tanh(xr[:, None] * w1 + b1)
            h = torch.tanh(h @ w2 + b2)
            u = (h @ w3)[:, 0] + b3[0]
            (du,) = torch.autograd.grad(u.sum(), xr, create_graph=True)
            (d2u,) = torch.autograd.grad(du.sum(), xr, create_graph=True)
            loss = ((d2u + torch.sin(xt)) ** 2).mean()
            grads = torch.autograd.grad(loss, p, allow_unused=True)
            return [torch.zeros_like(w) if g is None else g for w, g in zip(p, grads)]
        return run
    return make


def cases(quick: bool, threads: str) -> list[Case]:
    params, x = data(quick)
    want = numpy_grad(params, x)

    def check(name, out):
        return compare_all(name, out, want, 1e-8)

    impls = {
        "fusegrad": fusegrad_impl(params, x),
        "fusegrad vmap": fusegrad_vmap_impl(params, x),
        "numpy": numpy_impl(params, x),
        "jax.jit": jax_impl(params, x),
        "torch eager": torch_impl(params, x),
    }
    return [Case("W3", f"1-32-32-1 n={x.shape[0]}", impls, check, rtol=1e-8,
                 meta={"points": x.shape[0], "dtype": "float64"})]
