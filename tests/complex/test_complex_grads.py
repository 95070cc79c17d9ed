"""Gradients of complex functions against JAX (x64): ``grad`` of real-valued functions of
complex inputs (JAX's convention, ``df/dx - i df/dy``), ``holomorphic=True``, ``vjp`` and
``jvp`` of complex-valued functions, the errors JAX raises, and finite differences on the
real and imaginary parts to second order."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

RNG = np.random.default_rng(1)


def crand(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def right_half(*shape):
    return RNG.uniform(0.3, 2, shape) + 1j * RNG.uniform(-1.5, 1.5, shape)


#: real-valued functions of one complex array, written once for fnp and once for jnp
def _real_fns(np_):
    return {
        "abs2": lambda z: np_.sum(np_.abs(z) ** 2),
        "abs": lambda z: np_.sum(np_.abs(z)),
        "real": lambda z: np_.sum(np_.real(z * z)),
        "imag": lambda z: np_.sum(np_.imag(np_.exp(z)) * 2),
        "conj": lambda z: np_.sum(np_.real(np_.conj(z) * np_.sin(z))),
        "angle": lambda z: np_.sum(np_.angle(z)),
        "log": lambda z: np_.sum(np_.abs(np_.log(z))),
        "sqrt": lambda z: np_.sum(np_.imag(np_.sqrt(z))),
        "div": lambda z: np_.sum(np_.real(1 / (z + 2) + z / (z * z + 3))),
        "pow": lambda z: np_.sum(np_.real(z ** 2.5) + np_.imag(z ** (1 + 0.5j))),
        "trig": lambda z: np_.sum(np_.abs(np_.cos(z) + np_.tan(z) * np_.tanh(z))),
        "hyper": lambda z: np_.sum(np_.real(np_.sinh(z) * np_.cosh(z))),
        "inverse": lambda z: np_.sum(np_.real(np_.arcsinh(z) + np_.arctan(z * 0.3))),
        "expm1": lambda z: np_.sum(np_.imag(np_.expm1(z) + np_.log1p(z))),
        "matmul": lambda z: np_.real(np_.sum(np_.outer(z, z) @ np_.outer(z, z).conj())),
        "mean": lambda z: np_.abs(np_.mean(z * z)),
        "prod": lambda z: np_.real(np_.prod(z)),
        "cumsum": lambda z: np_.sum(np_.abs(np_.cumsum(z)) ** 2),
        "indexing": lambda z: np_.sum(np_.real(z[::-1] * z)) + np_.imag(z[2] * z[0] * z[-1]),
        "concat": lambda z: np_.sum(np_.abs(np_.concatenate([z, z * 1j]))),
        "where": lambda z: np_.sum(np_.where(np_.real(z) > 0.8, np_.real(z), np_.imag(z))),
    }


FNP, JNP = _real_fns(fnp), _real_fns(jnp)


@pytest.mark.parametrize("name", sorted(FNP))
def test_grad_of_real_function_matches_jax(name):
    z = right_half(4)
    got = fg.grad(FNP[name])(z)
    want = np.asarray(jax.grad(JNP[name])(jnp.asarray(z)))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_grad_convention_is_df_dx_minus_i_df_dy():
    """For f(z) = |z|^2 = x^2 + y^2: df/dx - i df/dy = 2x - 2iy = 2 conj(z)."""
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    np.testing.assert_allclose(fg.grad(lambda z: fnp.sum(fnp.abs(z) ** 2))(z), 2 * np.conj(z))
    # imag(z) = y: gradient -i; real(z) = x: gradient 1
    np.testing.assert_allclose(fg.grad(lambda z: fnp.sum(z.imag))(z), [-1j, -1j])
    np.testing.assert_allclose(fg.grad(lambda z: fnp.sum(z.real))(z), [1, 1])


def test_grad_of_mixed_real_and_complex_arguments():
    x, y = RNG.standard_normal(3), crand(3)

    def f(np_):
        return lambda x, y: np_.sum(np_.abs(x * y + 1j * x) ** 2 + np_.real(np_.exp(y) * x))

    got = fg.grad(f(fnp), argnums=(0, 1))(x, y)
    want = jax.grad(f(jnp), argnums=(0, 1))(jnp.asarray(x), jnp.asarray(y))
    assert got[0].dtype == np.float64 and got[1].dtype == np.complex128
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10)


def test_complex_constructor_gradient():
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)

    def f(np_, mk):
        return lambda x, y: np_.sum(np_.abs(np_.sin(mk(x, y))) ** 2)

    got = fg.grad(f(fnp, fnp.complex), argnums=(0, 1))(x, y)
    want = jax.grad(f(jnp, jax.lax.complex), argnums=(0, 1))(jnp.asarray(x), jnp.asarray(y))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10)


@pytest.mark.parametrize("f, jf", [
    (lambda z: fnp.sin(z) * z, lambda z: jnp.sin(z) * z),
    (lambda z: fnp.exp(z) / (z + 1), lambda z: jnp.exp(z) / (z + 1)),
    (lambda z: fnp.log(z) ** 2 + fnp.sqrt(z), lambda z: jnp.log(z) ** 2 + jnp.sqrt(z)),
    (lambda z: z ** 3 - 2j * z, lambda z: z ** 3 - 2j * z),
])
def test_holomorphic_grad_is_the_complex_derivative(f, jf):
    z = 0.7 + 0.4j
    got = fg.grad(f, holomorphic=True)(z)
    want = jax.grad(jf, holomorphic=True)(z)
    np.testing.assert_allclose(got, complex(want), rtol=1e-12)


def test_holomorphic_second_derivative():
    z = 0.3 - 0.8j
    got = fg.grad(fg.grad(lambda z: fnp.exp(z) * z, holomorphic=True), holomorphic=True)(z)
    np.testing.assert_allclose(got, np.exp(z) * (z + 2), rtol=1e-12)


def test_holomorphic_jacobian_matches_jax():
    z = right_half(3)

    def f(np_):
        return lambda z: np_.sin(z) * z[::-1] + np_.exp(z).sum()

    got = fg.jacobian(f(fnp), holomorphic=True)(z)
    want = jax.jacrev(f(jnp), holomorphic=True)(jnp.asarray(z))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12)


def test_errors_as_jax():
    z = np.complex128(1 + 1j)
    with pytest.raises(fg.GradError, match="holomorphic=True"):
        fg.grad(lambda z: z * z)(z)
    with pytest.raises(fg.GradError, match="complex"):
        fg.grad(lambda x: x * x, holomorphic=True)(1.5)
    with pytest.raises(fg.GradError, match="complex scalar"):
        fg.grad(lambda z: fnp.abs(z), holomorphic=True)(z)
    with pytest.raises(fg.GradError, match="holomorphic"):
        fg.jacobian(lambda z: z * 2)(np.array([1j, 2]))


def test_vjp_of_complex_function_matches_jax():
    z, ct = right_half(3), crand(3)

    def f(np_):
        return lambda z: np_.conj(z) * np_.exp(z) + np_.abs(z)

    out, vjp_fn = fg.vjp(f(fnp), z)
    jout, jvjp = jax.vjp(f(jnp), jnp.asarray(z))
    np.testing.assert_allclose(out, np.asarray(jout), rtol=1e-12)
    np.testing.assert_allclose(vjp_fn(ct)[0], np.asarray(jvjp(jnp.asarray(ct))[0]), rtol=1e-10)


def test_jvp_of_complex_function_matches_jax():
    z, t = right_half(3), crand(3)

    def f(np_):
        return lambda z: np_.real(z) * np_.exp(z) + np_.abs(z) + np_.imag(z * z)

    got = fg.jvp(f(fnp), (z,), (t,))
    want = jax.jvp(f(jnp), (jnp.asarray(z),), (jnp.asarray(t),))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10)


def test_hessian_vector_product_of_real_function_of_complex():
    z, v = right_half(3), crand(3)

    def f(np_):
        return lambda z: np_.sum(np_.abs(np_.sin(z)) ** 2)

    got = fg.jvp(fg.grad(f(fnp)), (z,), (v,))[1]
    want = jax.jvp(jax.grad(f(jnp)), (jnp.asarray(z),), (jnp.asarray(v),))[1]
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)


# --- finite differences on real and imaginary parts, to second order ------------------


@pytest.mark.parametrize("name", sorted(FNP))
def test_finite_differences_on_parts(name):
    """``g(x, y) = f(x + iy)`` is a real function of real arrays: check_grads checks its
    gradient (and second derivatives), through complex intermediates."""
    z = right_half(4)
    f = FNP[name]
    check_grads(lambda x, y: f(fnp.complex(x, y)), [z.real.copy(), z.imag.copy()], order=2)


@pytest.mark.parametrize("name", ["abs2", "div", "pow", "matmul", "angle"])
def test_finite_differences_on_complex_parameters(name):
    """check_grads perturbs complex inputs directly (pairing re(sum(u * g)))."""
    check_grads(FNP[name], [right_half(4)], order=2)


# --- compiled ---------------------------------------------------------------------------


@pytest.mark.compiled
def test_compiled_grads_match_jax():
    z = right_half(4)
    names = ["abs2", "real", "imag", "conj", "angle", "div", "pow", "matmul", "trig", "mean"]

    def total(np_, fns):
        return lambda z: sum(fns[n](z) * (k + 1) for k, n in enumerate(names))

    got = fg.grad(total(fnp, FNP))(z)
    want = jax.grad(total(jnp, JNP))(jnp.asarray(z))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)
    got_h = fg.grad(lambda z: fnp.sin(z) * z + z ** 2.5, holomorphic=True)(0.6 + 0.2j)
    want_h = jax.grad(lambda z: jnp.sin(z) * z + z ** 2.5, holomorphic=True)(0.6 + 0.2j)
    np.testing.assert_allclose(got_h, complex(want_h), rtol=1e-12)


def test_control_flow_with_complex_carries_matches_jax():
    """scan, fori_loop (a while loop), cond and while_loop carry complex values and their
    cotangents."""
    z = np.array([0.3 + 0.2j, -0.5 + 0.7j])
    xs = np.array([1j, 0.5, 2.0])

    def f(lib, scan, cond, fori, while_loop):
        def g(z):
            def body(c, x):
                return c * lib.sin(c) + x, lib.abs(c)

            c, ys = scan(body, z, xs)
            c2 = fori(0, 3, lambda i, c: c * (1 + 0.1j) + lib.conj(c) * 0.2, c)
            c3 = cond(lib.real(c2[0]) > 0, lambda c: c * c, lambda c: c + 1j, c2)
            _, c4 = while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * 0.5j + 1), (0, c3))
            return lib.sum(lib.abs(c4) ** 2) + lib.sum(ys)

        return g

    def unrolled_while(cond, body, s):  # JAX has no reverse mode through while_loop
        while cond(s):
            s = body(s)
        return s

    got = fg.grad(f(fnp, fg.scan, fg.cond, fg.fori_loop, fg.while_loop))(z)
    want = jax.grad(f(jnp, jax.lax.scan, jax.lax.cond, jax.lax.fori_loop, unrolled_while))(
        jnp.asarray(z))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)


@pytest.mark.compiled
def test_complex_carries_of_compiled_loops_equal_the_interpreter():
    """Compiled: a loop condition that passes a complex carry over (all its ops lowered,
    the carry's dtype not) runs as a segment around that carry."""
    from tests.helpers import interpreted

    z = np.array([0.3 + 0.2j, -0.5 + 0.7j])

    def g(z):
        c = fg.fori_loop(0, 3, lambda i, c: c * (1 + 0.1j) + fnp.conj(c) * 0.2, z)
        c = fg.cond(fnp.real(c[0]) > 0, lambda c: c * c, lambda c: c + 1j, c)
        _, c = fg.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * 0.5j + 1), (0, c))
        return fnp.sum(fnp.abs(c) ** 2)

    np.testing.assert_allclose(fg.grad(g)(z), interpreted(fg.grad(g), z), rtol=1e-13)


def test_vmap_of_complex_functions_and_their_grads():
    z = right_half(3, 4)

    def f(np_):
        return lambda z: np_.sum(np_.abs(np_.exp(z)) + np_.imag(z * z))

    got = fg.vmap(fg.grad(f(fnp)))(z)
    want = jax.vmap(jax.grad(f(jnp)))(jnp.asarray(z))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10)
    h = lambda z: fnp.conj(z) @ z * z  # noqa: E731
    np.testing.assert_allclose(fg.vmap(h)(z), np.stack([h(r) for r in z]), rtol=1e-12)
