"""``fusegrad.numpy.fft`` against NumPy (values, dtypes, ``n``/``s``/``axes``/``norm``),
gradients against ``jax.vjp``/``jax.grad`` of ``jnp.fft`` and finite differences to
second order, compiled == NumPy, ``vmap``, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import check_grads

RNG = np.random.default_rng(3)
NORMS = [None, "backward", "ortho", "forward"]


def real(*shape):
    return RNG.standard_normal(shape)


def cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


#: (name, keyword arguments, input) covering n/s/axes/norm, padding and truncation
VALUE_CASES = [
    ("fft", {}, cplx(4, 6)), ("fft", {"n": 8}, cplx(4, 6)),
    ("fft", {"n": 3, "axis": 0}, real(4, 6)),
    ("ifft", {"norm": "ortho"}, cplx(5)), ("ifft", {"n": 7, "axis": -2}, cplx(4, 6)),
    ("rfft", {}, real(4, 6)), ("rfft", {"n": 9}, real(4, 6)), ("rfft", {"axis": 0}, real(5, 3)),
    ("irfft", {}, cplx(4, 6)), ("irfft", {"n": 7}, cplx(4, 6)), ("irfft", {"n": 4}, cplx(4, 6)),
    ("irfft", {"axis": 0, "norm": "forward"}, cplx(4, 3)),
    ("fft2", {}, cplx(4, 6)), ("fft2", {"s": (3, 8)}, real(4, 6)), ("ifft2", {}, cplx(2, 4, 6)),
    ("ifft2", {"axes": (0, 2), "norm": "ortho"}, cplx(2, 4, 6)),
    ("fftn", {}, cplx(2, 3, 4)), ("fftn", {"axes": (0, 2)}, cplx(2, 3, 4)),
    ("fftn", {"s": (4, 2), "axes": (1, 0)}, cplx(3, 5)), ("ifftn", {"norm": "forward"}, cplx(3, 4)),
    ("rfftn", {}, real(3, 4, 5)), ("rfftn", {"s": (4, 6), "axes": (0, 1)}, real(3, 5)),
    ("rfft2", {}, real(4, 6)), ("rfft2", {"axes": (1, 0)}, real(4, 6)),
    ("irfftn", {}, cplx(3, 4, 5)), ("irfftn", {"s": (4, 7), "axes": (0, 1)}, cplx(3, 5)),
    ("irfft2", {}, cplx(4, 6)), ("irfft2", {"s": (5, 5)}, cplx(4, 6)),
    ("fftshift", {}, real(4, 5)), ("fftshift", {"axes": 1}, cplx(4, 5)),
    ("ifftshift", {}, real(4, 5)), ("ifftshift", {"axes": (0,)}, real(5, 4)),
]


def _id(case):
    name, kw, x = case
    return f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items())}-{x.dtype}"


@pytest.mark.parametrize("case", VALUE_CASES, ids=[_id(c) for c in VALUE_CASES])
def test_values_match_numpy(case):
    name, kw, x = case
    want = getattr(np.fft, name)(x, **kw)
    f = getattr(fnp.fft, name)
    for got in (f(x, **kw), fg.jit(lambda x: f(x, **kw))(x)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
def test_norms(name, norm):
    x = cplx(6) if name in ("fft", "ifft", "irfft") else real(7)
    np.testing.assert_allclose(fnp.fft.__dict__[name](x, norm=norm),
                               getattr(np.fft, name)(x, norm=norm), rtol=1e-12, atol=1e-12)


def test_single_precision_stays_single_as_in_numpy2():
    x = real(4, 6).astype(np.float32)
    for name in ("fft", "rfft", "fft2", "rfftn"):
        got, want = fnp.fft.__dict__[name](x), getattr(np.fft, name)(x)
        assert got.dtype == want.dtype == np.complex64
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    z = cplx(4, 6).astype(np.complex64)
    assert fnp.fft.irfft(z).dtype == np.fft.irfft(z).dtype == np.float32


def test_numpy_functions_dispatch_on_tracers():
    x = real(8)
    got = fg.jit(lambda x: (np.fft.fft(x), np.fft.rfft(x), np.fft.irfft(np.fft.rfft(x)),
                            np.fft.fftshift(x)))(x)
    np.testing.assert_allclose(got[0], np.fft.fft(x), atol=1e-12)
    np.testing.assert_allclose(got[1], np.fft.rfft(x), atol=1e-12)
    np.testing.assert_allclose(got[2], x, atol=1e-12)
    np.testing.assert_allclose(got[3], np.fft.fftshift(x))


def test_frequencies_are_numpys():
    np.testing.assert_array_equal(fnp.fft.fftfreq(7, 0.5), np.fft.fftfreq(7, 0.5))
    np.testing.assert_array_equal(fnp.fft.rfftfreq(8), np.fft.rfftfreq(8))


def test_errors():
    with pytest.raises(ValueError, match="norm"):
        fnp.fft.fft(cplx(4), norm="bogus")
    with pytest.raises(ValueError):
        fnp.fft.fft(cplx(4), n=0)
    with pytest.raises(ValueError, match="different lengths"):
        fnp.fft.fftn(cplx(4, 4), s=(4,), axes=(0, 1))


# --- gradients ---------------------------------------------------------------------------

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

GRAD_CASES = [
    ("fft", {}, cplx(4, 6)), ("fft", {"n": 8, "norm": "ortho"}, real(4, 6)),
    ("ifft", {"n": 3, "axis": 0}, cplx(4, 6)), ("ifft", {"norm": "forward"}, cplx(5)),
    ("rfft", {}, real(4, 6)), ("rfft", {"n": 7}, real(4, 6)), ("rfft", {"norm": "ortho"}, real(5)),
    ("irfft", {}, cplx(4, 6)), ("irfft", {"n": 7}, cplx(4, 6)), ("irfft", {"n": 3}, cplx(4, 6)),
    ("irfft", {"norm": "forward", "axis": 0}, cplx(4, 3)),
    ("irfft", {"norm": "ortho"}, cplx(5)),
    ("fft2", {}, cplx(3, 4)), ("ifft2", {"s": (4, 5)}, cplx(3, 4)),
    ("fftn", {"axes": (0, 2)}, cplx(2, 3, 4)), ("ifftn", {}, cplx(2, 3)),
    ("rfft2", {}, real(4, 5)), ("rfftn", {"s": (3, 6), "axes": (0, 1)}, real(4, 5)),
    ("irfft2", {}, cplx(4, 4)), ("irfftn", {"s": (3, 5), "axes": (0, 1)}, cplx(4, 4)),
    ("fftshift", {}, cplx(3, 4)), ("ifftshift", {"axes": 0}, real(5, 2)),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[_id(c) for c in GRAD_CASES])
def test_vjp_matches_jax(case):
    name, kw, x = case
    out, vjp_fn = fg.vjp(lambda x: getattr(fnp.fft, name)(x, **kw), x)
    jout, jvjp = jax.vjp(lambda x: getattr(jnp.fft, name)(x, **kw), jnp.asarray(x))
    np.testing.assert_allclose(out, np.asarray(jout), rtol=1e-10, atol=1e-12)
    ct = cplx(*out.shape) if np.iscomplexobj(out) else real(*out.shape)
    np.testing.assert_allclose(vjp_fn(ct)[0], np.asarray(jvjp(jnp.asarray(ct))[0]),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[_id(c) for c in GRAD_CASES])
def test_jvp_matches_jax(case):
    name, kw, x = case
    t = cplx(*x.shape) if np.iscomplexobj(x) else real(*x.shape)
    got = fg.jvp(lambda x: getattr(fnp.fft, name)(x, **kw), (x,), (t,))
    want = jax.jvp(lambda x: getattr(jnp.fft, name)(x, **kw), (jnp.asarray(x),), (jnp.asarray(t),))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)


def test_grad_of_spectral_loss_matches_jax():
    x, w = real(16), real(9)

    def loss(np_):
        def f(x):
            spec = np_.fft.rfft(x * np_.sin(x), norm="ortho")
            y = np_.fft.irfft(spec * w, n=16)
            return np_.sum(np_.abs(spec) ** 2 * w) + np_.sum(y ** 2) + np_.real(np_.fft.fft(x)[3])
        return f

    np.testing.assert_allclose(fg.grad(loss(fnp))(x), np.asarray(jax.grad(loss(jnp))(x)),
                               rtol=1e-10)


@pytest.mark.parametrize("case", GRAD_CASES[::3], ids=[_id(c) for c in GRAD_CASES[::3]])
def test_finite_differences_second_order(case):
    name, kw, x = case
    f = getattr(fnp.fft, name)

    def g(x):
        y = f(x, **kw)
        return fnp.sum(fnp.abs(y) ** 2 * fnp.cos(fnp.real(y)))

    check_grads(g, [x], order=2)


def test_vmap_matches_loop():
    xs = real(3, 4, 6)
    f = lambda x: fnp.fft.irfft(fnp.fft.rfft(x, axis=0) * 2, n=4, axis=0)  # noqa: E731
    got = fg.vmap(f)(xs)
    np.testing.assert_allclose(got, np.stack([f(x) for x in xs]), rtol=1e-12)
    zs = cplx(4, 3, 5)
    got = fg.vmap(lambda z: fnp.fft.fft2(z), in_axes=1)(zs)
    np.testing.assert_allclose(got, np.stack([np.fft.fft2(zs[:, i]) for i in range(3)]),
                               rtol=1e-12)


@pytest.mark.compiled
def test_compiled_values_grads_and_vmap():
    x, z = real(4, 6), cplx(4, 6)

    def f(x, z):
        return (fnp.fft.fft(z), fnp.fft.ifft(x, n=8), fnp.fft.rfft(x, axis=0),
                fnp.fft.irfft(z, n=9), fnp.fft.rfftn(x, norm="ortho"), fnp.fft.irfft2(z),
                fnp.fft.fftshift(z), fnp.fft.ifft2(z, norm="forward"))

    got, want = fg.jit(f)(x, z), f(x, z)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)

    def loss(np_):
        def h(x, z):
            a = np_.fft.rfft(x * x, norm="ortho")
            b = np_.fft.irfft(z, n=7)
            return np_.sum(np_.abs(a) ** 2) + np_.sum(b * np_.sin(b)) + np_.abs(
                np_.fft.fft2(z)).sum()
        return h

    got = fg.grad(loss(fnp), argnums=(0, 1))(x, z)
    want = jax.grad(loss(jnp), argnums=(0, 1))(jnp.asarray(x), jnp.asarray(z))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10)
    xs = real(3, 8)
    np.testing.assert_allclose(fg.jit(fg.vmap(lambda x: fnp.fft.rfft(x)))(xs), np.fft.rfft(xs),
                               rtol=1e-12, atol=1e-12)
