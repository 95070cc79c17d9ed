"""Derivatives of the regularised lower incomplete gamma function in its shape ``a``.

``gammainc_da(a, x, n)`` is ``d^n/da^n P(a, x)``. SciPy has no such function, so it
is computed here (Numba, float64), by running the two classical expansions of P in
truncated Taylor arithmetic in ``a``: every quantity is the array of its Taylor
coefficients ``c_0 .. c_n`` in ``h`` at ``a + h``, and the n-th derivative is
``n! c_n``.

* ``x <= 1`` or ``x <= a``: the power series
  ``P = x^a e^-x / Gamma(a + 1) * sum_k x^k / ((a + 1) ... (a + k))``;
* otherwise the continued fraction of the upper function
  ``Q = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...))``
  (modified Lentz), and ``d^n P = -d^n Q``, so the derivative stays accurate
  relative to its size where P is close to 1.

The Taylor coefficients of the prefactor's ``log Gamma`` are the polygamma values
``psi^(j-1)(a) / j!``, computed here too (the compiled SciPy ones are not reachable
from this layer). The same branch split and expansions are the ones Cephes and
XLA use for the value and the first derivative; the arithmetic on coefficient
arrays extends them to any order.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np

_jit = numba.njit(cache=True, error_model="numpy")

_EPS = 2.0 ** -53
_MAX_TERMS = 20000


def _bernoulli_over_factorial(count: int) -> np.ndarray:
    """``B_2k / (2k)!`` for k = 1..count (exact rational recurrence, then rounded)."""
    b = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / Fraction(m + 1))
    return np.array([float(b[2 * k] / math.factorial(2 * k)) for k in range(1, count + 1)])


_B = _bernoulli_over_factorial(12)
_B2K = np.array([_B[k] * math.factorial(2 * k + 2) for k in range(_B.size)])  # B_2k
_SHIFT = 16.0


@_jit
def digamma(x):
    """psi(x) for x > 0: the recurrence up to x >= 16, then the asymptotic series."""
    total = 0.0
    while x < _SHIFT:
        total -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    power = inv2
    tail = 0.0
    for k in range(_B2K.size):
        tail += _B2K[k] / (2 * k + 2) * power
        power *= inv2
    return total + math.log(x) - 0.5 / x - tail


@_jit
def polygamma(m, x):
    """psi^(m)(x) for an integer m >= 1 and x > 0: ``(-1)^(m+1) m! zeta(m + 1, x)``,
    the Hurwitz zeta summed directly up to x >= 16, then by Euler-Maclaurin."""
    s = m + 1.0
    total = 0.0
    while x < _SHIFT:
        total += x ** -s
        x += 1.0
    lead = x ** -s
    total += lead * x / (s - 1.0) + 0.5 * lead
    rising = s
    power = lead / x
    for k in range(_B.size):
        term = _B[k] * rising * power
        total += term
        if abs(term) <= 1e-18 * abs(total):
            break
        rising *= (s + 2 * k + 1) * (s + 2 * k + 2)
        power /= x * x
    sign = 1.0 if m % 2 == 1 else -1.0
    return sign * math.gamma(m + 1.0) * total


@_jit
def _log_prefactor(a, x, y, m):
    """Taylor coefficients in h of ``(a + h) log x - x - lgamma(y + h)``, ``y = a`` or ``a + 1``."""
    out = np.zeros(m)
    out[0] = a * math.log(x) - x - math.lgamma(y)
    if m > 1:
        out[1] = math.log(x) - digamma(y)
    for j in range(2, m):
        out[j] = -polygamma(j - 1, y) / math.gamma(j + 1.0)
    return out


@_jit
def _series_exp(u):
    """Taylor coefficients of exp(u)."""
    m = u.size
    out = np.zeros(m)
    out[0] = math.exp(u[0])
    for k in range(1, m):
        acc = 0.0
        for j in range(1, k + 1):
            acc += j * u[j] * out[k - j]
        out[k] = acc / k
    return out


@_jit
def _mul_into(out, p, q):
    """out = p q, truncated; ``out`` may be ``p`` or ``q`` (filled from the top down)."""
    for k in range(p.size - 1, -1, -1):
        acc = 0.0
        for j in range(k + 1):
            acc += p[j] * q[k - j]
        out[k] = acc


@_jit
def _div_into(out, p, d):
    """out = p / d, truncated; ``out`` may be ``p`` but not ``d``."""
    for k in range(p.size):
        acc = p[k]
        for j in range(1, k + 1):
            acc -= d[j] * out[k - j]
        out[k] = acc / d[0]


@_jit
def _converged(new, old):
    """Every coefficient changed by at most a rounding error of its new value."""
    done = True
    for j in range(new.size):
        done = done and abs(new[j] - old[j]) <= _EPS * abs(new[j])
    return done


@_jit
def _times_exp(log_prefactor, series):
    out = _series_exp(log_prefactor)
    _mul_into(out, out, series)
    return out


@_jit
def _lower_series(a, x, m):
    """Taylor coefficients of P(a + h, x) by the power series."""
    total = np.zeros(m)
    total[0] = 1.0
    term = total.copy()
    factor = np.zeros(m)
    old = np.zeros(m)
    for k in range(1, _MAX_TERMS):
        inv = 1.0 / (a + k)
        scale = x * inv  # x / (a + k + h) = x/(a+k) sum_j (-h/(a+k))^j
        for j in range(m):
            factor[j] = scale
            scale *= -inv
        _mul_into(term, term, factor)
        old[:] = total
        total += term
        if _converged(total, old):
            break
    return _times_exp(_log_prefactor(a, x, a + 1.0, m), total)


@_jit
def _upper_fraction(a, x, m):
    """Taylor coefficients of Q(a + h, x) by the continued fraction (modified Lentz)."""
    b = np.zeros(m)
    b[0] = x + 1.0 - a
    if m > 1:
        b[1] = -1.0
    one = np.zeros(m)
    one[0] = 1.0
    d = np.zeros(m)
    _div_into(d, one, b)
    f = d.copy()
    c = np.zeros(m)
    an = np.zeros(m)
    tmp = np.zeros(m)
    delta = np.zeros(m)
    for i in range(1, _MAX_TERMS):
        an[0] = -i * (i - a)
        if m > 1:
            an[1] = float(i)
        b[0] += 2.0
        _mul_into(d, d, an)  # d = 1 / (b + an d)
        d += b
        _div_into(tmp, one, d)
        d[:] = tmp
        if i == 1:  # c = b + an / c with c = "infinity" before the first step
            c[:] = b
        else:
            _div_into(tmp, an, c)
            c[:] = b + tmp
        _mul_into(delta, c, d)
        _mul_into(tmp, f, delta)
        done = _converged(tmp, f)
        f[:] = tmp
        if done:
            break
    return _times_exp(_log_prefactor(a, x, a, m), f)


@_jit
def gammainc_da(a, x, n):
    """``d^n/da^n gammainc(a, x)`` in float64 (n >= 1); ``n = 0`` gives gammainc itself.

    0 at x = 0 and x = inf (P is constant in a there); NaN outside a > 0, x >= 0.
    """
    if math.isnan(a) or math.isnan(x) or a <= 0.0 or x < 0.0:
        return math.nan
    if x == 0.0 or math.isinf(x):
        if n > 0:
            return 0.0
        return 0.0 if x == 0.0 else 1.0
    if math.isinf(a):
        return 0.0
    m = n + 1
    if x > 1.0 and x > a:
        coef = _upper_fraction(a, x, m)
        value = coef[n] * math.gamma(n + 1.0)
        return 1.0 - value if n == 0 else -value
    coef = _lower_series(a, x, m)
    return coef[n] * math.gamma(n + 1.0)


@_jit
def gammainc_da_array(a, x, n):
    """``gammainc_da`` over flat float64 arrays of equal size."""
    out = np.empty(a.size)
    for i in range(a.size):
        out[i] = gammainc_da(a[i], x[i], n)
    return out


def _gammainc_da_c(a, x, n):
    return gammainc_da(a, x, n)


def gammainc_da_address() -> int:
    """The address of ``gammainc_da`` as a C function ``double(double, double, int64)``
    (a Numba ``cfunc``, compiled once per machine and kept in Numba's cache), which
    compiled kernels call: the same code, so the same bits, as the reference."""
    return _cfunc(_gammainc_da_c, "float64(float64, float64, int64)")


def _cfunc(fn, signature: str) -> int:
    made = _CFUNCS.get(fn)
    if made is None:
        made = _CFUNCS[fn] = numba.cfunc(signature, cache=True, error_model="numpy")(fn)
    return made.address


#: the C functions made (kept alive: compiled code calls them by address)
_CFUNCS: dict = {}


def gammainc_da_reference(a, x, *, n):
    """The op's reference: broadcast, compute in float64, round to the operands' type."""
    dtype = np.result_type(a, x)
    a64, x64 = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    flat = gammainc_da_array(np.ascontiguousarray(a64).ravel(),
                             np.ascontiguousarray(x64).ravel(), int(n))
    return flat.reshape(a64.shape).astype(dtype, copy=False)
