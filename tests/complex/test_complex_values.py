"""Complex arrays through every layer: IR types and text, promotion, op values against
NumPy on the interpreter and in compiled code (fg.jit), and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import ShapeError, TensorType, bind
from fusegrad.ir.evaluate import evaluate
from fusegrad.ir.parser import parse_function
from fusegrad.ir.printer import print_function
from fusegrad.ir.types import is_complex, is_float, is_inexact, parse_type
from fusegrad.tracer import trace

RNG = np.random.default_rng(0)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def right_half(*shape):
    return RNG.uniform(0.3, 2, shape) + 1j * RNG.uniform(-1.5, 1.5, shape)


def both(f, *args, rtol=1e-12):
    """f on plain arrays (NumPy reference) == f under fg.jit (the interpreter, as tests run
    unless marked compiled; ``test_compiled_*`` below run the same functions compiled)."""
    want = f(*args)
    got = fg.jit(f)(*args)
    ws = want if isinstance(want, tuple) else (want,)
    gs = got if isinstance(got, tuple) else (got,)
    for w, c in zip(ws, gs):
        w, c = np.asarray(w), np.asarray(c)
        assert c.dtype == w.dtype, (c.dtype, w.dtype)
        np.testing.assert_allclose(c, w, rtol=rtol, atol=1e-12)
    return got


def interpreted(f, *args):
    fn = trace(f, *(TensorType.of(a) for a in args))
    out = evaluate(fn, *args)
    return out[0] if len(out) == 1 else tuple(out)


# --- types and text -------------------------------------------------------------------


def test_dtype_names_and_predicates():
    assert str(TensorType((2,), np.complex64)) == "c64[2]"
    assert parse_type("c128[3,4]") == TensorType((3, 4), np.complex128)
    t = TensorType((), np.complex128)
    assert t.is_complex and t.is_inexact and not t.is_float
    assert is_complex(np.complex64) and is_inexact(np.float32) and not is_float(np.complex128)


def test_printer_parser_round_trip_with_complex_constant():
    fn = trace(lambda z: z * (1 + 2j) + fnp.real(z), TensorType((3,), np.complex128))
    text = print_function(fn)
    assert "c128[3]" in text and "(1+2j)" in text
    again = parse_function(text)
    assert print_function(again) == text
    z = crand(3)
    np.testing.assert_allclose(evaluate(again, z)[0], z * (1 + 2j) + z.real)


# --- promotion ------------------------------------------------------------------------


@pytest.mark.parametrize("f, args", [
    (lambda x: x + 1j, (np.ones(3, np.float32),)),
    (lambda x: x * (2 - 1j), (np.ones(3),)),
    (lambda x, z: x * z, (np.ones(3, np.float32), crand(3, dtype=np.complex64))),
    (lambda x, z: x + z, (np.ones(3), crand(3, dtype=np.complex64))),
    (lambda i, z: i * z, (np.arange(3), crand(3, dtype=np.complex64))),
    (lambda z: fnp.exp(z), (crand(3, dtype=np.complex64),)),
    (lambda z: z / 2, (crand(3, dtype=np.complex64),)),
])
def test_promotion_matches_numpy(f, args):
    out = interpreted(f, *args)
    want = f(*args)
    assert out.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert fg.jit(f)(*args).dtype == np.asarray(want).dtype


# --- values: every op on complex inputs -------------------------------------------------

UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "arcsin", "arccos",
         "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "negative",
         "abs", "sign", "conj", "real", "imag", "angle", "isnan", "isfinite", "square"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_unary_values(name, dtype):
    z = (0.8 * crand(4, 3)).astype(dtype)
    got_i = interpreted(lambda z: getattr(fnp, name)(z), z)
    got_c = fg.jit(lambda z: getattr(fnp, name)(z))(z)
    want = getattr(np, name)(z)
    rtol = 1e-5 if dtype == np.complex64 else 1e-12
    for got in (got_i, got_c):
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power"])
def test_binary_values(name):
    a, b = right_half(3, 4), right_half(1, 4)
    f = getattr(fnp, name)
    want = getattr(np, name)(a, b)
    for got in (interpreted(f, a, b), fg.jit(f)(a, b)):
        assert got.dtype == np.complex128
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mixed_expression_with_weak_complex_scalars():
    x, y = RNG.standard_normal(5), RNG.standard_normal(5)

    def f(x, y):
        z = x + 1j * y
        return z * z.conj() + 2j, z.real * z.imag, fnp.complex(x, y) - z

    got = both(f, x, y)
    assert got[0].dtype == np.complex128 and got[1].dtype == np.float64
    assert np.all(got[2] == 0)


def test_complex_constructor_dtypes():
    x32 = np.ones(2, np.float32)
    assert fg.jit(fnp.complex)(x32, x32).dtype == np.complex64
    assert fg.jit(fnp.complex)(np.arange(2), np.arange(2)).dtype == np.complex128
    np.testing.assert_array_equal(fnp.complex(np.array([1.0, 2.0]), 3.0), [1 + 3j, 2 + 3j])


@pytest.mark.parametrize("name, kwargs", [
    ("sum", {}), ("sum", {"axis": 0}), ("sum", {"axis": 1, "keepdims": True}),
    ("mean", {}), ("mean", {"axis": 1}), ("prod", {"axis": 0}), ("prod", {}),
    ("cumsum", {"axis": 1}),
])
def test_reductions(name, kwargs):
    z = crand(3, 4)
    f = lambda z: getattr(fnp, name)(z, **kwargs)  # noqa: E731
    both(f, z)


def test_matmul_and_products():
    a, b = crand(3, 4), crand(4, 2)
    both(lambda a, b: a @ b, a, b)
    both(lambda a, b: fnp.matmul(a[None], b), a, b)
    both(lambda a: a @ a.conj().T, a)
    both(lambda a, b: fnp.dot(a, b) + fnp.outer(a[0], b[:, 0]).sum(), a, b)
    both(lambda a, b: fnp.einsum("ij,jk->ik", a, b), a, b)


def test_shape_ops_pass_complex_through():
    z = crand(3, 4)
    idx = np.array([2, 0, 2])

    def f(z):
        return (z.reshape(4, 3), z.T, z[1:, ::-2], fnp.concatenate([z, z * 1j], axis=1),
                fnp.take(z, idx, axis=0), z[idx], fnp.where(z.real > 0, z, 0),
                fnp.broadcast_to(z[:1], (3, 4)), fnp.stack([z, z]).sum(0))

    both(f, z)


def test_scatter_and_update_with_complex():
    z = crand(4, 3)
    idx = np.array([1, 3, 1])
    v = crand(3, 3)
    def f(z, v):
        return fnp.asarray(z).at[idx].add(v), fnp.asarray(z).at[1:3].set(v[:2])

    got = fg.jit(f)(z, v)
    want = z.copy()
    np.add.at(want, idx, v)
    np.testing.assert_allclose(got[0], want)
    want = z.copy()
    want[1:3] = v[:2]
    np.testing.assert_allclose(got[1], want)


def test_angle_in_degrees_and_of_reals():
    z = crand(6)
    np.testing.assert_allclose(fg.jit(lambda z: fnp.angle(z, deg=True))(z), np.angle(z, deg=True))
    x = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(fg.jit(fnp.angle)(x), np.angle(x))


def test_real_imag_conj_of_real_arrays_follow_numpy():
    x = RNG.standard_normal(4)
    got = fg.jit(lambda x: (fnp.real(x), fnp.imag(x), fnp.conj(x), x.real, x.imag))(x)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], np.zeros(4))
    np.testing.assert_array_equal(got[2], x)
    np.testing.assert_array_equal(got[3], x)
    np.testing.assert_array_equal(got[4], np.zeros(4))


def test_predicates():
    z = np.array([1 + 0j, 2 + 1j])
    assert fnp.iscomplexobj(z) and not fnp.isrealobj(z) and not fnp.iscomplexobj(np.ones(2))
    out = fg.jit(lambda z: (fnp.iscomplex(z), fnp.isreal(z)))(z)
    np.testing.assert_array_equal(out[0], np.iscomplex(z))
    np.testing.assert_array_equal(out[1], np.isreal(z))
    np.testing.assert_array_equal(fg.jit(fnp.iscomplex)(np.ones(2)), [False, False])


def test_numpy_protocols_dispatch_complex_functions():
    z = crand(3)
    got = fg.jit(lambda z: (np.real(z), np.imag(z), np.conj(z), np.angle(z), np.abs(z)))(z)
    for g, w in zip(got, (z.real, z.imag, np.conj(z), np.angle(z), np.abs(z))):
        np.testing.assert_allclose(g, w)


# --- refusals (JAX's choice: complex numbers are not ordered; only the max/min reductions
# follow NumPy's order, see test_complex_extremes.py) ----------------------------------


@pytest.mark.parametrize("f", [
    lambda z: z < z, lambda z: z >= 0, lambda z: fnp.maximum(z, z),
    lambda z: fnp.floor(z), lambda z: fnp.clip(z, 0, 1), lambda z: fnp.arctan2(z, z),
    lambda z: fnp.cbrt(z),
])
def test_ordering_and_real_only_ops_refuse_complex(f):
    with pytest.raises((ShapeError, TypeError)):
        fg.jit(f)(crand(3))


def test_complex_op_refuses_complex_parts_and_real_op_refuses_reals():
    with pytest.raises(ShapeError):
        bind("complex", crand(2), crand(2))
    with pytest.raises(ShapeError):
        bind("real", np.ones(2))


# --- compiled == NumPy: the cases above grouped into few compiled functions -----------


def _unary_all(z):
    return tuple(getattr(fnp, n)(z) for n in UNARY)


@pytest.mark.compiled
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_compiled_unary(dtype):
    z = (0.8 * crand(4, 3)).astype(dtype)
    rtol = 1e-5 if dtype == np.complex64 else 1e-12
    for name, got in zip(UNARY, fg.jit(_unary_all)(z)):
        want = getattr(np, name)(z)
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=name)


@pytest.mark.compiled
def test_compiled_arithmetic_reductions_contractions_and_shapes():
    a, b = right_half(3, 4), right_half(1, 4)
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    m = crand(4, 2)
    idx = np.array([2, 0, 2])

    def f(a, b, x, y, m):
        z = x + 1j * y
        return (a + b, a - b, a * b, a / b, a ** b, a ** 2.5, z * z.conj() + 2j,
                fnp.complex(x, y), z.real * z.imag, a.sum(), a.sum(axis=0), a.mean(axis=1),
                a.prod(axis=1), fnp.cumsum(a, axis=1), a @ m, a @ a.conj().T,
                a.reshape(4, 3), a.T, a[1:, ::-2], fnp.concatenate([a, a * 1j], axis=1),
                fnp.take(a, idx, axis=0), fnp.where(a.real > 1, a, 0), abs(a) * a,
                fnp.angle(a, deg=True), a * (0.5 - 2j))

    args = (a, b, x, y, m)
    got = fg.jit(f)(*args)
    want = f(*args)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.dtype == w.dtype, k
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=str(k))


@pytest.mark.compiled
def test_compiled_complex64_matmul_and_constants():
    a, b = crand(5, 6, dtype=np.complex64), crand(6, 3, dtype=np.complex64)
    got = fg.jit(lambda a, b: (a @ b, a * (0.5 - 2j) + (1 + 1j)))(a, b)
    assert got[0].dtype == got[1].dtype == np.complex64
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)
    np.testing.assert_allclose(got[1], a * np.complex64(0.5 - 2j) + np.complex64(1 + 1j),
                               rtol=1e-6)
