"""Two SciPy-optimised models with exact gradients: fusegrad, HIPS autograd and jax.jit.

- **GP**: the negative log marginal likelihood of a Gaussian process (squared-exponential
  kernel, 3 log-hyperparameters) on ``--gp-n`` points in 3 dimensions: a Cholesky
  factor, a triangular solve and ``slogdet``.
- **BLR**: the negative log posterior of a Bayesian logistic regression (``--blr-n``
  examples, 20 features) with a standard normal prior written with
  ``scipy.stats.norm.logpdf``.

For each model and library: ``scipy.optimize.minimize`` (L-BFGS-B, ``jac=True``) from the
same start, checked against the optimum SciPy finds with finite differences; then the
time of one value-and-gradient call at the start point, the libraries interleaved round
by round, medians::

    python benchmarks/scipy_models.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
from scipy.optimize import minimize


def gp_loss(np_, cholesky, solve_triangular, slogdet):
    def nll(theta, X, y):
        ell, s, sig = np_.exp(theta[0]), np_.exp(theta[1]), np_.exp(theta[2])
        sq = np_.sum(X * X, axis=1)
        d2 = sq[:, None] + sq[None, :] - 2.0 * (X @ X.T)
        n = X.shape[0]
        K = s * s * np_.exp(-0.5 * d2 / (ell * ell)) + (sig * sig + 1e-6) * np_.eye(n)
        L = cholesky(K)
        a = solve_triangular(L, y, lower=True)
        return 0.5 * np_.sum(a * a) + 0.5 * slogdet(K)[1] + 0.5 * n * math.log(2 * math.pi)

    return nll


def blr_loss(np_, norm_logpdf):
    def neg_log_post(w, X, t):
        z = t * (X @ w)
        log_lik = -np_.sum(np_.logaddexp(0.0, -z))
        return -(np_.sum(norm_logpdf(w, 0.0, 1.0)) + log_lik)

    return neg_log_post


def _data(gp_n: int, blr_n: int):
    rng = np.random.default_rng(0)
    Xg = rng.uniform(-3, 3, (gp_n, 3))
    yg = np.sin(Xg[:, 0]) + 0.5 * np.cos(2 * Xg[:, 1]) + 0.1 * rng.standard_normal(gp_n)
    Xb = rng.standard_normal((blr_n, 20))
    tb = np.where(Xb @ rng.standard_normal(20) + 0.5 * rng.standard_normal(blr_n) > 0, 1.0, -1.0)
    return {"GP": (np.array([0.0, 0.0, -1.0]), Xg, yg), "BLR": (np.zeros(20), Xb, tb)}


def _fusegrad(model):
    import fusegrad as fg
    import fusegrad.numpy as fnp
    import fusegrad.scipy.linalg as sla
    import fusegrad.scipy.stats as stats

    f = (gp_loss(fnp, fnp.linalg.cholesky, sla.solve_triangular, fnp.linalg.slogdet)
         if model == "GP" else blr_loss(fnp, stats.norm.logpdf))
    return fg.value_and_grad(f)


def _autograd(model):
    import autograd
    import autograd.numpy as anp
    import autograd.scipy.linalg as asla
    import autograd.scipy.stats.norm as anorm

    f = (gp_loss(anp, anp.linalg.cholesky, asla.solve_triangular, anp.linalg.slogdet)
         if model == "GP" else blr_loss(anp, anorm.logpdf))
    return autograd.value_and_grad(f)


def _jax(model):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsla
    import jax.scipy.stats as jstats

    f = (gp_loss(jnp, jnp.linalg.cholesky, jsla.solve_triangular, jnp.linalg.slogdet)
         if model == "GP" else blr_loss(jnp, jstats.norm.logpdf))
    vg = jax.jit(jax.value_and_grad(f))

    def call(x, *a):
        v, g = vg(x, *a)
        return np.asarray(v), np.asarray(g)

    return call


LIBS = {"fusegrad": _fusegrad, "autograd": _autograd, "jax.jit": _jax}


def _scipy_fun(vg, args):
    def fun(x):
        v, g = vg(x, *args)
        return float(v), np.asarray(g, dtype=np.float64)

    return fun


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gp-n", type=int, default=200)
    p.add_argument("--blr-n", type=int, default=500)
    p.add_argument("--rounds", type=int, default=15)
    a = p.parse_args(argv)
    data = _data(a.gp_n, a.blr_n)
    for model, (x0, X, y) in data.items():
        plain = (gp_loss(np, np.linalg.cholesky, _np_solve_tri, np.linalg.slogdet)
                 if model == "GP" else blr_loss(np, _np_norm_logpdf))
        fd = minimize(plain, x0, args=(X, y), method="L-BFGS-B")
        print(f"\n{model}: finite differences: f* = {fd.fun:.8g}, {fd.nit} iterations, "
              f"{fd.nfev} evaluations")
        print("| library | f* | max abs(x* - x*_fd) | iterations | evaluations | optimise "
              "| value+gradient |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        fns, rows = {}, {}
        for name, make in LIBS.items():
            try:
                vg = make(model)
            except ImportError as e:
                print(f"| {name} | not installed ({e.name}) | | | | | |")
                continue
            fun = _scipy_fun(vg, (X, y))
            fun(x0)  # compile
            t0 = time.perf_counter()
            res = minimize(fun, x0, jac=True, method="L-BFGS-B")
            secs = time.perf_counter() - t0
            fns[name] = fun
            rows[name] = (res, secs)
        times = {n: [] for n in fns}
        for r in range(a.rounds):
            order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for name in order:
                reps = 20
                t0 = time.perf_counter()
                for _ in range(reps):
                    fns[name](x0)
                times[name].append((time.perf_counter() - t0) / reps)
        med = {n: statistics.median(t) for n, t in times.items()}
        for name, (res, secs) in rows.items():
            print(f"| {name} | {res.fun:.8g} | {np.max(np.abs(res.x - fd.x)):.1e} | {res.nit} | "
                  f"{res.nfev} | {secs * 1e3:.0f} ms | {med[name] * 1e6:.0f} us |")
        if "fusegrad" in med:
            ratios = ", ".join(f"{med['fusegrad'] / med[n]:.2f}x {n}" for n in med
                               if n != "fusegrad")
            print(f"fusegrad per gradient: {ratios}")


def _np_solve_tri(L, b, lower=True):
    from scipy.linalg import solve_triangular

    return solve_triangular(L, b, lower=lower)


def _np_norm_logpdf(x, loc, scale):
    from scipy.stats import norm

    return norm.logpdf(x, loc, scale)


if __name__ == "__main__":
    main()
