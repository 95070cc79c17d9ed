"""Hessian-vector product of the W1 function against its gradient, float64, one thread.

``fg.hvp(f)(x, v)`` is forward over reverse (the JVP of ``fg.grad(f)``), compiled
into one native function; the target is at most 3x the compiled gradient. Both
are checked against hand-written NumPy, then timed in interleaved rounds
(``harness.run_case``)::

    taskset -c 1 python -m benchmarks.hvp            # n = 1e6, 7 rounds
    taskset -c 1 python -m benchmarks.hvp --n 100000 --rounds 3

JAX's ``jvp(grad(f))`` under ``jax.jit`` is timed too when it is importable.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from . import libs
from .elementwise import data, numpy_grad, size_label
from .harness import Case, compare, fmt_time, log, run_case
from .run import ONE_THREAD_ENV

TARGET = 3.0


def numpy_hvp(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The Hessian is diagonal: f''(x) * v, written by hand."""
    e, s, c, t = np.exp(-0.5 * x * x), np.sin(x), np.cos(x), np.tanh(x)
    return (e * ((x * x - 2) * s - 2 * x * c) + 2 * (1 - t * t) * (1 - x * t)) * v


def _w1(fnp):
    def f(x):
        return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)

    return f


def fusegrad_grad(x):
    def make():
        import fusegrad as fg
        import fusegrad.numpy as fnp

        g = fg.grad(_w1(fnp))
        return lambda: g(x)

    return make


def fusegrad_hvp(x, v):
    def make():
        import fusegrad as fg
        import fusegrad.numpy as fnp

        h = fg.hvp(_w1(fnp))
        return lambda: h(x, v)

    return make


def jax_hvp(x, v):
    def make():
        jax = libs.jax()
        f = _w1(jax.numpy)
        h = jax.jit(lambda x, v: jax.jvp(jax.grad(f), (x,), (v,))[1])
        xj, vj = jax.device_put(x), jax.device_put(v)
        return lambda: h(xj, vj).block_until_ready()

    return make


def cases(n: int) -> list[Case]:
    x = data(n)
    v = np.random.default_rng(1).standard_normal(n)
    want_grad, want_hvp = numpy_grad(x), numpy_hvp(x, v)
    grad_case = Case("grad", size_label(n), {"fusegrad grad": fusegrad_grad(x)},
                     lambda name, out: compare(name, out, want_grad, 1e-8))
    hvp_case = Case("hvp", size_label(n),
                    {"fusegrad hvp": fusegrad_hvp(x, v), "jax.jit hvp": jax_hvp(x, v)},
                    lambda name, out: compare(name, out, want_hvp, 1e-8, "hvp"))
    return [grad_case, hvp_case]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=7)
    opts = p.parse_args(argv)
    os.environ.update(ONE_THREAD_ENV)  # before Numba and XLA start (fusegrad, jax: imported later)
    grad_case, hvp_case = cases(opts.n)
    # one Case of both fusegrad implementations, so their rounds interleave
    both = Case("W1 grad/hvp", grad_case.size,
                {**grad_case.impls, "fusegrad hvp": hvp_case.impls["fusegrad hvp"]},
                lambda name, out: (grad_case if name.endswith("grad") else hvp_case).check(
                    name, out))
    recs = {r["impl"]: r for r in run_case(both, opts.rounds, 0.1, "1")}
    recs.update({r["impl"]: r for r in run_case(hvp_case, opts.rounds, 0.1, "1",
                                                {"jax.jit hvp"})})
    g, h = recs["fusegrad grad"], recs["fusegrad hvp"]
    if g["status"] != "ok" or h["status"] != "ok":
        log(f"not timed: grad {g['status']}, hvp {h['status']}")
        return 1
    ratio = h["median_s"] / g["median_s"]
    cpu_ratio = h["median_cpu_s"] / g["median_cpu_s"]
    print(f"W1 {grad_case.size}: grad {fmt_time(g['median_s'])}, hvp {fmt_time(h['median_s'])}"
          f" -> hvp/grad = {ratio:.2f} (CPU time {cpu_ratio:.2f}); target <= {TARGET:g}")
    jx = recs.get("jax.jit hvp")
    if jx and jx["status"] == "ok":
        print(f"jax.jit jvp(grad) hvp: {fmt_time(jx['median_s'])}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
