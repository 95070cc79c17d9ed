"""Complex element rules of the lean code generator (``codegen/lean/complex_math.py``)
against the NumPy interpreter, bit for bit in complex128 and complex64, on special values
(infinities, NaNs, signed zeros, zero divisors, overflow and subnormals) and random ones.

Every rule gives NumPy's bits: division is NumPy's Smith loop, the modulus its
vectorised formula (fused multiply-adds where the host has them, as its SIMD loops),
``exp``/``log``/``sqrt``/trigonometric/hyperbolic functions and their inverses the C
library's ``cexp``, ``clog``, ... that NumPy calls, ``expm1``/``log1p``/``sign``/``pow``
NumPy's own formulas on the real C functions. Only NaNs are compared by position, not
by sign and payload: which operand's NaN an IEEE operation returns depends on the
operand order the compiler picks, in NumPy's build as in ours.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import interpreted, lowered_natively

pytestmark = pytest.mark.compiled
CDTYPES = [np.complex128, np.complex64]
_SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -3.0, 1e300, 1e-310, 700.0]
#: exponents taking each branch of NumPy's ``nc_pow``: 0, the unrolled 1, 2 and 3, the
#: binary powers (negative: then inverted), the C library's ``cpow``
_EXPONENTS = [0, 1, 2, 3, -1, -2, 5, 17, -7, 99, -99, 100, 2.5, 0.5 + 1j, -0.0, np.nan,
              np.inf, 1j]


def _grid(dtype):
    """Every pair of special values as (re, im), then random values of modulus ~1."""
    rng = np.random.default_rng(0)
    special = [complex(a, b) for a in _SPECIAL for b in _SPECIAL]
    z = np.array(special + list(rng.standard_normal(64) * 2 + 2j * rng.standard_normal(64)))
    with np.errstate(over="ignore"):  # 1e300 and 700 overflow complex64's parts
        return z.astype(dtype)


def assert_same_bits(got, want):
    """``got`` has ``want``'s dtype, shape and bits, NaNs compared by position only."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "c":
        got, want = got.view(got.real.dtype), want.view(want.real.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


def _unary(z):
    return (fnp.abs(z), fnp.sign(z), fnp.exp(z), fnp.log(z), fnp.sqrt(z), fnp.sin(z),
            fnp.cos(z), fnp.tan(z), fnp.sinh(z), fnp.cosh(z), fnp.tanh(z), fnp.expm1(z),
            fnp.log1p(z), fnp.isnan(z), fnp.isfinite(z))


def _inverse(z):
    return (fnp.arcsin(z), fnp.arccos(z), fnp.arctan(z), fnp.arcsinh(z), fnp.arccosh(z),
            fnp.arctanh(z))


def _binary(z, w):
    return z / w, w / z, z == w, z != w, z == z, z * w, z + w, z - w, -z, fnp.conj(w)


def _powers(z, p):
    return (z ** p, z ** 2, z ** 3, z ** -1, z ** 7, z ** -4, z ** 0.0, z ** 2.5,
            z ** (0.5 - 1j))


def _compare(f, *args):
    assert lowered_natively(f, *args)
    with np.errstate(all="ignore"):
        got, want = fg.jit(f)(*args), interpreted(fg.jit(f), *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same_bits(g, w)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_unary_rules_are_numpys_bits(dtype):
    """Modulus, sign, exponential, logarithms, roots, trigonometric and hyperbolic
    functions, NaN and finiteness tests: one kernel of them all."""
    _compare(_unary, _grid(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_inverse_functions_are_the_c_librarys_bits(dtype):
    _compare(_inverse, _grid(dtype))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_arithmetic_and_comparisons_are_numpys_bits(dtype):
    """Every pair of special values divided both ways (zero divisors included),
    multiplied, added, subtracted and compared."""
    z = _grid(dtype)
    w = z[np.random.default_rng(1).permutation(z.size)]
    _compare(_binary, z, w)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_powers_take_numpys_branches(dtype):
    """Each exponent of ``_EXPONENTS`` against every base (zero, infinite and NaN bases
    included), and constant exponents, which fix the branch when the kernel is built."""
    z = _grid(dtype)
    p = np.resize(np.array(_EXPONENTS, dtype=dtype), z.size)
    _compare(_powers, np.tile(z, len(_EXPONENTS)), np.repeat(np.array(_EXPONENTS, dtype), z.size))
    _compare(_powers, z, p)


def test_scalar_complex_ops_between_kernels_are_numpys_bits():
    """0-d values are computed in the entry by the same rules."""
    def f(z, w):
        return fnp.abs(z), z / w, fnp.exp(z) ** w, fnp.sqrt(w) == z

    _compare(f, np.complex128(0.3 - 2j), np.complex128(-1.5 + 0.25j))
    _compare(f, np.complex64(np.inf - 0j), np.complex64(0j))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e6])
def test_random_sweep(dtype, scale):
    """Many random values over magnitudes from small to large."""
    rng = np.random.default_rng(int(scale * 7) % 1000)
    z = ((rng.standard_normal(4000) + 1j * rng.standard_normal(4000)) * scale).astype(dtype)
    w = ((rng.standard_normal(4000) + 1j * rng.standard_normal(4000)) * scale).astype(dtype)
    _compare(_unary, z)
    _compare(_inverse, z)
    _compare(_binary, z, w)
    _compare(_powers, z, np.round(w.real / scale * 4).astype(dtype))
