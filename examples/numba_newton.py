"""Newton's method for logistic regression, written entirely in ``@numba.njit``.

The loss is written once with ``fusegrad.numpy``; fusegrad exports its value, its
gradient and its Hessian-vector product as Numba functions (``.njit(*example)``),
and the solver, a Newton-CG loop (conjugate gradients on H p = -g, using only
Hessian-vector products, never the Hessian), is plain Numba code calling them: no
Python between iterations.

    python examples/numba_newton.py            # 20000 samples, 50 features
    python examples/numba_newton.py --small    # a quick run
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp

LAM = 1e-3


def loss(w, X, y):
    """Mean logistic loss of labels ``y`` in {-1, 1}, plus an L2 penalty."""
    z = y * (X @ w)
    return fnp.mean(fnp.log1p(fnp.exp(-z))) + 0.5 * LAM * fnp.sum(w * w)


def hvp(w, v, X, y):
    """The Hessian of ``loss`` in ``w`` times ``v`` (forward over reverse)."""
    return fg.jvp(lambda w: fg.grad(loss)(w, X, y), (w,), (v,))[1]


def make_solver(w, X, y):
    """A Newton-CG solver compiled by Numba, calling fusegrad's exported functions."""
    value = fg.jit(loss).njit(w, X, y)
    grad = fg.grad(loss).njit(w, X, y)
    hess_vec = fg.jit(hvp).njit(w, w, X, y)

    @numba.njit
    def newton(w, X, y, iters, cg_iters):
        losses = np.empty(iters + 1)
        for k in range(iters):
            losses[k] = value(w, X, y)
            g = grad(w, X, y)
            p = np.zeros_like(w)
            r = -g
            d = r.copy()
            rs = np.dot(r, r)
            for _ in range(cg_iters):
                hd = hess_vec(w, d, X, y)
                alpha = rs / np.dot(d, hd)
                p += alpha * d
                r -= alpha * hd
                rs_new = np.dot(r, r)
                if np.sqrt(rs_new) < 1e-12:
                    break
                d = r + (rs_new / rs) * d
                rs = rs_new
            w = w + p
        losses[iters] = value(w, X, y)
        return w, losses

    return newton


def data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    y = np.where(X @ w_true + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="a small problem, for tests")
    opts = p.parse_args(argv)
    n, d = (300, 5) if opts.small else (20000, 50)
    X, y = data(n, d)
    w0 = np.zeros(d)
    t0 = time.perf_counter()
    newton = make_solver(w0, X, y)
    newton(w0, X, y, 1, 1)  # Numba compiles the solver
    t1 = time.perf_counter()
    w, losses = newton(w0, X, y, 8, 2 * d)
    t2 = time.perf_counter()
    for k, v in enumerate(losses):
        print(f"newton step {k}: loss {v:.10f}")
    g = fg.grad(loss)(w, X, y)
    print(f"|grad| at the solution {np.linalg.norm(g):.2e}; export and compile "
          f"{t1 - t0:.1f} s, 8 Newton steps {(t2 - t1) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
