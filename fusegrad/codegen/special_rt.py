"""Scalar special functions for generated code: SciPy's own C implementations.

Numba cannot call ``scipy.special`` in nopython mode, but SciPy exports the C
functions behind its ufuncs from ``scipy.special.cython_special``. Each one used
here is given a global symbol name (``llvmlite.binding.add_symbol``) and declared
as a ``numba.types.ExternalFunction``, so compiled code calls it by name: the
machine code holds no process-specific address and stays in Numba's disk cache
(this module is imported, and the symbols defined, before any cached code loads).
The helpers compute in float64 and round to the operand's type, as SciPy's
float32 loops do. ``polygamma`` has no exported C function: it is
``(-1)**(n+1) n! zeta(n+1, x)`` with the Hurwitz zeta summed here
(Euler-Maclaurin), as SciPy computes it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types
from numba.extending import get_cython_function_address

from .inline import inline_njit

_jit = numba.njit(error_model="numpy", cache=True)
_F64 = types.float64


def _extern(capi_name: str, arity: int):
    """``cython_special``'s C function ``capi_name`` as a Numba external function of
    ``arity`` doubles (plus Cython's ``skip_dispatch`` flag, always 0)."""
    symbol = f"fusegrad_special_{capi_name.removeprefix('__pyx_fuse_1')}"
    address = get_cython_function_address("scipy.special.cython_special", capi_name)
    llvm.add_symbol(symbol, address)
    return types.ExternalFunction(symbol, _F64(*(_F64,) * arity, types.intc))


_gammaln = _extern("gammaln", 1)
_psi = _extern("__pyx_fuse_1psi", 1)
_gamma = _extern("__pyx_fuse_1gamma", 1)
_erfc = _extern("__pyx_fuse_1erfc", 1)
_erfcx = _extern("__pyx_fuse_1erfcx", 1)
_erfinv = _extern("__pyx_fuse_0erfinv", 1)
_erfcinv = _extern("erfcinv", 1)
_i0e = _extern("i0e", 1)
_i1e = _extern("i1e", 1)
_logit = _extern("__pyx_fuse_0logit", 1)
_betaln = _extern("betaln", 2)
_pdtr = _extern("pdtr", 2)
_jv = _extern("__pyx_fuse_1jv", 2)
_yv = _extern("__pyx_fuse_1yv", 2)
_iv = _extern("__pyx_fuse_1iv", 2)
_ive = _extern("__pyx_fuse_1ive", 2)


@inline_njit
def lgamma(x):
    return type(x)(_gammaln(np.float64(x), 0))


@inline_njit
def digamma(x):
    return type(x)(_psi(np.float64(x), 0))


@inline_njit
def gamma(x):
    return type(x)(_gamma(np.float64(x), 0))


@inline_njit
def erfc(x):
    return type(x)(_erfc(np.float64(x), 0))


@inline_njit
def erfcx(x):
    return type(x)(_erfcx(np.float64(x), 0))


@inline_njit
def erfinv(x):
    return type(x)(_erfinv(np.float64(x), 0))


@inline_njit
def erfcinv(x):
    return type(x)(_erfcinv(np.float64(x), 0))


@inline_njit
def i0e(x):
    return type(x)(_i0e(np.float64(x), 0))


@inline_njit
def i1e(x):
    return type(x)(_i1e(np.float64(x), 0))


@inline_njit
def logit(x):
    return type(x)(_logit(np.float64(x), 0))


@inline_njit
def betaln(a, b):
    return type(a)(_betaln(np.float64(a), np.float64(b), 0))


@inline_njit
def pdtr(k, mu):
    return type(k)(_pdtr(np.float64(k), np.float64(mu), 0))


@inline_njit
def jv(x, v):
    return type(x)(_jv(np.float64(v), np.float64(x), 0))


@inline_njit
def yv(x, v):
    return type(x)(_yv(np.float64(v), np.float64(x), 0))


@inline_njit
def iv(x, v):
    return type(x)(_iv(np.float64(v), np.float64(x), 0))


@inline_njit
def ive(x, v):
    return type(x)(_ive(np.float64(v), np.float64(x), 0))


def _bernoulli_coefficients(count: int) -> np.ndarray:
    """``B_2k / (2k)!`` for k = 1..count, from the Bernoulli numbers' recurrence."""
    b = [Fraction(1)]
    for m in range(1, 2 * count + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / Fraction(m + 1))
    return np.array([float(b[2 * k] / math.factorial(2 * k)) for k in range(1, count + 1)])


_EM = _bernoulli_coefficients(14)
_SHIFT = 12.0  # sum terms directly until q + N >= this, then the Euler-Maclaurin tail


@_jit
def hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)**-s for an integer s >= 2 (q may be negative)."""
    total = 0.0
    a = q
    while a < _SHIFT:
        total += 1.0 / a**s
        a += 1.0
    lead = 1.0 / a**s
    total += lead * a / (s - 1) + 0.5 * lead
    rising = float(s)  # s (s + 1) ... (s + 2k - 2)
    power = lead / a  # a**(-s - 2k + 1)
    for k in range(_EM.size):
        term = _EM[k] * rising * power
        total += term
        if abs(term) <= 1e-17 * abs(total):
            break
        rising *= (s + 2 * k + 1) * (s + 2 * k + 2)
        power /= a * a
    return total


@_jit
def _polygamma64(x, n):
    if n == 0:
        return _psi(x, 0)
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * hurwitz_zeta(n + 1, x)


@inline_njit
def polygamma(x, n):
    return type(x)(_polygamma64(np.float64(x), n))
