"""``fusegrad.scipy.signal`` against ``scipy.signal``: values (1-D to 4-D, every mode,
odd and even sizes, ``valid`` with the inputs exchanged, complex, float32/float64,
integer and boolean dtypes), SciPy's errors, gradients in both inputs to second order
by finite differences and against JAX, forward mode, vmap, compiled == interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.scipy import signal as S
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(11)
MODES = ("full", "same", "valid")
METHODS = ("direct", "fft")
FUNCS = ("convolve", "correlate")
SHAPES = [  # (in1, in2): odd and even sizes, in2 larger than in1 (exchanged for valid)
    ((7,), (4,)), ((6,), (3,)), ((3,), (6,)), ((5,), (5,)),
    ((5, 6), (2, 3)), ((4, 4), (3, 2)), ((2, 3), (4, 5)),
    ((4, 3, 5), (2, 2, 3)), ((2, 2, 2), (3, 3, 4)),
]


def rand(shape, dtype=np.float64):
    x = RNG.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * RNG.normal(size=shape)
    return x.astype(dtype)


def kind(dtype) -> str:
    return "f32" if np.dtype(dtype) in (np.float32, np.complex64) else "exact64"


# --- values --------------------------------------------------------------------------


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_scipy(shapes, dtype):
    a, b = rand(shapes[0], dtype), rand(shapes[1], dtype)
    for name in FUNCS:
        for mode in MODES:
            want = getattr(ss, name)(a, b, mode, method="direct")
            for method in METHODS:
                got = getattr(S, name)(a, b, mode, method)
                assert got.dtype == want.dtype, (name, mode, method)
                assert_close(got, want, kind(dtype), f"{name} {mode} {method}")


@pytest.mark.parametrize("dtypes", [(np.complex128, np.complex128), (np.complex128, np.float64),
                                    (np.float64, np.complex128), (np.complex64, np.complex64),
                                    (np.float32, np.complex64)], ids=str)
@pytest.mark.parametrize("shapes", [((6,), (3,)), ((3, 4), (2, 2)), ((2, 3), (3, 4))], ids=str)
def test_complex_values_match_scipy(dtypes, shapes):
    a, b = rand(shapes[0], dtypes[0]), rand(shapes[1], dtypes[1])
    for name in FUNCS:  # correlate conjugates in2
        for mode in MODES:
            want = getattr(ss, name)(a, b, mode)
            for method in METHODS:
                got = getattr(S, name)(a, b, mode, method)
                assert got.dtype == want.dtype
                assert_close(got, want, kind(want.dtype), f"{name} {mode} {method}")


def test_four_axes_match_scipy():
    a, b = rand((3, 2, 4, 3)), rand((2, 2, 3, 2))
    for name in FUNCS:
        for mode in MODES:
            assert_close(getattr(S, name)(a, b, mode), getattr(ss, name)(a, b, mode), "exact64")


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8, np.bool_, np.float16])
def test_dtypes_as_scipy(dtype):
    a = RNG.integers(0, 60, (9,)).astype(dtype)
    b = RNG.integers(0, 60, (4,)).astype(dtype)
    for name in FUNCS:
        for method in METHODS:
            want = getattr(ss, name)(a, b, method="fft" if dtype == np.float16 else method)
            got = getattr(S, name)(a, b, method=method)
            assert got.dtype == want.dtype
            if dtype == np.float16:  # SciPy's direct method has no float16; both round once
                np.testing.assert_allclose(got, want, rtol=2e-3)
            else:  # integer sums wrap around the result dtype as SciPy's do
                np.testing.assert_array_equal(got, want)


def test_mixed_dtypes_promote_as_scipy():
    cases = [(np.float32, np.float64), (np.float32, np.int64), (np.int32, np.float32),
             (np.float32, np.complex64), (np.float64, np.complex64)]
    for d1, d2 in cases:
        a, b = np.ones(4, d1), np.ones(3, d2)
        assert S.convolve(a, b).dtype == ss.convolve(a, b).dtype, (d1, d2)
        assert S.correlate(a, b).dtype == ss.correlate(a, b).dtype, (d1, d2)


def test_zero_dim_and_lists():
    assert S.convolve(np.float32(2), np.float32(3)) == np.float32(6)
    assert S.correlate(np.complex128(2j), np.complex128(3j)) == 6
    assert_close(S.convolve([1.0, 2.0], [1.0, 1.0, 1.0]), [1.0, 3.0, 3.0, 2.0], "exact64")


@pytest.mark.parametrize("axes", [None, 0, [1], [0, 2], [-1, 0]], ids=str)
def test_fftconvolve_and_oaconvolve_match_scipy(axes):
    cases = [((4, 3, 5), (2, 3, 2)), ((4, 1, 5), (2, 3, 5)), ((3, 2, 5), (1, 2, 3))]
    for s1, s2 in cases:
        a, b = rand(s1), rand(s2)
        for mode in MODES:
            for name in ("fftconvolve", "oaconvolve"):
                try:
                    want = getattr(ss, name)(a, b, mode, axes)
                except ValueError:
                    with pytest.raises(ValueError):
                        getattr(S, name)(a, b, mode, axes)
                    continue
                assert_close(getattr(S, name)(a, b, mode, axes), want, "exact64",
                             f"{name} {s1} {s2} {mode}")


# --- errors --------------------------------------------------------------------------


def test_errors_as_scipy():
    one, two = np.ones(3), np.ones((2, 2))
    for f in (S.convolve, S.correlate, S.fftconvolve):
        with pytest.raises(ValueError, match=r"same dimensionality.*\(3,\) and \(2, 2\)"):
            f(one, two)
        with pytest.raises(ValueError, match=r"acceptable mode flags.*'sideways'"):
            f(one, one, "sideways")
        with pytest.raises(ValueError, match="at least as large as the other in every"):
            f(np.ones((3, 2)), np.ones((2, 3)), "valid")
        with pytest.raises(ValueError, match="must not be empty"):
            f(np.ones(0), one)
    for f in (S.convolve, S.correlate):
        with pytest.raises(ValueError, match=r"acceptable method flags.*'spectral'"):
            f(one, one, method="spectral")
    with pytest.raises(ValueError, match="axes cannot be empty"):
        S.fftconvolve(two, two, axes=[])
    with pytest.raises(ValueError, match="unique"):
        S.fftconvolve(two, two, axes=[0, -2])
    with pytest.raises(ValueError, match="exceed"):
        S.fftconvolve(two, two, axes=[2])
    with pytest.raises(ValueError, match="incompatible shapes"):
        S.fftconvolve(np.ones((3, 2)), np.ones((2, 5)), axes=1)


# --- derivatives ---------------------------------------------------------------------


GRAD_CASES = [  # (function, shapes, mode, method)
    ("convolve", ((6,), (3,)), "full", "direct"), ("convolve", ((5,), (4,)), "same", "fft"),
    ("correlate", ((3,), (5,)), "valid", "direct"), ("correlate", ((4, 5), (2, 2)), "same",
                                                     "direct"),
    ("convolve", ((3, 4), (2, 3)), "valid", "fft"), ("correlate", ((2, 3), (3, 2)), "full",
                                                     "fft"),
    ("convolve", ((3, 2, 3), (2, 2, 2)), "same", "direct"),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_second_order_derivatives(case):
    name, (s1, s2), mode, method = case
    f = getattr(S, name)
    check_grads(lambda x, y: f(x, y, mode, method), [rand(s1), rand(s2)], order=2)


@pytest.mark.parametrize("mode", MODES)
def test_complex_second_order_derivatives(mode):
    a, b = rand((4, 3), np.complex128), rand((2, 2), np.complex128)
    for method in METHODS:
        check_grads(lambda x, y, m=method: S.correlate(x, y, mode, m), [a, b], order=2)
    check_grads(lambda x, y: S.convolve(x, fnp.real(y), mode), [a, b], order=2)


def test_fftconvolve_second_order_derivatives():
    a, b = rand((3, 4)), rand((1, 3))
    check_grads(lambda x, y: S.fftconvolve(x, y, "same", axes=1), [a, b], order=2)


def test_cotangents_are_valid_correlations():
    """The VJP of the full convolution: in1's cotangent is ``correlate(g, in2, 'valid')``,
    in2's ``correlate(g, in1, 'valid')`` (conjugated operands for complex inputs, since
    VJPs are transposes, not adjoints); of the valid one, the full convolutions with the
    other input reversed."""
    a, b = rand((7, 5), np.complex128), rand((3, 2), np.complex128)
    out, back = fg.vjp(lambda x, y: S.convolve(x, y), a, b)
    g = rand(out.shape, np.complex128)
    ga, gb = back(g)
    assert_close(ga, ss.correlate(g, b.conj(), "valid"), "exact64")
    assert_close(gb, ss.correlate(g, a.conj(), "valid"), "exact64")
    out, back = fg.vjp(lambda x, y: S.convolve(x, y, "valid"), a, b)
    g = rand(out.shape, np.complex128)
    ga, gb = back(g)
    assert_close(ga, ss.convolve(g, b[::-1, ::-1]), "exact64")
    assert_close(gb, ss.convolve(a[::-1, ::-1], g, "valid"), "exact64")


@pytest.mark.parametrize("method", METHODS)
def test_jvp_is_bilinear(method):
    a, b, ta, tb = rand((5, 4)), rand((2, 3)), rand((5, 4)), rand((2, 3))
    for name in FUNCS:
        f = getattr(S, name)
        for mode in MODES:
            out, tan = fg.jvp(lambda x, y, f=f, m=mode: f(x, y, m, method), (a, b), (ta, tb))
            assert_close(out, getattr(ss, name)(a, b, mode), "exact64")
            want = getattr(ss, name)(ta, b, mode) + getattr(ss, name)(a, tb, mode)
            assert_close(tan, want, "exact64")


def test_vjp_and_jvp_match_jax():
    """Complex inputs of different sizes (exchanged for ``valid``), every mode of both
    functions in one call, since each JAX call costs about a second here."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def every(mod):
        def f(a, b):
            return [getattr(mod, name)(a, b, mode) for name in FUNCS for mode in MODES]
        return f

    args = [rand((3, 4), np.complex128), rand((4, 5), np.complex128)]
    tans = [rand(np.shape(a), a.dtype) for a in args]
    jargs, jtans = [jnp.asarray(a) for a in args], [jnp.asarray(t) for t in tans]
    outs, back = fg.vjp(every(S), *args)
    jouts, jback = jax.vjp(every(jax.scipy.signal), *jargs)
    cts = [rand(o.shape, o.dtype) for o in outs]
    for mine, theirs in zip([*outs, *back(cts)], [*jouts, *jback([jnp.asarray(c) for c in cts])]):
        assert_close(mine, np.asarray(theirs), "exact64")
    _, tan = fg.jvp(every(S), tuple(args), tuple(tans))
    _, jtan = jax.jvp(every(jax.scipy.signal), tuple(jargs), tuple(jtans))
    for mine, theirs in zip(tan, jtan):
        assert_close(mine, np.asarray(theirs), "exact64")


def test_program_does_not_grow_with_the_kernel():
    x = rand(40)

    def count(k: int, method: str) -> int:
        return len(fg.make_ir(lambda a, b: S.correlate(a, b, "same", method))(x, rand(k)).ops)

    for method in METHODS:
        assert count(3, method) == count(30, method)
    ir = str(fg.make_ir(lambda a, b: S.convolve(a, b, method="direct"))(x, rand(5)))
    assert ir.count("conv ") == 1


@pytest.mark.usefixtures("default_float64")
def test_eager_tensors_backward():
    a, b = rand((5, 4)), rand((2, 3))
    x, k = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    (S.correlate(x, k, "same") ** 2).sum().backward()
    want = fg.grad(lambda p, q: fnp.sum(S.correlate(p, q, "same") ** 2), (0, 1))(a, b)
    assert_close(x.grad.numpy(), want[0], "exact64")
    assert_close(k.grad.numpy(), want[1], "exact64")


# --- vmap and compiled code ----------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_vmap(method):
    xs, ks, k = rand((3, 6, 5)), rand((3, 2, 3), np.complex128), rand((3, 2))
    for mode in MODES:
        got = fg.vmap(lambda x, y, m=mode: S.correlate(x, y, m, method))(xs, ks)
        assert_close(got, np.stack([ss.correlate(x, y, mode) for x, y in zip(xs, ks)]), "exact64")
        got = fg.vmap(lambda x, m=mode: S.convolve(x, k, m, method))(xs)
        assert_close(got, np.stack([ss.convolve(x, k, mode) for x in xs]), "exact64")
        got = fg.vmap(lambda y, m=mode: S.convolve(xs[0], y, m, method))(ks)
        assert_close(got, np.stack([ss.convolve(xs[0], y, mode) for y in ks]), "exact64")


def _all_modes(method):
    def f(a1, b1, a2, b2, a3, b3, c1, c2):
        return [getattr(S, name)(x, y, mode, method) for name in FUNCS for mode in MODES
                for x, y in ((a1, b1), (a2, b2), (a3, b3), (c1, c2))]
    return f


def _loss(a, b, c):
    return (fnp.sum(fnp.sin(S.convolve(a, b, "same"))) + fnp.sum(S.correlate(b, a, "valid") ** 2)
            + fnp.sum(fnp.abs(S.correlate(c, b, "full", "fft")) ** 2))


@pytest.mark.compiled
def test_compiled_equals_interpreter(monkeypatch):
    args = [rand((7,)), rand((4,)), rand((5, 6)), rand((3, 2)), rand((4, 3, 5)), rand((2, 2, 3)),
            rand((3, 4), np.complex128), rand((2, 3), np.complex64)]
    grad_args = [rand((5, 4)), rand((2, 3)), rand((6, 5), np.complex128)]
    xs, ks = rand((3, 6)), rand((3, 4))
    vm = fg.vmap(lambda x, y: S.correlate(x, y, "same"))
    compiled = ([fg.jit(_all_modes(m))(*args) for m in METHODS],
                fg.jit(fg.grad(_loss, (0, 1, 2)))(*grad_args), fg.jit(vm)(xs, ks))
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    interpreted = ([_all_modes(m)(*args) for m in METHODS], fg.grad(_loss, (0, 1, 2))(*grad_args),
                   vm(xs, ks))
    for got_all, want_all in zip(compiled[0], interpreted[0]):
        assert len(got_all) == len(want_all) == 24
        for got, want in zip(got_all, want_all):
            assert got.dtype == want.dtype
            assert_close(got, want, kind(want.dtype))
    for got, want in zip(compiled[1], interpreted[1]):
        assert_close(got, want, "exact64")
    assert_close(compiled[2], interpreted[2], "exact64")
    assert_close(compiled[2], np.stack([ss.correlate(x, y, "same") for x, y in zip(xs, ks)]),
                 "exact64")
