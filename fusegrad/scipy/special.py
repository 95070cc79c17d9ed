"""``fusegrad.scipy.special``: SciPy's special functions, differentiable to any order.

Each function takes arrays, Python scalars, tracers or eager Tensors, as
``fusegrad.numpy`` does, and matches ``scipy.special`` to about 1e-13 relative in
float64 wherever SciPy is accurate (float32 inputs are computed in float64 and
rounded). The primitive ops (``fusegrad.ir.special_ops``) are ``gammaln``,
``digamma``, ``polygamma``, ``gamma``, ``erfc``, ``erfcx``, ``erfinv``,
``erfcinv``, ``i0e``, ``i1e``, ``logit``, ``betaln`` and the incomplete gamma and beta
functions (``fusegrad.ir.incgamma_ops``); the rest are exact composites of them.
The ufuncs among these are also reached through NumPy's protocol:
``scipy.special.gammaln(x)`` on a traced ``x`` records ``lgamma``.
``logsumexp``, ``softmax`` and ``log_softmax`` are Python functions in SciPy, which
NumPy's protocol cannot intercept: call them from here.

>>> import numpy as np, fusegrad as fg
>>> from fusegrad.scipy import special
>>> float(fg.grad(lambda x: special.gammaln(x))(3.0))  # digamma(3) = 3/2 - euler_gamma
0.9227843350984671
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.bind import aval
from ..ir.shapes import real_function_error
from ..ir.types import is_complex

__all__ = [
    "beta", "betainc", "betaincc", "betaln", "digamma", "entr", "erf", "erfc", "erfcinv",
    "erfcx", "erfinv", "expit", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn",
    "i0", "i0e", "i1", "i1e", "iv", "ive", "j0", "j1", "jn", "jv", "kl_div", "log_expit",
    "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
    "polygamma", "psi", "rgamma", "softmax", "xlog1py", "xlogy", "y0", "y1", "yn", "yv",
]  # fmt: skip

_SQRT1_2 = math.sqrt(0.5)
_SQRT2 = math.sqrt(2.0)


def _f(x):
    """``x`` as a floating-point operand (integers -> float64; weak scalars stay weak)."""
    return A.to_float(x if A.is_weak(x) else A.asarray(x))


def _real(name: str, x):
    """``_f(x)``, refusing a complex ``x`` with the error of the real-only ops, so composites
    name the function called (their ops would refuse it too, never use the real part)."""
    x = _f(x)
    t = aval(x)
    if is_complex(t.dtype):
        raise real_function_error(name, (t,))
    return x


def gammaln(x):
    """log|Gamma(x)|; the derivative is ``digamma``."""
    return ops.lgamma(_real("gammaln", x))


def digamma(x):
    """d/dx log Gamma(x); the derivative is ``polygamma(1, x)``."""
    return ops.digamma(_real("digamma", x))


psi = digamma


def polygamma(n, x):
    """The ``n``-th derivative of digamma; ``n`` must be a concrete non-negative integer."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"polygamma: the order n must be a Python int, got {n!r}; "
                        "fusegrad does not trace the order") from None
    if n < 0:
        raise ValueError(f"polygamma: the order n must be >= 0, got {n}")
    return digamma(x) if n == 0 else ops.polygamma(_real("polygamma", x), n=n)


def gamma(x):
    """Gamma(x); the derivative is ``gamma(x) * digamma(x)``."""
    return ops.gamma(_real("gamma", x))


def _gammasgn_parts(x):
    """(the sign of Gamma(x), where x is a pole of Gamma: a negative integer or -inf).
    Piecewise constant: its derivative is 0."""
    fl = ops.floor(x)
    zero = x == 0  # Gamma(+-0) = +-inf: the sign of the zero
    neg_zero = ops.logical_and(zero, ops.atan2(x, -1.0) < 0)  # atan2(-0, -1) = -pi
    odd = ops.logical_and(x < 0, ops.remainder(fl, 2.0) == 1)  # Gamma < 0 on (-1, 0), ...
    sign = ops.select(ops.logical_or(odd, neg_zero), -1.0, 1.0)
    pole = ops.logical_and(x < 0, ops.logical_or(fl == x, ops.logical_not(ops.isfinite(x))))
    return A.astype(sign, A.dtype(x)), pole


def gammasgn(x):
    """The sign of Gamma(x): 1 or -1 (-1 at -0.0), NaN at the poles and for NaN, as SciPy.
    Piecewise constant: its derivative is 0."""
    x = A.asarray(_real("gammasgn", x))
    sign, pole = _gammasgn_parts(x)
    return ops.select(ops.logical_or(pole, ops.isnan(x)), np.nan, sign)


def rgamma(x):
    """1 / Gamma(x), an entire function: 0 at the poles of Gamma. Computed as
    ``gammasgn(x) * exp(-gammaln(x))``, so its derivative is ``-rgamma(x) * digamma(x)``
    (NaN at the poles themselves)."""
    x = A.asarray(_real("rgamma", x))
    sign, pole = _gammasgn_parts(x)
    out = ops.select(pole, 1.0, sign) * ops.exp(-ops.lgamma(x))
    return ops.select(x == -np.inf, 0.0, out)


def _beta_signed(a, b):
    """Gamma(a) Gamma(b) / Gamma(a + b) as ``sign * exp(betaln)`` (0 where a + b is a pole
    of Gamma; a and b not poles)."""
    sign = 1.0
    for x in (a, b, a + b):
        s, pole = _gammasgn_parts(x)
        sign = sign * ops.select(pole, 1.0, s)
    return sign * ops.exp(ops.betaln(a, b))


def beta(a, b):
    """The beta function Gamma(a) Gamma(b) / Gamma(a + b), as SciPy: ``sign *
    exp(betaln(a, b))`` with the signs of the three gamma functions; 0 where a + b is a
    pole of Gamma; where a (or b) is a non-positive integer, +inf, or SciPy's finite limit
    ``(-1)**b * beta(1 - a - b, b)`` when b is an integer with 1 - a - b > 0. Its
    derivative in ``a`` is ``beta(a, b) * (digamma(a) - digamma(a + b))``."""
    a, b = A.asarray(_real("beta", a)), A.asarray(_real("beta", b))
    pa, pb = (ops.logical_and(x <= 0, ops.floor(x) == x) for x in (a, b))
    p, q = ops.select(pa, a, b), ops.select(pa, b, a)  # the pole, the other
    either = ops.logical_or(pa, pb)
    finite = ops.logical_and(either, ops.logical_and(ops.floor(q) == q, 1 - p - q > 0))
    c, d = ops.select(finite, 1 - p - q, 1.0), ops.select(finite, q, 1.0)
    limit = ops.select(ops.remainder(d, 2.0) == 0, 1.0, -1.0) * _beta_signed(c, d)
    return ops.select(either, ops.select(finite, limit, np.inf), _beta_signed(a, b))


def betaln(a, b):
    """log|B(a, b)| (accurate where gammaln(a) + gammaln(b) - gammaln(a + b) cancels)."""
    return ops.betaln(_real("betaln", a), _real("betaln", b))


def gammainc(a, x):
    """The regularised lower incomplete gamma function P(a, x).

    Differentiable in ``x`` (the gamma density) and in ``a`` (a series /
    continued-fraction derivative, ``fusegrad.ir.incgamma_kernel``), to any order."""
    return ops.gammainc(_real("gammainc", a), _real("gammainc", x))


def gammaincc(a, x):
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), accurate
    where P is close to 1."""
    return ops.gammaincc(_real("gammaincc", a), _real("gammaincc", x))


def betainc(a, b, x):
    """The regularised incomplete beta function I_x(a, b). Differentiable in ``x`` to any
    order and once in ``a`` and ``b`` (``fusegrad.ir.betainc_kernel``; JAX has no shape
    derivatives); a second derivative in the shapes raises ``NotImplementedError``."""
    return ops.betainc(_real("betainc", a), _real("betainc", b), _real("betainc", x))


def betaincc(a, b, x):
    """1 - I_x(a, b), accurate where I_x(a, b) is close to 1."""
    return ops.betaincc(_real("betaincc", a), _real("betaincc", b), _real("betaincc", x))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a Python int):
    ``d (d - 1) / 4 log(pi) + sum_j gammaln(a - j / 2)``, j = 0..d-1."""
    d = operator.index(d)
    if d < 1:
        raise ValueError(f"multigammaln: the dimension d must be >= 1, got {d}")
    a = _real("multigammaln", a)
    if isinstance(a, (np.ndarray, np.generic, float)) and np.any(np.asarray(a) <= 0.5 * (d - 1)):
        raise ValueError(f"multigammaln: condition a ({a}) > 0.5 * (d - 1) ({0.5 * (d - 1)}) "
                         "not met")
    total = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(d):
        total = total + ops.lgamma(a - 0.5 * j)
    return total


def erf(x):
    return ops.erf(_real("erf", x))


def erfc(x):
    """1 - erf(x), accurate for large x (a primitive: ``1 - erf`` loses every digit)."""
    return ops.erfc(_real("erfc", x))


def erfcx(x):
    """exp(x**2) * erfc(x), the scaled complementary error function."""
    return ops.erfcx(_real("erfcx", x))


def erfinv(y):
    """The inverse of erf; the derivative is ``sqrt(pi)/2 * exp(erfinv(y)**2)``."""
    return ops.erfinv(_real("erfinv", y))


def erfcinv(y):
    """The inverse of erfc, accurate for small y."""
    return ops.erfcinv(_real("erfcinv", y))


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return ops.logistic(_f(x))


def logit(p):
    """log(p / (1 - p)), the inverse of ``expit``."""
    return ops.logit(_real("logit", p))


def log_expit(x):
    """log(expit(x)) = -log(1 + exp(-x)), without overflow or loss for large |x|."""
    return -A.logaddexp(0.0, -_real("log_expit", x))


def ndtr(x):
    """The standard normal CDF, ``erfc(-x / sqrt(2)) / 2`` (accurate in both tails)."""
    return 0.5 * ops.erfc(-_real("ndtr", x) * _SQRT1_2)


def log_ndtr(x):
    """log(ndtr(x)), accurate far into both tails.

    For x <= 0: ``log(erfcx(-x / sqrt 2) / 2) - x**2 / 2`` (no underflow: exact to
    x = -1e150); for x > 0: ``log1p(-erfc(x / sqrt 2) / 2)``. Each branch reads only
    its own side's values (the other gets a harmless stand-in), so neither sends
    an infinite or NaN partial into the gradient of the other.
    """
    x = _real("log_ndtr", x)
    pos = x > 0
    xp = ops.select(pos, x, 1.0)
    xn = ops.select(pos, -1.0, x)
    right = ops.log1p(-0.5 * ops.erfc(xp * _SQRT1_2))
    left = ops.log(0.5 * ops.erfcx(-xn * _SQRT1_2)) - 0.5 * (xn * xn)
    return ops.select(pos, right, left)


def ndtri(p):
    """The inverse of ``ndtr``: ``-sqrt(2) * erfcinv(2 p)``."""
    return -_SQRT2 * ops.erfcinv(2 * _real("ndtri", p))


def _x_times(x, log_y, y):
    """x * log_y, 0 where x == 0 unless y is NaN (SciPy's xlogy convention).

    Where x == 0 and log_y is finite the product itself is 0 and keeps its exact
    partials (log_y in x, x / y in y); where log_y is infinite or NaN it is replaced by 0."""
    keep = ops.logical_and(x == 0, ops.logical_not(ops.isnan(y)))
    return x * ops.select(ops.logical_and(keep, ops.logical_not(ops.isfinite(log_y))), 0.0, log_y)


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is NaN), as SciPy."""
    x, y = _f(x), _f(y)
    return _x_times(x, ops.log(y), y)


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is NaN), as SciPy."""
    x, y = _f(x), _f(y)
    return _x_times(x, ops.log1p(y), y)


def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf for x < 0, as SciPy; the derivative is
    ``-(log(x) + 1)``."""
    x = A.asarray(_real("entr", x))
    pos = x > 0
    xs = ops.select(pos, x, 1.0)  # a harmless stand-in where the other branches are taken
    out = ops.select(pos, -xs * ops.log(xs), ops.select(x == 0, 0.0, -np.inf))
    return ops.select(ops.isnan(x), np.nan, out)


def kl_div(x, y):
    """x log(x / y) - x + y for x, y > 0; y where x == 0 and y >= 0; inf otherwise, as
    SciPy (NaN for NaN inputs)."""
    x, y = A.asarray(_real("kl_div", x)), A.asarray(_real("kl_div", y))
    both = ops.logical_and(x > 0, y > 0)
    xs, ys = ops.select(both, x, 1.0), ops.select(both, y, 1.0)
    inner = xs * ops.log(xs / ys) - xs + ys
    zero_x = ops.logical_and(x == 0, y >= 0)
    out = ops.select(both, inner, ops.select(zero_x, y, np.inf))
    return ops.select(ops.logical_or(ops.isnan(x), ops.isnan(y)), np.nan, out)


def i0e(x):
    """exp(-|x|) I0(x); the derivative is ``i1e(x) - sign(x) i0e(x)``."""
    return ops.i0e(_real("i0e", x))


def i1e(x):
    """exp(-|x|) I1(x)."""
    return ops.i1e(_real("i1e", x))


def i0(x):
    """The modified Bessel function I0(x) = i0e(x) exp(|x|); its derivative is i1(x)."""
    x = _real("i0", x)
    return ops.i0e(x) * ops.exp(ops.abs(x))


def i1(x):
    """The modified Bessel function I1(x) = i1e(x) exp(|x|); its derivative is
    i0(x) - i1(x) / x."""
    x = _real("i1", x)
    return ops.i1e(x) * ops.exp(ops.abs(x))


def _order(name: str, v, integer: bool = False) -> float:
    """The order of a Bessel function: a constant (its derivative in the order is not
    computed, so a traced or array order is an error rather than a dropped gradient)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                           np.floating)):
        if isinstance(v, np.ndarray) and v.ndim == 0:
            return _order(name, v[()], integer)
        raise TypeError(
            f"{name}: the order must be a Python number (got {type(v).__name__}); "
            "fusegrad differentiates Bessel functions in x only. For several orders, "
            "call it once per order.")
    if integer and v != int(v):
        raise ValueError(f"{name}: the order must be an integer, got {v}")
    return float(v)


def jv(v, z):
    """The Bessel function of the first kind J_v(z) of a constant real order ``v``;
    d/dz = (J_{v-1} - J_{v+1}) / 2."""
    return ops.jv(_real("jv", z), v=_order("jv", v))


def yv(v, z):
    """The Bessel function of the second kind Y_v(z) (z > 0); d/dz = (Y_{v-1} - Y_{v+1}) / 2."""
    return ops.yv(_real("yv", z), v=_order("yv", v))


def iv(v, z):
    """The modified Bessel function of the first kind I_v(z); d/dz = (I_{v-1} + I_{v+1}) / 2."""
    return ops.iv(_real("iv", z), v=_order("iv", v))


def ive(v, z):
    """exp(-|z|) I_v(z), which does not overflow for large z."""
    return ops.ive(_real("ive", z), v=_order("ive", v))


def jn(n, x):
    """J_n(x) for an integer order ``n``."""
    return ops.jv(_real("jn", x), v=_order("jn", n, integer=True))


def yn(n, x):
    """Y_n(x) for an integer order ``n``."""
    return ops.yv(_real("yn", x), v=_order("yn", n, integer=True))


def j0(x):
    """J_0(x); its derivative is -J_1(x)."""
    return ops.jv(_real("j0", x), v=0.0)


def j1(x):
    """J_1(x)."""
    return ops.jv(_real("j1", x), v=1.0)


def y0(x):
    """Y_0(x) (x > 0); its derivative is -Y_1(x)."""
    return ops.yv(_real("y0", x), v=0.0)


def y1(x):
    """Y_1(x) (x > 0)."""
    return ops.yv(_real("y1", x), v=1.0)


# --- reductions over an axis ---------------------------------------------------------


def _axes(x, axis):
    return A.norm_axes(axis, A.ndim(x), "logsumexp")


def _drop(x, axes):
    return A.reshape(x, tuple(d for i, d in enumerate(A.shape(x)) if i not in axes))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over ``axis``, as ``scipy.special.logsumexp``.

    Shifted by the largest finite element, so nothing overflows; all-``-inf``
    inputs give ``-inf`` with a zero gradient. With weights ``b`` (broadcast
    against ``a``) the sum may be negative: ``return_sign=True`` returns
    ``(log|sum|, sign(sum))``, otherwise a negative sum gives NaN, as in SciPy.
    """
    a = A.asarray(_f(a))
    if b is not None:
        b = A.asarray(_f(b))
        shape = np.broadcast_shapes(A.shape(a), A.shape(b))
        a, b = A.broadcast_to(a, shape), A.broadcast_to(b, shape)
    axes = _axes(a, axis)
    m = A.max(a, axes, keepdims=True) if axes else a
    m = ops.stop_gradient(ops.select(ops.isfinite(m), m, 0.0))
    e = ops.exp(a - m)
    if b is not None:
        e = b * e
    s = A.sum(e, axes, keepdims=True) if axes else e
    sign = ops.sign(s)
    if return_sign:
        s = ops.abs(s)
    zero = s == 0
    out = ops.select(zero, -np.inf, ops.log(ops.select(zero, 1.0, s)) + m)
    if not keepdims:
        out, sign = _drop(out, axes), _drop(sign, axes)
    return (out, sign) if return_sign else out


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over ``axis`` (all axes by default, as in SciPy)."""
    x = A.asarray(_f(x))
    return ops.exp(x - logsumexp(x, axis=axis, keepdims=True))


def log_softmax(x, axis=None):
    """x - logsumexp(x) over ``axis`` (all axes by default, as in SciPy)."""
    x = A.asarray(_f(x))
    return x - logsumexp(x, axis=axis, keepdims=True)


# --- scipy.special's ufuncs on traced values (NumPy's __array_ufunc__ protocol) -------
A.SCIPY_UFUNCS.update({
    "gammaln": gammaln, "psi": digamma, "gamma": gamma, "betaln": betaln, "erf": erf,
    "erfc": erfc, "erfcx": erfcx, "erfinv": erfinv, "erfcinv": erfcinv, "expit": expit,
    "logit": logit, "log_expit": log_expit, "ndtr": ndtr, "log_ndtr": log_ndtr,
    "ndtri": ndtri, "xlogy": xlogy, "xlog1py": xlog1py, "i0": i0, "i1": i1, "i0e": i0e,
    "i1e": i1e, "gammainc": gammainc, "gammaincc": gammaincc, "betainc": betainc,
    "betaincc": betaincc, "beta": beta, "gammasgn": gammasgn, "rgamma": rgamma,
    "entr": entr, "kl_div": kl_div, "jv": jv, "yv": yv, "iv": iv, "ive": ive, "jn": jn,
    "yn": yn, "j0": j0, "j1": j1, "y0": y0, "y1": y1,
})  # fmt: skip
