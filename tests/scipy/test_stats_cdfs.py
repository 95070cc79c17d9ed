"""The CDFs and survival functions of ``t``, ``gamma``, ``beta`` and ``chi2`` (and chi2's
density) against scipy.stats: values far into both tails with broadcast ``loc`` and
``scale``, the support's ends, invalid parameters, gradients to second order,
compiled == interpreter, the first derivatives in the incomplete beta function's
shapes (t's df, beta's a and b) and the error for its second ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import fusegrad as fg
import fusegrad.numpy as fnp
import fusegrad.scipy.stats as stats
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(5)
TAILS = ["cdf", "logcdf", "sf", "logsf"]


def _compare(got, want, rtol=1e-12):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    ok = same | np.isclose(got, want, rtol=rtol, atol=0)
    assert ok.all(), f"got {got[~ok][:5]}, SciPy {want[~ok][:5]}"


TX = np.concatenate([-np.geomspace(1e-8, 1e4, 30), [0.0], np.geomspace(1e-8, 1e4, 30)])
POSX = np.concatenate([np.geomspace(1e-10, 5e3, 45), [0.0, -1.0]])
UNITX = np.concatenate([np.geomspace(1e-12, 0.5, 20), 1 - np.geomspace(1e-12, 0.5, 20),
                        [0.0, 1.0, -0.5, 1.5]])
LOC = np.array([[0.0], [0.25]])
SCALE = np.array([1.0, 2.5]).reshape(2, 1, 1)

#: (family, shape arguments per case, x values, loc, scale)
CASES = {
    "t": [(df,) for df in (0.4, 1.0, 3.0, 30.0, 1e3, 1e6)],
    "gamma": [(a,) for a in (0.01, 0.5, 1.0, 4.0, 80.0, 1500.0)],
    "chi2": [(df,) for df in (0.05, 1.0, 2.0, 7.0, 300.0)],
    "beta": [(0.5, 0.5), (0.02, 3.0), (2.0, 5.0), (60.0, 0.7), (300.0, 400.0)],
}
POINTS = {"t": TX, "gamma": POSX, "chi2": POSX, "beta": UNITX}


def _params():
    return [pytest.param(fam, shapes, fname, id=f"{fam}-{fname}-{'-'.join(map(str, shapes))}")
            for fam, cases in CASES.items() for shapes in cases
            for fname in TAILS + (["pdf", "logpdf"] if fam == "chi2" else [])]


@pytest.mark.parametrize("family, shapes, fname", _params())
def test_matches_scipy_in_both_tails_with_broadcast_loc_and_scale(family, shapes, fname):
    x = POINTS[family] * (1 if family == "beta" else 1.0)
    got = getattr(getattr(stats, family), fname)(x, *shapes, LOC, SCALE)
    with np.errstate(all="ignore"):
        want = getattr(getattr(st, family), fname)(x, *shapes, LOC, SCALE)
        if family == "t" and shapes == (1.0,):  # SciPy's stdtr(1, z) loses 9 digits near 0
            want = _cauchy(fname, (x - LOC) / SCALE)
    _compare(got, want)


def _cauchy(fname, z):
    """t with df = 1, accurate everywhere: P(T <= z) = atan2(1, -z) / pi."""
    p = np.arctan2(1, z if fname in ("sf", "logsf") else -z) / np.pi
    q = np.arctan2(1, -z if fname in ("sf", "logsf") else z) / np.pi  # 1 - p
    return np.where(p < 0.5, np.log(p), np.log1p(-q)) if fname.startswith("log") else p


@pytest.mark.compiled
@pytest.mark.parametrize("family", sorted(CASES))
def test_compiled_matches_scipy(family):
    shapes = CASES[family][2]
    f = getattr(stats, family)
    got = fg.jit(lambda x: tuple(getattr(f, n)(x, *shapes, 0.1, 1.5) for n in TAILS))(
        POINTS[family])
    for g, n in zip(got, TAILS):
        with np.errstate(all="ignore"):
            _compare(g, getattr(getattr(st, family), n)(POINTS[family], *shapes, 0.1, 1.5))


def test_invalid_parameters_give_nan_and_outside_the_support_the_limits():
    with np.errstate(all="ignore"):
        for f, args in ((stats.t.cdf, (1.0, -1.0)), (stats.gamma.sf, (1.0, 0.0)),
                        (stats.chi2.cdf, (1.0, 2.0, 0.0, -1.0)),
                        (stats.beta.cdf, (0.5, 2.0, -1.0))):
            assert np.isnan(f(*args)), f
    assert float(stats.gamma.cdf(-1.0, 2.0)) == 0.0 and float(stats.gamma.sf(-1.0, 2.0)) == 1.0
    assert float(stats.chi2.logcdf(-1.0, 2.0)) == -np.inf
    assert float(stats.beta.cdf(1.5, 2.0, 3.0)) == 1.0 and float(stats.beta.sf(-0.5, 2.0, 3.0)) == 1


# --- gradients ------------------------------------------------------------------------

X4 = RNG.uniform(0.3, 4, 4)
GRADS = {  # name -> (function, arguments, differentiated argument indices or None: all)
    "gamma.cdf": (stats.gamma.cdf, [X4, RNG.uniform(0.5, 4, 4), np.array(0.1),
                                    np.array(1.3)], None),
    "gamma.logsf": (stats.gamma.logsf, [X4, RNG.uniform(0.5, 4, 4), np.array(-0.2),
                                        np.array(0.8)], None),
    "gamma.logcdf": (stats.gamma.logcdf, [X4, RNG.uniform(0.5, 4, (3, 1))], None),
    "chi2.cdf": (stats.chi2.cdf, [X4, RNG.uniform(0.5, 6, 4)], None),
    "chi2.sf": (stats.chi2.sf, [X4, RNG.uniform(0.5, 6, 4), np.array(0.1), np.array(2.0)],
                None),
    "chi2.logpdf": (stats.chi2.logpdf, [X4, RNG.uniform(0.5, 6, 4), np.array(0.1),
                                        np.array(2.0)], None),
    "t.cdf": (stats.t.cdf, [RNG.uniform(-6, 6, 6), np.array([0.7, 2.0, 5.0, 20.0, 3.0, 1.0]),
                            np.array(0.2), np.array(1.4)], (0, 2, 3)),
    "t.logcdf": (stats.t.logcdf, [np.array([-40.0, -3.0, -0.1, 0.4, 5.0]), np.array(3.0)],
                 (0,)),
    "t.logsf": (stats.t.logsf, [np.array([-5.0, -0.4, 0.1, 3.0, 40.0]), np.array(6.0),
                                np.array(0.3), np.array(2.0)], (0, 2, 3)),
    "beta.cdf": (stats.beta.cdf, [RNG.uniform(0.1, 0.9, 4), np.array(2.5), np.array(1.5),
                                  np.array(0.0), np.array(1.0)], (0, 3, 4)),
    "beta.logsf": (stats.beta.logsf, [RNG.uniform(0.1, 0.9, 4), np.array(0.7), np.array(3.0)],
                   (0,)),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_finite_differences_to_second_order(name):
    f, args, wrt = GRADS[name]
    check_grads(f, args, wrt=wrt, order=2)


def test_t_cdf_gradient_at_the_centre_is_the_density():
    x = np.array([0.3, 0.3, 0.3])
    df = np.array([0.5, 3.0, 50.0])
    got = fg.grad(lambda x: fnp.sum(stats.t.cdf(x, df, 0.3, 2.0)))(x)
    assert_close(got, st.t.pdf(x, df, 0.3, 2.0), "exact64")
    hess = fg.grad(lambda x: fnp.sum(fg.grad(lambda x: fnp.sum(stats.t.cdf(x, df, 0.3)))(x)))(x)
    assert_close(hess, np.zeros(3), "exact64")


@pytest.mark.compiled
def test_compiled_gradients_equal_interpreter():
    def nll(a, scale, x):  # a gamma model fitted to censored data
        return -fnp.sum(stats.gamma.logpdf(x[:3], a, 0, scale)) - fnp.sum(
            stats.gamma.logsf(x[3:], a, 0, scale)) - fnp.sum(stats.chi2.logcdf(x, a))

    args = (np.array(2.0), np.array(1.5), RNG.uniform(0.5, 5, 6))
    g = fg.grad(nll, (0, 1))
    for u, v in zip(fg.jit(g)(*args), g(*args)):
        assert_close(u, v, "exact64")
    h = fg.grad(lambda a, s, x: fg.grad(nll)(a, s, x))
    assert_close(fg.jit(h)(*args), h(*args), "exact64")


@pytest.mark.parametrize("name, f, args", [
    ("t.cdf", stats.t.cdf, [np.array([-8.0, -0.4, 0.0, 0.3, 2.0, 30.0]),
                            np.array([0.7, 2.0, 5.0, 20.0, 3.0, 1.0]), np.array(0.2)]),
    ("t.logsf", stats.t.logsf, [np.array([-5.0, 0.1, 3.0, 40.0]), np.array([6.0, 1.5, 3.0, 8.0])]),
    ("beta.cdf", stats.beta.cdf, [RNG.uniform(0.1, 0.9, 4), RNG.uniform(0.5, 4, 4),
                                  RNG.uniform(0.5, 4, 4)]),
    ("beta.logsf", stats.beta.logsf, [RNG.uniform(0.1, 0.9, 4), np.array(0.7), np.array(3.0)]),
])
def test_shape_derivatives_of_betainc_based_cdfs_match_finite_differences(name, f, args):
    check_grads(f, args, order=1)


@pytest.mark.parametrize("f, args", [(stats.t.cdf, (0.5, 3.0)), (stats.beta.sf, (0.5, 3.0, 2.0))])
def test_second_shape_derivatives_of_betainc_based_cdfs_are_a_clear_error(f, args):
    with pytest.raises(NotImplementedError, match=r"second derivative.*betainc's shapes"):
        fg.grad(fg.grad(f, 1), 1)(*args)
    fg.grad(fg.grad(f, 1), 0)(*args)  # the mixed derivative (x after df) is there
