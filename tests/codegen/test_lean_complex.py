"""Complex numbers in compiled code (``codegen/lean/complexes.py``): complex64 and
complex128 arrays as parameters, results, arena values, constants and loop elements;
the element rules give the interpreter's bits, and programs mixing real and complex
values are lowered whole (no NumPy between segments)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import interpreted, lowered_natively

pytestmark = pytest.mark.compiled
CDTYPES = [np.complex128, np.complex64]


def _same_bits(got, want):
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8))


def _data(dtype, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return z.astype(dtype)


def _arith(z, w):
    return (z * w - fnp.conj(z)) + (-w) * (1.5 - 2j)


def _parts(z, w):
    return fnp.real(z * w), fnp.imag(z + w), fnp.conj(z) - w


def _mixed(z, w):
    x = fnp.real(z)
    return fnp.where(x > 0, z, w * x), (x * 2.0).astype(z.dtype), z.astype(np.complex128)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("f", [_arith, _parts, _mixed])
def test_elementwise_programs_are_the_interpreters_bits(f, dtype):
    z, w = _data(dtype), _data(dtype, (4,), seed=1)
    assert lowered_natively(f, z, w)
    _same_results(fg.jit(f)(z, w), interpreted(f, z, w))


def _same_results(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same_bits(g, w)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_from_real_parts_and_back(dtype):
    real = np.float64 if dtype == np.complex128 else np.float32
    x, y = _data(real, (5,)).real.astype(real), np.linspace(-1, 1, 5).astype(real)

    def f(x, y):
        z = x + 1j * y
        return z * z, fnp.real(z).astype(real)

    _same_results(fg.jit(f)(x, y), interpreted(f, x, y))


def test_array_and_scalar_complex_constants():
    c = np.array([1 + 2j, -0.5j, 3.0, np.inf - 1j])

    def f(z):
        return z * c + (0.25 - 1j)

    z = _data(np.complex128, (4,))
    assert lowered_natively(f, z)
    _same_bits(fg.jit(f)(z), interpreted(f, z))


def test_a_gradient_through_complex_values_is_compiled_whole():
    def loss(x):
        z = x * (1 + 2j) + fnp.conj(x * 1j)
        return fnp.real(z * fnp.conj(z)).sum()

    x = np.linspace(-1, 1, 6)
    g = fg.grad(loss)
    assert lowered_natively(g, x)
    _same_bits(g(x), interpreted(g, x))
    # |x(1+2j) - ix|^2 = |x + ix|^2 = 2x^2
    np.testing.assert_allclose(g(x), 4 * x, rtol=1e-14)


def test_a_complex_op_without_element_rule_runs_between_segments(monkeypatch):
    from fusegrad.codegen.lean import complexes

    def f(z):
        return fnp.conj(z * 2.0) + 1.0

    z = _data(np.complex128, (3,))
    monkeypatch.delitem(complexes.OPS, "conj")
    assert not lowered_natively(f, z)
    _same_bits(fg.jit(f)(z), interpreted(f, z))
