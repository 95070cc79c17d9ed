"""fusegrad.scipy.stats against scipy.stats: values (tails included), argument
conventions, invalid parameters, gradients to second order, compiled == interpreter,
vmap, and a Bayesian logistic regression objective differentiated compiled."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import fusegrad as fg
import fusegrad.numpy as fnp
import fusegrad.scipy.stats as stats
from fusegrad import config
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(1)


def _compare(got, want, rtol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    ok = same | np.isclose(got, want, rtol=rtol, atol=0)
    assert ok.all(), f"at {np.argwhere(~ok)[:5].ravel()}: got {got[~ok][:5]}, SciPy {want[~ok][:5]}"


X = np.concatenate([np.linspace(-60, 60, 121), [-1e3, -1e5, 1e3]])
LOC = np.array([[0.3], [-2.0]])
SCALE = np.array([1.7, 0.5, 3.0]).reshape(3, 1, 1)
NORM = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


@pytest.mark.parametrize("fname", NORM)
def test_norm_matches_scipy_with_broadcast_loc_and_scale(fname):
    with np.errstate(all="ignore"):
        _compare(getattr(stats.norm, fname)(X, LOC, SCALE), getattr(st.norm, fname)(X, LOC, SCALE))
        _compare(getattr(stats.norm, fname)(X), getattr(st.norm, fname)(X))
        _compare(getattr(stats.norm, fname)(X, scale=2.0, loc=1.0),
                 getattr(st.norm, fname)(X, scale=2.0, loc=1.0))


@pytest.mark.parametrize("fname", ["ppf", "isf"])
def test_norm_quantiles_match_scipy(fname):
    q = np.concatenate([np.geomspace(1e-300, 0.5, 40), 1 - np.geomspace(1e-15, 0.5, 30)])
    _compare(getattr(stats.norm, fname)(q, 1.0, 2.0), getattr(st.norm, fname)(q, 1.0, 2.0))


def test_invalid_parameters_give_nan_as_in_scipy():
    with np.errstate(all="ignore"):
        for got, want in [
            (stats.norm.logpdf(1.0, 0.0, np.array([-1.0, 0.0, 2.0])),
             st.norm.logpdf(1.0, 0.0, np.array([-1.0, 0.0, 2.0]))),
            (stats.norm.cdf(1.0, 0.0, -1.0), st.norm.cdf(1.0, 0.0, -1.0)),
            (stats.t.logpdf(1.0, np.array([-1.0, 2.0])), st.t.logpdf(1.0, np.array([-1.0, 2.0]))),
            (stats.gamma.logpdf(1.0, np.array([-1.0, 2.0])),
             st.gamma.logpdf(1.0, np.array([-1.0, 2.0]))),
            (stats.beta.logpdf(0.5, np.array([-1.0, 2.0]), 2.0),
             st.beta.logpdf(0.5, np.array([-1.0, 2.0]), 2.0)),
            (stats.poisson.logpmf(1.0, np.array([-1.0, 2.0])),
             st.poisson.logpmf(1.0, np.array([-1.0, 2.0]))),
        ]:
            _compare(got, want)


DF = np.array([0.3, 1.0, 3.5, 19.9, 20.1, 50.0, 1e3, 1e6, 1e12]).reshape(-1, 1)


@pytest.mark.parametrize("fname", ["logpdf", "pdf"])
def test_t_matches_scipy_for_small_and_huge_df(fname):
    x = np.linspace(-40, 40, 33)
    _compare(getattr(stats.t, fname)(x, DF, 0.5, 2.0), getattr(st.t, fname)(x, DF, 0.5, 2.0))
    _compare(getattr(stats.t, fname)(x, df=3.0, scale=0.7),
             getattr(st.t, fname)(x, df=3.0, scale=0.7))


@pytest.mark.parametrize("fname", ["logpdf", "pdf"])
def test_gamma_matches_scipy_including_outside_the_support(fname):
    x = np.concatenate([np.linspace(-2, 40, 43), [0.0, 1e-300, 1e4]])
    a = np.array([0.3, 1.0, 2.5, 100.0, 1e5]).reshape(-1, 1)
    with np.errstate(all="ignore"):
        _compare(getattr(stats.gamma, fname)(x, a, 0.2, 1.5),
                 getattr(st.gamma, fname)(x, a, 0.2, 1.5))
        _compare(getattr(stats.gamma, fname)(x, 2.0), getattr(st.gamma, fname)(x, 2.0))


@pytest.mark.parametrize("fname", ["logpdf", "pdf"])
def test_beta_matches_scipy_including_the_ends_and_outside(fname):
    x = np.concatenate([np.linspace(-0.5, 1.5, 41), [0.0, 1.0, 1e-300, 1 - 1e-16]])
    ab = np.array([[0.3, 0.5], [1.0, 1.0], [2.5, 7.0], [100.0, 1e3], [1.0, 3.0]])
    with np.errstate(all="ignore"):
        for a, b in ab:
            _compare(getattr(stats.beta, fname)(x, a, b), getattr(st.beta, fname)(x, a, b))
        _compare(getattr(stats.beta, fname)(x, 2.0, 3.0, -0.5, 2.0),
                 getattr(st.beta, fname)(x, 2.0, 3.0, -0.5, 2.0))


@pytest.mark.parametrize("fname", ["logpmf", "pmf", "cdf", "logcdf"])
def test_poisson_matches_scipy(fname):
    k = np.concatenate([np.arange(-2, 80.0), [2.5, 1e4, 1e4 + 0.5]])
    mu = np.array([0.0, 0.1, 3.0, 30.0, 1e4]).reshape(-1, 1)
    with np.errstate(all="ignore"):
        _compare(getattr(stats.poisson, fname)(k, mu), getattr(st.poisson, fname)(k, mu))
        _compare(getattr(stats.poisson, fname)(k, 4.0, loc=2),
                 getattr(st.poisson, fname)(k, 4.0, loc=2))


def test_dirichlet_matches_scipy_with_components_on_the_first_axis():
    alpha = np.array([0.7, 2.0, 3.5])
    x = RNG.dirichlet(alpha, size=5).T  # (3, 5)
    for f in ("logpdf", "pdf"):
        _compare(getattr(stats.dirichlet, f)(x, alpha), getattr(st.dirichlet, f)(x, alpha))
        _compare(getattr(stats.dirichlet, f)(x[:, 0], alpha),
                 getattr(st.dirichlet, f)(x[:, 0], alpha))
    with pytest.raises(ValueError, match="sum to 1"):
        stats.dirichlet.logpdf(x * 2, alpha)
    with pytest.raises(ValueError, match="first axis"):
        stats.dirichlet.logpdf(x.T, alpha)


@pytest.mark.parametrize("cov", [np.array([0.5, 2.0, 1.3]), 2.5], ids=["diagonal", "scalar"])
def test_multivariate_normal_diagonal_matches_scipy(cov):
    mean = np.array([0.1, -1.0, 2.0])
    x = RNG.normal(size=(4, 3))
    full = np.diag(np.broadcast_to(cov, (3,)))
    for f in ("logpdf", "pdf"):
        _compare(getattr(stats.multivariate_normal, f)(x, mean, cov),
                 getattr(st.multivariate_normal, f)(x, mean, full))
        _compare(getattr(stats.multivariate_normal, f)(x[0], mean, cov),
                 getattr(st.multivariate_normal, f)(x[0], mean, full))
    one = stats.multivariate_normal.logpdf(np.array([0.3, -1.0]), np.array([0.5]), 2.0)
    _compare(one, st.multivariate_normal.logpdf(np.array([0.3, -1.0]), np.array([0.5]), 2.0))


def _has_linalg():
    import fusegrad.numpy.linalg as fla

    try:
        from fusegrad.scipy import linalg
    except ImportError:
        return False
    return hasattr(fla, "cholesky") and hasattr(linalg, "solve_triangular")


SPD = np.array([[2.0, 0.3, -0.4], [0.3, 1.0, 0.2], [-0.4, 0.2, 1.5]])


def test_multivariate_normal_full_covariance_matches_scipy():
    if not _has_linalg():
        pytest.skip("fusegrad.numpy.linalg.cholesky / fusegrad.scipy.linalg.solve_triangular "
                    "are not in this build")
    mean = np.array([0.1, -1.0, 2.0])
    x = RNG.normal(size=(5, 3))
    _compare(stats.multivariate_normal.logpdf(x, mean, SPD),
             st.multivariate_normal.logpdf(x, mean, SPD))
    _compare(stats.multivariate_normal.pdf(x[0], mean=mean, cov=SPD),
             st.multivariate_normal.pdf(x[0], mean=mean, cov=SPD))
    check_grads(lambda x, m, a: stats.multivariate_normal.logpdf(x, m, 0.5 * (a + a.T)),
                [x, mean, SPD], order=2)


def test_multivariate_normal_full_covariance_calls_the_linalg_functions_as_documented(
        monkeypatch):
    """With NumPy/SciPy stand-ins for cholesky (lower factor) and solve_triangular(a, b,
    lower=True), on concrete arrays: the calling conventions give SciPy's values."""
    import types

    import scipy.linalg

    import fusegrad.numpy.linalg as fla

    calls = []

    def solve_triangular(a, b, lower=False):
        calls.append((a.shape, b.shape, lower))
        return scipy.linalg.solve_triangular(a, b, lower=lower)

    monkeypatch.setattr(fla, "cholesky", np.linalg.cholesky, raising=False)
    fake = types.ModuleType("fusegrad.scipy.linalg")
    fake.solve_triangular = solve_triangular
    monkeypatch.setitem(sys.modules, "fusegrad.scipy.linalg", fake)
    mean = np.array([0.1, -1.0, 2.0])
    x = RNG.normal(size=(2, 5, 3))
    _compare(stats.multivariate_normal.logpdf(x, mean, SPD),
             st.multivariate_normal.logpdf(x, mean, SPD))
    _compare(stats.multivariate_normal.pdf(x[0, 0], mean, SPD),
             st.multivariate_normal.pdf(x[0, 0], mean, SPD))
    assert calls == [((3, 3), (3, 10), True), ((3, 3), (3, 1), True)]


def test_multivariate_normal_full_covariance_without_linalg_is_a_clear_error():
    if _has_linalg():
        pytest.skip("the linear-algebra functions exist: the full-covariance test covers them")
    with pytest.raises(NotImplementedError, match="cholesky"):
        stats.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), SPD)


# --- gradients ------------------------------------------------------------------------

GRADS = {
    "norm.logpdf": (stats.norm.logpdf, [RNG.normal(size=4), RNG.normal(size=(2, 1)),
                                        RNG.uniform(0.5, 2, 4)]),
    "norm.logcdf": (stats.norm.logcdf, [np.array([-30.0, -3.0, 0.2, 4.0]), np.array(0.3),
                                        np.array(1.3)]),
    "norm.logsf": (stats.norm.logsf, [np.array([-4.0, 0.2, 3.0, 30.0]), np.array(0.3),
                                      np.array(1.3)]),
    "norm.cdf": (stats.norm.cdf, [RNG.normal(size=4), np.array(0.3), np.array(1.3)]),
    "norm.ppf": (stats.norm.ppf, [RNG.uniform(0.05, 0.95, 4), np.array(0.3), np.array(1.3)]),
    "t.logpdf": (stats.t.logpdf, [RNG.normal(size=4), RNG.uniform(1, 30, 4), np.array(0.2),
                                  np.array(1.5)]),
    "t.logpdf-large-df": (stats.t.logpdf, [RNG.normal(size=4), np.array([15.0, 21.0, 40.0, 90.0]),
                                           np.array(0.2), np.array(1.5)]),
    "gamma.logpdf": (stats.gamma.logpdf, [RNG.uniform(0.5, 4, 4), RNG.uniform(0.5, 4, 4),
                                          np.array(0.1), np.array(1.5)]),
    "beta.logpdf": (stats.beta.logpdf, [RNG.uniform(0.1, 0.9, 4), RNG.uniform(0.5, 4, 4),
                                        RNG.uniform(0.5, 4, 4)]),
    "poisson.logpmf": (stats.poisson.logpmf, [np.array([0.0, 1, 4, 9]), RNG.uniform(0.5, 5, 4)]),
    "poisson.cdf": (stats.poisson.cdf, [np.array([0.0, 1, 4, 9.5]), RNG.uniform(0.5, 5, 4)]),
    "dirichlet.logpdf": (stats.dirichlet.logpdf, [RNG.dirichlet([1.0, 2, 3], 4).T,
                                                  np.array([0.7, 2.0, 3.5])]),
    "mvn.logpdf-diagonal": (stats.multivariate_normal.logpdf,
                            [RNG.normal(size=(4, 3)), RNG.normal(size=3),
                             RNG.uniform(0.5, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_finite_differences_to_second_order(name):
    f, args = GRADS[name]
    wrt = (1,) if name.startswith("poisson") else None  # k is data on the integers
    check_grads(f, args, wrt=wrt, order=2)


def test_norm_logcdf_gradient_in_the_far_tail_is_the_inverse_mills_ratio():
    x = np.array([-1e5, -300.0, -40.0, -8.0, 0.0, 8.0, 40.0])
    g = fg.grad(lambda x: fnp.sum(stats.norm.logcdf(x)))(x)
    # pdf / cdf; exp(logpdf - logcdf) would lose 7 digits to cancellation at -1e5
    want = np.where(x < 0, np.sqrt(2 / np.pi) / sp.erfcx(-x / np.sqrt(2)),
                    np.exp(st.norm.logpdf(x) - st.norm.logcdf(x)))
    assert_close(g, want, "exact64")


def test_vmap_over_parameters_matches_scipy():
    mus = RNG.normal(size=5)
    x = RNG.normal(size=3)
    got = fg.vmap(lambda mu: stats.norm.logpdf(x, mu, 2.0) + stats.t.logpdf(x, 4.0, mu))(mus)
    want = st.norm.logpdf(x, mus[:, None], 2.0) + st.t.logpdf(x, 4.0, mus[:, None])
    assert_close(got, want, "exact64")


def test_eager_tensor_gradient_of_a_log_likelihood():
    sigma = fg.tensor(1.5, dtype=fg.float64, requires_grad=True)
    x = np.array([0.3, -1.2, 2.0])
    stats.norm.logpdf(x, 0.0, sigma).sum().backward()
    assert_close(sigma.grad.numpy(), np.sum(x**2 / 1.5**3 - 1 / 1.5), "exact64")


# --- a Bayesian logistic regression objective (HIPS autograd's example), compiled -------


def _logistic_regression_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    return X, y


def neg_log_posterior(w, X, y):
    from fusegrad.scipy import special

    log_prior = fnp.sum(stats.norm.logpdf(w, 0, 1))
    log_lik = fnp.sum(fnp.log(special.expit(y * (X @ w))))
    return -log_prior - log_lik


@pytest.mark.compiled
def test_bayesian_logistic_regression_gradient_compiled(monkeypatch):
    X, y = _logistic_regression_data()
    w = np.random.default_rng(4).normal(size=5)
    want = w - X.T @ (y * sp.expit(-y * (X @ w)))
    g = fg.jit(fg.grad(neg_log_posterior))(w, X, y)
    assert_close(g, want, "exact64")
    hess = fg.jit(fg.hessian(neg_log_posterior))(w, X, y)
    s = sp.expit(X @ w)
    assert_close(hess, np.eye(5) + X.T @ (X * (s * (1 - s))[:, None]), "exact64")
    value = neg_log_posterior(w, X, y)
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert_close(fg.grad(neg_log_posterior)(w, X, y), g, "exact64")
    assert_close(value, -np.sum(st.norm.logpdf(w)) - np.sum(np.log(sp.expit(y * (X @ w)))),
                 "exact64")


@pytest.mark.compiled
def test_compiled_stats_gradients_equal_interpreter(monkeypatch):
    x = np.array([-30.0, -1.0, 0.5, 3.0])

    def f(p):
        mu, s, df, a, b, lam = p[0], p[1], p[2], p[3], p[4], p[5]
        return fnp.sum(stats.norm.logcdf(x, mu, s) + stats.t.logpdf(x, df, mu, s)
                       + stats.gamma.logpdf(x + 31, a, 0.0, s) + stats.beta.logpdf(
                           (x + 31) / 35, a, b) + stats.poisson.logpmf(np.array([0., 1, 2, 8]), lam)
                       + stats.poisson.cdf(np.array([0., 1, 2, 8]), lam))

    p = np.array([0.2, 1.3, 4.0, 2.5, 1.7, 3.2])
    compiled = fg.jit(fg.grad(f))(p)
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert_close(fg.grad(f)(p), compiled, "exact64")
