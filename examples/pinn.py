"""A physics-informed network: solve u''(x) = f(x) on [0, 1] with u(0) = u(1) = 0.

With f(x) = -pi^2 sin(pi x) the solution is u(x) = sin(pi x). A small tanh network
u(x; params) is trained so that its second derivative matches f at collocation
points and it vanishes at the boundary. u'' comes from ``fg.grad`` of ``fg.grad``
of the scalar network, mapped over the points with ``fg.vmap``; the loss's gradient
w.r.t. the parameters differentiates through that, and each Adam step is one
``fg.jit`` call of ``fg.value_and_grad``.

    python examples/pinn.py            # 3000 steps
    python examples/pinn.py --small    # a quick run
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp


def init_params(width: int = 16, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(size=width) * 2.0, "b1": rng.normal(size=width),
            "w2": rng.normal(size=width) / np.sqrt(width), "b2": np.zeros(())}


def u(params, x):
    """The network at one point ``x`` (a 0-d array)."""
    h = fnp.tanh(params["w1"] * x + params["b1"])
    return fnp.sum(h * params["w2"]) + params["b2"]


def f(x):
    return -np.pi**2 * fnp.sin(np.pi * x)


u_xx = fg.vmap(fg.grad(fg.grad(u, argnums=1), argnums=1), in_axes=(None, 0))
u_all = fg.vmap(u, in_axes=(None, 0))


def loss_fn(params, xs):
    residual = u_xx(params, xs) - f(xs)
    boundary = u_all(params, np.array([0.0, 1.0]))
    return fnp.mean(residual**2) + 10.0 * fnp.sum(boundary**2)


opt = fg.optim.adam(0.01)


@fg.jit
def step(params, state, xs):
    loss, grads = fg.value_and_grad(loss_fn)(params, xs)
    params, state = opt.update(grads, state, params)
    return params, state, loss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a quick run (fewer steps)")
    args = ap.parse_args(argv)
    steps, n = (600, 32) if args.small else (3000, 64)

    xs = (np.arange(n) + 0.5) / n
    params = init_params()
    state = opt.init(params)
    t0 = time.perf_counter()
    for i in range(steps):
        params, state, loss = step(params, state, xs)
        if i == 0 or (i + 1) % (steps // 6) == 0:
            print(f"step {i + 1:5d}  loss {float(loss):.3e}")
    dt = time.perf_counter() - t0
    grid = np.linspace(0.0, 1.0, 101)
    err = np.max(np.abs(np.asarray(u_all(params, grid)) - np.sin(np.pi * grid)))
    res = np.sqrt(np.mean((np.asarray(u_xx(params, xs)) - np.asarray(f(xs))) ** 2))
    print(f"rms residual of u'' = f: {res:.3e}   max |u - sin(pi x)| on [0, 1]: {err:.3e}  "
          f"({steps} steps in {dt:.2f} s, first includes compiling)")


if __name__ == "__main__":
    main()
