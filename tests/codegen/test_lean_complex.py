"""Complex numbers in compiled code (``codegen/lean/complexes.py``): complex64 and
complex128 arrays as parameters, results, arena values, constants and loop elements;
the element rules give the interpreter's bits, and programs mixing real and complex
values are lowered whole (no NumPy between segments); complex sums, scatters and cumulative
sums, products by NumPy's ``zgemm``/``cgemm``, and gradients through complex values to
second order. The element rules of ``complex_math`` are in ``test_lean_complex_math``."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir import ops
from tests.helpers import (
    assert_close,
    check_grads,
    interpreted,
    lowered_natively,
    on_one_and_all_threads,
    same_bits,
    same_results,
)

pytestmark = pytest.mark.compiled
CDTYPES = [np.complex128, np.complex64]


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
    same_results(fg.jit(f)(z, w), interpreted(f, z, w))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_from_real_parts_and_back(dtype):
    real = np.float64 if dtype == np.complex128 else np.float32
    x, y = _data(dtype, (5,)).real.astype(real), np.linspace(-1, 1, 5).astype(real)

    def f(x, y):
        z = x + 1j * y
        return z * z, fnp.real(z).astype(real)

    same_results(fg.jit(f)(x, y), interpreted(f, x, y))


@pytest.mark.parametrize("dtype", CDTYPES)
def test_conversions_between_complex_and_integers_or_bools(dtype):
    """Integers and bools become the real part; complex to an integer truncates the real
    part, to bool tests it (the interpreter's ``convert`` drops the imaginary part)."""
    z = np.array([1.7 + 2j, -2.5 - 0j, 0j, -0.5j, 3e9 + 1j, np.nan + 0j], dtype)
    i, flags = np.array([3, -4, 0, 7, 1, 2], np.int32), np.array([True, False] * 3)

    def f(z, i, flags):
        ints = fnp.where(fnp.isnan(z), 0, z).astype(np.int64)
        return ints, z.astype(bool), i.astype(z.dtype) + flags.astype(z.dtype), z * i

    assert lowered_natively(f, z, i, flags)
    same_results(fg.jit(f)(z, i, flags), interpreted(fg.jit(f), z, i, flags))


def test_array_and_scalar_complex_constants():
    c = np.array([1 + 2j, -0.5j, 3.0, np.inf - 1j])

    def f(z):
        return z * c + (0.25 - 1j)

    z = _data(np.complex128, (4,))
    assert lowered_natively(f, z)
    same_bits(fg.jit(f)(z), interpreted(f, z))


def test_a_gradient_through_complex_values_is_compiled_whole():
    def loss(x):
        z = x * (1 + 2j) + fnp.conj(x * 1j)
        return fnp.real(z * fnp.conj(z)).sum()

    x = np.linspace(-1, 1, 6)
    g = fg.grad(loss)
    assert lowered_natively(g, x)
    same_bits(g(x), interpreted(g, x))
    # |x(1+2j) - ix|^2 = |x + ix|^2 = 2x^2
    np.testing.assert_allclose(g(x), 4 * x, rtol=1e-14)


def test_a_complex_op_without_element_rule_runs_between_segments(monkeypatch):
    from fusegrad.codegen.lean import complexes

    def f(z):
        return fnp.conj(z * 2.0) + 1.0

    z = _data(np.complex128, (3,))
    monkeypatch.delitem(complexes.OPS, "conj")
    assert not lowered_natively(f, z)
    same_bits(fg.jit(f)(z), interpreted(f, z))


# --- reductions, scatters, scans and products ---------------------------------------


def _sums(z):
    return fnp.sum(z * z), fnp.sum(fnp.exp(z), axis=1), fnp.sum(z * 2.0, axis=0), fnp.mean(z)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_sums_are_lowered_and_close_to_the_interpreter(dtype):
    """Full, row and column sums and a mean of complex values in kernels (summed in vector
    lanes, as float sums: NumPy's pairwise order to rounding)."""
    z = _data(dtype, (30, 20))
    assert lowered_natively(_sums, z)
    kind = "exact64" if dtype == np.complex128 else "f32"
    for got, want in zip(fg.jit(_sums)(z), interpreted(_sums, z)):
        assert got.dtype == want.dtype
        assert_close(got, want, kind)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_scatter_adds_and_cumulative_sums_are_the_interpreters_bits(dtype):
    """``index_add`` adds repeated indices in index order (``np.add.at``'s bits);
    ``cumsum`` adds along its axis in order."""
    x, v = _data(dtype, (5, 3)), _data(dtype, (6, 3), seed=2)
    idx = np.array([0, 4, 4, 1, -1, 0])

    def f(x, i, v):
        return ops.index_add(x, i, v, axis=0), fnp.cumsum(x * x, axis=1)

    assert lowered_natively(f, x, idx, v)
    same_results(fg.jit(f)(x, idx, v), interpreted(f, x, idx, v))
    want = np.array(x)
    np.add.at(want, idx, v)
    same_bits(fg.jit(f)(x, idx, v)[0], want)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_complex_products_call_numpys_gemm(dtype):
    """Matrices, batches and transposed operands read in place: ``np.matmul``'s bits (it
    calls the same ``zgemm``/``cgemm``); a one-row operand (NumPy calls ``gemv``) to
    rounding."""
    a, b, c = _data(dtype, (2, 5, 4)), _data(dtype, (4, 6), seed=1), _data(dtype, (6, 4), seed=2)

    def f(a, b, c):
        return a @ b, fnp.swapaxes(a, -1, -2) @ fnp.conj(a), a @ c.T

    assert lowered_natively(f, a, b, c)
    got = fg.jit(f)(a, b, c)
    same_results(got, interpreted(f, a, b, c))
    same_bits(got[0], np.matmul(a, b))
    row = _data(dtype, (1, 4), seed=3)
    assert_close(fg.jit(lambda r, b: r @ b)(row, b), row @ b,
                 "exact64" if dtype == np.complex128 else "f32")


def test_a_complex_reduction_has_the_same_bits_on_any_thread_count(monkeypatch):
    """A complex sum of a kernel run in chunks: partial sums per chunk, reduced in chunk
    order, so one thread and all of them give the same bits."""
    pytest.importorskip("numba")
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)

    def f(z):
        return fnp.sum(fnp.exp(z * 0.1)), fnp.sum(z * fnp.conj(z), axis=0)

    z = _data(np.complex128, (400, 300))
    g = fg.jit(f)
    one, every = on_one_and_all_threads(g, z)
    same_results(one, every)
    for got, want in zip(every, interpreted(f, z)):
        assert_close(got, want, "exact64")


# --- gradients through complex values -----------------------------------------------


def test_the_gradients_of_the_complex_test_programs_are_lowered_whole():
    """Every real-valued function of ``tests/complex`` differentiated: no op left to
    NumPy; their weighted sum compiled equals the interpreter."""
    pytest.importorskip("jax")
    from tests.complex.test_complex_grads import FNP

    z = np.array([0.5 + 0.3j, 1.2 - 0.4j, 0.7 + 1.1j, 1.5 + 0.2j])
    for name, f in sorted(FNP.items()):
        assert lowered_natively(fg.grad(f), z), name

    def total(z):
        return sum(f(z) * (k + 1) for k, (_, f) in enumerate(sorted(FNP.items())))

    g = fg.grad(total)
    assert_close(g(z), interpreted(g, z), "exact64")


def _loss(x):
    z = fnp.exp(1j * x) * (x + 2j)
    w = fnp.sqrt(z + 3.0) / (z * z + (1 - 0.5j)) + fnp.tanh(z * 0.3) ** 2.5
    return fnp.sum(fnp.abs(w) ** 2) + fnp.real(fnp.sum(fnp.log(z + 4.0) * fnp.sin(z)))


def _complex_loss(z):
    return fnp.sum(fnp.abs(fnp.cosh(z) / (z + 3.0)) + fnp.imag(z ** 3 * fnp.conj(z)))


def test_second_order_gradients_through_complex_values_compiled():
    """Rules to second order against finite differences (``check_grads``), then the
    compiled Hessian-vector product, lowered whole, against central differences of the
    compiled gradient (gradients of complex inputs are ``df/dx - i df/dy``, JAX's)."""
    x = np.linspace(-0.8, 1.1, 5)
    z = _data(np.complex128, (4,), seed=4) * 0.5
    check_grads(_loss, [x], order=2)
    check_grads(_complex_loss, [z], order=2)
    for f, a in ((_loss, x), (_complex_loss, z)):
        v = np.random.default_rng(5).standard_normal(a.shape).astype(a.dtype)

        def hvp(a, v, f=f):  # <grad f, v> of the real and imaginary parts
            return fnp.real(fnp.sum(fg.grad(f)(a) * v))

        h = fg.grad(hvp)
        assert lowered_natively(h, a, v)
        g, step = fg.grad(f), 1e-4
        numeric = (8 * (g(a + step * v) - g(a - step * v))
                   - (g(a + 2 * step * v) - g(a - 2 * step * v))) / (12 * step)
        assert_close(h(a, v), numeric, "fd")
