"""A curve fit with ``fg.scipy.minimize``, against SciPy with finite differences.

A damped oscillation ``a exp(-b t) cos(c t + d) + e`` is fitted to noisy samples by
least squares. ``fg.scipy.minimize`` hands ``scipy.optimize.minimize`` one
compiled function returning the loss and its exact gradient (and, for Newton-CG,
Hessian-vector products); plain SciPy estimates the gradient by finite differences,
one loss evaluation per parameter per gradient. Printed: iterations, loss
evaluations and time of each.

    python examples/scipy_fit.py            # 200000 samples
    python examples/scipy_fit.py --small    # a quick run
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize

import fusegrad as fg
import fusegrad.numpy as fnp

TRUE = np.array([2.0, 0.7, 5.0, 0.3, 0.1])
START = np.array([1.5, 0.5, 4.8, 0.0, 0.0])


def loss(p, t, y):
    model = p[0] * fnp.exp(-p[1] * t) * fnp.cos(p[2] * t + p[3]) + p[4]
    return fnp.mean((model - y) ** 2)


def loss_np(p, t, y):
    model = p[0] * np.exp(-p[1] * t) * np.cos(p[2] * t + p[3]) + p[4]
    return np.mean((model - y) ** 2)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a small problem, for tests")
    opts = ap.parse_args(argv)
    n = 2000 if opts.small else 200_000
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 4.0, n)
    y = TRUE[0] * np.exp(-TRUE[1] * t) * np.cos(
        TRUE[2] * t + TRUE[3]) + TRUE[4] + 0.05 * rng.standard_normal(n)
    print(f"start: loss {loss_np(START, t, y):.6e}")
    for method in ("BFGS", "Newton-CG"):  # compile (fusegrad keeps the code per function)
        fg.scipy.minimize(loss, START, args=(t, y), method=method, options={"maxiter": 1})
    runs = {}
    for name, run in (
            ("fusegrad BFGS", lambda: fg.scipy.minimize(loss, START, args=(t, y), method="BFGS",
                                                        tol=1e-12)),
            ("scipy BFGS, finite differences", lambda: scipy.optimize.minimize(
                loss_np, START, args=(t, y), method="BFGS", tol=1e-12)),
            ("fusegrad Newton-CG", lambda: fg.scipy.minimize(
                loss, START, args=(t, y), method="Newton-CG", tol=1e-12))):
        t0 = time.perf_counter()
        res = run()
        runs[name] = (res, time.perf_counter() - t0)
    for name, (res, secs) in runs.items():
        print(f"{name:32s} iterations {res.nit:3d}, loss evaluations {res.nfev:4d}, "
              f"{secs * 1e3:8.1f} ms, loss {res.fun:.6e}")
    best = runs["fusegrad BFGS"][0]
    print("fitted", np.round(best.x, 4), "true", TRUE)
    print(f"final: loss {best.fun:.6e}")


if __name__ == "__main__":
    main()
