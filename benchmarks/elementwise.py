"""W1 and W4: the gradient of ``sum(sin(x) * exp(-0.5 x²) + tanh(x) * x)``, float64.

W1 runs large n (memory-bound, one fused loop matters); W4 the same function at n = 16
(per-call overhead: argument checks, dispatch, allocation).
"""

from __future__ import annotations

import numpy as np

from . import libs
from .harness import Case, compare


def numpy_grad(x: np.ndarray) -> np.ndarray:
    """The gradient written by hand with NumPy (one temporary per operation)."""
    e = np.exp(-0.5 * x * x)
    t = np.tanh(x)
    return (np.cos(x) - x * np.sin(x)) * e + t + x * (1.0 - t * t)


def data(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-3.0, 3.0, n)


def fusegrad_impl(x):
    def make():
        import fusegrad as fg
        import fusegrad.numpy as fnp

        def f(x):
            return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)

        g = fg.grad(f)
        return lambda: g(x)
    return make


def numpy_impl(x):
    return lambda: (lambda: numpy_grad(x))


def numba_impl(x, parallel: bool = False):
    def make():
        from . import kernels

        k = kernels.w1_grad_parallel if parallel else kernels.w1_grad
        return lambda: k(x)
    return make


def jax_impl(x):
    def make():
        jax = libs.jax()
        jnp = jax.numpy

        def f(x):
            return jnp.sum(jnp.sin(x) * jnp.exp(-0.5 * x * x) + jnp.tanh(x) * x)

        g = jax.jit(jax.grad(f))
        xj = jax.device_put(x)
        return lambda: g(xj).block_until_ready()
    return make


def torch_impl(x):
    def make():
        torch = libs.torch()
        xt = torch.from_numpy(x).requires_grad_(True)

        def run():
            y = (torch.sin(xt) * torch.exp(-0.5 * xt * xt) + torch.tanh(xt) * xt).sum()
            return torch.autograd.grad(y, xt)[0]
        return run
    return make


def size_label(n: int) -> str:
    if n >= 10 and n == 10 ** round(np.log10(n)):
        return f"n=1e{round(np.log10(n))}"
    return f"n={n}"


def case(workload: str, n: int, threads: str) -> Case:
    x = data(n)
    want = numpy_grad(x)

    def check(name, out):
        return compare(name, out, want, 1e-8)

    impls = {
        "fusegrad": fusegrad_impl(x),
        "numpy": numpy_impl(x),
        "numba": numba_impl(x),
    }
    if threads != "1" and n >= 100_000:
        impls["numba prange"] = numba_impl(x, parallel=True)
    impls["jax.jit"] = jax_impl(x)
    impls["torch eager"] = torch_impl(x)
    return Case(workload, size_label(n), impls, check, rtol=1e-8,
                meta={"n": n, "dtype": "float64"})


def cases(workload: str, quick: bool, threads: str) -> list[Case]:
    if workload == "W4":
        return [case("W4", 16, threads)]
    sizes = [100_000] if quick else [1_000_000, 10_000_000]
    return [case("W1", n, threads) for n in sizes]
