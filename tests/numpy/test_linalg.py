"""fusegrad.numpy.linalg and fusegrad.scipy.linalg: NumPy's / SciPy's values (stacks,
float32), gradients against finite differences to second order, compiled ==
interpreter, vmap, JAX's gradients, and the documented behaviour at degenerate points."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg as sla

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import ops
from fusegrad.ir.types import dtype_name
from fusegrad.passes.autodiff import NotDifferentiableError
from fusegrad.scipy import linalg as fsl
from tests.helpers import assert_close, check_grads, interpreted
from tests.passes.linalg_cases import orthogonal, spread_singular, symmetric, well_conditioned

L = fnp.linalg
RNG = np.random.default_rng(42)


def draw(make, seed=0):
    return make(np.random.default_rng(seed))


SQ = draw(well_conditioned(2, 3, 4, 4))  # a (2, 3) stack of 4x4 matrices
SYM = draw(symmetric(3, 4, 4))
SPD = draw(symmetric(3, 4, 4, lo=0.5, hi=3.0))
TALL = draw(spread_singular(2, 5, 3))
WIDE = draw(spread_singular(3, 5))
B = np.random.default_rng(1).standard_normal((2, 3, 4, 2))
V = np.random.default_rng(2).standard_normal(4)
B5 = np.random.default_rng(7).standard_normal((5, 2))


def _jit(f):
    """``f`` through the tracer (the interpreter runs it: the suite's default)."""
    return lambda *xs: fg.jit(f)(*xs)


# --- values --------------------------------------------------------------------------

VALUE_CASES = {
    "inv": (L.inv, np.linalg.inv, [SQ]),
    "solve-matrix": (L.solve, np.linalg.solve, [SQ, B]),
    "solve-vector": (L.solve, np.linalg.solve, [SQ, V]),
    "solve-broadcast": (L.solve, np.linalg.solve, [SQ[0, 0], B]),
    "det": (L.det, np.linalg.det, [SQ]),
    "slogdet": (lambda a: tuple(L.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)), [SYM]),
    "cholesky": (L.cholesky, np.linalg.cholesky, [SPD]),
    "cholesky-upper": (lambda a: L.cholesky(a, upper=True),
                       lambda a: np.linalg.cholesky(a, upper=True), [np.swapaxes(SPD, 1, 2)]),
    "eigh": (lambda a: tuple(L.eigh(a)), lambda a: tuple(np.linalg.eigh(a)), [SYM]),
    # UPLO='U' runs LAPACK on the transpose's lower triangle: the eigenvectors' signs may
    # differ from NumPy's (which asks LAPACK for the upper one), so compare v * v
    "eigh-U": (lambda a: (L.eigh(a, "U")[0], L.eigh(a, "U")[1] ** 2),
               lambda a: (np.linalg.eigh(a, "U")[0], np.linalg.eigh(a, "U")[1] ** 2),
               [np.swapaxes(SYM, 1, 2)]),
    "eigvalsh": (L.eigvalsh, np.linalg.eigvalsh, [SYM]),
    "svd-reduced": (lambda a: tuple(L.svd(a, False)),
                    lambda a: tuple(np.linalg.svd(a, False)), [TALL]),
    "svd-full": (lambda a: tuple(L.svd(a)), lambda a: tuple(np.linalg.svd(a)), [WIDE]),
    "svd-values": (lambda a: L.svd(a, compute_uv=False),
                   lambda a: np.linalg.svd(a, compute_uv=False), [TALL]),
    "qr-reduced": (lambda a: tuple(L.qr(a)), lambda a: tuple(np.linalg.qr(a)), [TALL]),
    "qr-complete": (lambda a: tuple(L.qr(a, "complete")),
                    lambda a: tuple(np.linalg.qr(a, "complete")), [TALL]),
    "qr-r": (lambda a: L.qr(a, "r"), lambda a: np.linalg.qr(a, "r"), [WIDE]),
    "pinv": (L.pinv, np.linalg.pinv, [TALL]),
    "matrix_power-5": (lambda a: L.matrix_power(a, 5), lambda a: np.linalg.matrix_power(a, 5),
                       [SQ]),
    "matrix_power--3": (lambda a: L.matrix_power(a, -3),
                        lambda a: np.linalg.matrix_power(a, -3), [SQ]),
    "matrix_power-0": (lambda a: L.matrix_power(a, 0), lambda a: np.linalg.matrix_power(a, 0),
                       [SQ]),
    "lstsq-tall": (lambda a, b: L.lstsq(a, b), lambda a, b: np.linalg.lstsq(a, b),
                   [TALL[0], B5]),
    "lstsq-vector": (lambda a, b: L.lstsq(a, b), lambda a, b: np.linalg.lstsq(a, b),
                     [TALL[1], B5[:, 0]]),
    "lstsq-wide": (lambda a, b: L.lstsq(a, b)[0], lambda a, b: np.linalg.lstsq(a, b)[0],
                   [WIDE, V[:3]]),
    "solve_triangular": (lambda a, b: fsl.solve_triangular(a, b, lower=True),
                         lambda a, b: sla.solve_triangular(a, b, lower=True), [SQ[0, 0], B[0, 0]]),
    "solve_triangular-T-unit": (
        lambda a, b: fsl.solve_triangular(a, b, trans="T", unit_diagonal=True),
        lambda a, b: sla.solve_triangular(a, b, trans="T", unit_diagonal=True),
        [SQ[0, 1], V]),
    "cho_factor": (lambda a: fsl.cho_factor(a)[0], lambda a: sla.cho_factor(a)[0],
                   [SPD[0].T]),  # the upper triangle read: the noise is in the lower one
    "cho_solve": (lambda a, b: fsl.cho_solve(fsl.cho_factor(a, lower=True), b),
                  lambda a, b: sla.cho_solve(sla.cho_factor(a, lower=True), b), [SPD[1], B[0, 0]]),
    "expm": (fsl.expm, sla.expm, [SQ[0, 0] * 0.7]),
    "expm-large": (fsl.expm, sla.expm, [SQ[1, 2] * 3.0]),
}

NORM_ORDS = [1, -1, 2, -2, math.inf, -math.inf, "fro", "nuc"]


def _check_values(got, want, kind="exact64"):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if np.asarray(w).dtype.kind == "f":
            assert_close(np.asarray(g), np.asarray(w), kind)
        else:
            assert np.array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_values_match_numpy_and_scipy(name):
    f, ref, args = VALUE_CASES[name]
    want = ref(*args)
    _check_values(f(*args), want)  # on arrays: the op table's NumPy implementations
    _check_values(_jit(f)(*args), want)  # traced


@pytest.mark.parametrize("name", ["inv", "solve-matrix", "det", "cholesky", "eigvalsh",
                                  "svd-values", "qr-r", "pinv", "expm", "solve_triangular"])
def test_float32_stays_float32(name):
    f, ref, args = VALUE_CASES[name]
    args32 = [a.astype(np.float32) for a in args]
    got = _jit(f)(*args32)
    assert np.asarray(got).dtype == np.float32
    _check_values(got, ref(*args).astype(np.float32), "f32")


def test_integer_input_promotes_to_float64():
    a = np.array([[2, 1], [1, 3]])
    assert_close(L.inv(a), np.linalg.inv(a), "exact64")
    assert_close(L.det(a), np.linalg.det(a), "exact64")
    assert L.matrix_power(a, 3).dtype == np.int64  # as NumPy: integer powers stay integer
    assert np.array_equal(L.matrix_power(a, 3), np.linalg.matrix_power(a, 3))


@pytest.mark.parametrize("ord", NORM_ORDS)
def test_matrix_norms_match_numpy(ord):
    x = SQ[0]
    assert_close(_jit(lambda a: L.norm(a, ord, (1, 2)))(x), np.linalg.norm(x, ord, (1, 2)),
                 "exact64")
    assert_close(_jit(lambda a: L.norm(a, ord, (2, 0), True))(x),
                 np.linalg.norm(x, ord, (2, 0), True), "exact64")
    assert_close(_jit(lambda a: L.norm(a, ord))(TALL[0]), np.linalg.norm(TALL[0], ord),
                 "exact64")
    assert_close(_jit(lambda a: np.linalg.norm(a, ord))(WIDE), np.linalg.norm(WIDE, ord),
                 "exact64")  # via the NumPy protocol


def test_numpy_protocol_dispatches_to_fusegrad():
    f = _jit(lambda a: np.linalg.inv(a) + np.linalg.det(a)[..., None, None])
    assert_close(f(SQ), np.linalg.inv(SQ) + np.linalg.det(SQ)[..., None, None], "exact64")


# --- gradients: finite differences to second order -------------------------------------

def weights(shape, like):
    """Fixed weights ``cos(1.3 k + 0.4)`` made inside the trace (a closed-over array would
    become an input of the traced function), in ``like``'s dtype."""
    n = int(np.prod(shape))
    k = ops.reshape(ops.iota(n=n, dtype=dtype_name(np.dtype(like.dtype))), shape=shape)
    return ops.cos(k * 1.3 + 0.4)


NW4 = np.cos(np.arange(16.0).reshape(4, 4) * 1.3 + 0.4)
NW53 = np.cos(np.arange(15.0).reshape(5, 3) * 1.3 + 0.4)


def W4(like):
    return weights((4, 4), like)


def W53(like):
    return weights((5, 3), like)


def _sign_free_eigh(a):
    w, v = L.eigh(a)
    return fnp.sum(w * w) + fnp.sum(W4(a) * v * v)  # v * v: invariant to each column's sign


def _sign_free_svd(a):
    u, s, vt = L.svd(a, full_matrices=False)
    return fnp.sum(s) + fnp.sum(W53(a) * u * u) + fnp.sum((vt * vt)[:, :1])


def _sign_free_qr(a):
    q, r = L.qr(a)
    return fnp.sum(W53(a) * q * q) + fnp.sum(r * r * W53(a)[:3])


def _projector(a):
    """The projector on the two largest eigenvalues' eigenspace: basis-free."""
    _, v = L.eigh(a)
    top = v[:, 2:]
    return fnp.sum(W4(a) * (top @ top.T))


GRAD_CASES = {
    "inv": (lambda a: fnp.sum(W4(a) * L.inv(a)), [SQ[0, 0]]),
    "solve": (lambda a, b: fnp.sum(L.solve(a, b) ** 2), [SQ[0, 0], B[0, 0]]),
    "solve-vector": (lambda a, b: fnp.sum(fnp.sin(L.solve(a, b))), [SQ[0, 0], V]),
    "det": (lambda a: fnp.sum(L.det(a)), [SQ[0]]),
    "slogdet": (lambda a: fnp.sum(L.slogdet(a)[1]), [SYM[:2]]),
    "cholesky": (lambda a: fnp.sum(W4(a) * L.cholesky(a)), [SPD[0]]),
    "cholesky-upper": (lambda a: fnp.sum(W4(a) * L.cholesky(a, upper=True)), [SPD[1].T]),
    "eigh": (_sign_free_eigh, [SYM[0]]),
    "eigh-projector": (_projector, [SYM[1]]),
    "eigvalsh": (lambda a: fnp.sum(L.eigvalsh(a) ** 3), [SYM[2]]),
    "svd": (_sign_free_svd, [TALL[0]]),
    "svd-wide": (lambda a: fnp.sum(L.svd(a, False)[2] ** 2 * weights((3, 5), a)) +
                 fnp.sum(L.svd(a, compute_uv=False) ** 2), [WIDE]),
    "qr": (_sign_free_qr, [TALL[1]]),
    "qr-square": (lambda a: fnp.sum(W4(a) * L.qr(a, "complete")[0] ** 2), [SQ[1, 1]]),
    "pinv": (lambda a: fnp.sum(weights((3, 5), a) * L.pinv(a)), [TALL[0]]),
    "lstsq": (lambda a, b: fnp.sum(L.lstsq(a, b)[0] ** 2) + fnp.sum(L.lstsq(a, b)[1]),
              [TALL[1], NW53[:, 0]]),
    "matrix_power": (lambda a: fnp.sum(W4(a) * L.matrix_power(a, 6)), [SQ[0, 0] / 4]),
    "matrix_power-negative": (lambda a: fnp.sum(W4(a) * L.matrix_power(a, -2)), [SQ[0, 1]]),
    **{f"norm-{o}": (lambda a, o=o: L.norm(a, o), [TALL[0]]) for o in NORM_ORDS},
    "solve_triangular": (lambda a, b: fnp.sum(fsl.solve_triangular(a, b, trans=1) ** 2),
                         [SQ[0, 0], B[0, 0]]),
    "cho_solve": (lambda a, b: fnp.sum(fsl.cho_solve(fsl.cho_factor(a), b) ** 2),
                  [SPD[2].T, B[1, 1]]),
    "cho_factor": (lambda a: fnp.sum(W4(a) * fsl.cho_factor(a, lower=True)[0]), [SPD[2]]),
    "expm": (lambda a: fnp.sum(W4(a) * fsl.expm(a)), [SQ[0, 0] * 0.5]),
    "expm-scaled": (lambda a: fnp.sum(W4(a) * fsl.expm(a)), [SQ[1, 0] * 2.0]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_finite_differences_to_second_order(name):
    f, args = GRAD_CASES[name]
    check_grads(f, args, order=2)


# --- compiled == interpreter ------------------------------------------------------------


def _all_losses(a, spd, sym, tall, b):
    """Many of the functions at once, so one compile covers them."""
    return (fnp.sum(W4(a) * L.inv(a)) + L.det(a) + fnp.sum(L.solve(a, b) ** 2)
            + fnp.sum(W4(a) * L.cholesky(spd)) + _sign_free_eigh(sym) + _sign_free_svd(tall)
            + _sign_free_qr(tall) + fnp.sum(weights((3, 5), a) * L.pinv(tall))
            + fnp.sum(W4(a) * L.matrix_power(a, -3)) + L.norm(tall, 2) + L.norm(tall, "nuc")
            + fnp.sum(fsl.solve_triangular(a, b, lower=True, trans=1) ** 2)
            + fnp.sum(fsl.cho_solve(fsl.cho_factor(spd, lower=True), b))
            + fnp.sum(W4(a) * fsl.expm(a / 2))
            + fnp.sum(W4(a) * L.qr(a, "complete")[0] ** 2) + fnp.sum(L.slogdet(a)[1]))


@pytest.mark.compiled
def test_compiled_gradients_equal_interpreter():
    args = (SQ[0, 0], SPD[0], SYM[0], TALL[0], B[0, 0])
    grad = fg.grad(_all_losses, argnums=(0, 1, 2, 3, 4))
    for x, y in zip(fg.jit(grad)(*args), interpreted(grad, *args)):
        assert_close(x, y, "exact64")


def _f32_losses(a, spd, tall, b):
    return (fnp.sum(L.inv(a) ** 2) + fnp.sum(L.cholesky(spd)) + fnp.sum(L.eigvalsh(spd) ** 2)
            + fnp.sum(L.svd(tall, compute_uv=False)) + fnp.sum(L.qr(tall, "r") ** 2)
            + fnp.sum(fsl.solve_triangular(a, b) ** 2) + L.slogdet(a)[1])


@pytest.mark.compiled
def test_compiled_float32_gradients_equal_interpreter():
    args = [x.astype(np.float32) for x in (SQ[0, 0], SPD[0], TALL[0], B[0, 0])]
    grad = fg.grad(_f32_losses, argnums=(0, 1, 2, 3))
    for x, y in zip(fg.jit(grad)(*args), interpreted(grad, *args)):
        assert x.dtype == np.float32
        assert_close(x, y, "f32")


@pytest.mark.compiled
def test_compiled_batched_values_equal_numpy():
    f = fg.jit(lambda a, spd, sym, tall: (L.inv(a), L.slogdet(a)[1], L.cholesky(spd),
                                          L.eigvalsh(sym), L.svd(tall, compute_uv=False),
                                          L.qr(tall, "complete")[1], L.det(a[0, 0])))
    got = f(SQ, SPD, SYM, TALL)
    want = (np.linalg.inv(SQ), np.linalg.slogdet(SQ)[1], np.linalg.cholesky(SPD),
            np.linalg.eigvalsh(SYM), np.linalg.svd(TALL, compute_uv=False),
            np.linalg.qr(TALL, "complete")[1], np.linalg.det(SQ[0, 0]))
    for x, y in zip(got, want):
        assert_close(x, y, "exact64")


# --- vmap -------------------------------------------------------------------------------


def test_vmap_matches_stacked_numpy():
    a = SQ[0]
    assert_close(fg.vmap(L.inv)(a), np.linalg.inv(a), "exact64")
    assert_close(fg.vmap(L.solve, in_axes=(0, None))(a, V), np.linalg.solve(a, V), "exact64")
    assert_close(fg.vmap(lambda x: L.eigh(x)[0])(SYM), np.linalg.eigvalsh(SYM), "exact64")
    assert_close(fg.vmap(fsl.expm)(a * 0.3), np.stack([sla.expm(x * 0.3) for x in a]),
                 "exact64")
    along1 = np.moveaxis(SQ[1], 0, 1)  # the batch on axis 1
    assert_close(fg.vmap(lambda x: fsl.solve_triangular(x, V, lower=True), in_axes=1)(along1),
                 np.stack([sla.solve_triangular(x, V, lower=True) for x in SQ[1]]), "exact64")


def test_vmap_of_grad_matches_per_example_grads():
    g = fg.grad(lambda x: L.slogdet(x)[1] + fnp.sum(L.svd(x, compute_uv=False)))
    got = fg.vmap(g)(SQ[1])
    want = np.stack([g(x) for x in SQ[1]])
    assert_close(got, want, "exact64")
    assert_close(got[0], np.linalg.inv(SQ[1, 0]).T + (lambda u, s, vt: u @ vt)(
        *np.linalg.svd(SQ[1, 0])), "exact64")


# --- JAX ----------------------------------------------------------------------------------


JAX_CASES = {
    "inv": (lambda L_, a: (L_.inv(a) * NW4).sum(), SQ[0, 0]),
    "slogdet": (lambda L_, a: L_.slogdet(a)[1], SQ[0, 1]),
    "det": (lambda L_, a: L_.det(a), SQ[0, 2]),
    # JAX's eigh reads (a + a.T) / 2, NumPy's (and fusegrad's) the lower triangle: the
    # same function once the argument is symmetrised explicitly
    "eigvalsh-sym": (lambda L_, a: (L_.eigvalsh((a + a.T) / 2) ** 3).sum(), SYM[0]),
    "svd-values": (lambda L_, a: (L_.svd(a, compute_uv=False) ** 2).sum(), TALL[0]),
    "pinv": (lambda L_, a: (L_.pinv(a) * NW53.T).sum(), TALL[1]),
    "matrix_power": (lambda L_, a: (L_.matrix_power(a, 4) * NW4).sum(), SQ[1, 1] / 4),
}


@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_gradients_match_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    f, a = JAX_CASES[name]
    want = np.asarray(jax.grad(lambda x: f(jnp.linalg, x))(a))
    assert_close(fg.grad(lambda x: f(L, x))(a), want, "fd")


def test_scipy_gradients_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.scipy.linalg as jsl

    a, b = SQ[0, 0], B[0, 0]
    for fs, fj in [((lambda x: (fsl.expm(x / 2) * NW4).sum()),
                    (lambda x: (jsl.expm(x / 2) * NW4).sum())),
                   ((lambda x: (fsl.solve_triangular(x, b, lower=True) ** 2).sum()),
                    (lambda x: (jsl.solve_triangular(x, b, lower=True) ** 2).sum()))]:
        assert_close(fg.grad(fs)(a), np.asarray(jax.grad(fj)(a)), "fd")


# --- degenerate points and refusals --------------------------------------------------------


def test_eigvalsh_gradient_at_repeated_eigenvalues():
    """``V diag(g) V^T`` needs no eigenvalue gaps: the gradient of the trace is I."""
    a = np.eye(4) * 2.0
    assert_close(fg.grad(lambda x: fnp.sum(L.eigvalsh(x)))(a), np.eye(4), "exact64")
    g = fg.grad(lambda x: fnp.sum(L.eigvalsh(x) ** 2))(a)
    assert_close(g, 4.0 * np.eye(4), "exact64")  # d tr(A^2) = 2A, lower triangle read


def test_eigh_projector_gradient_at_repeated_eigenvalues_is_finite_and_exact():
    """Repeated eigenvalues inside the eigenspace of a basis-free loss: dropping their
    ``1 / 0`` terms gives the exact gradient of the projector (lower triangle read)."""
    q = orthogonal(np.random.default_rng(5), 4)
    a = (q * np.array([1.0, 1.0, 3.0, 3.0])) @ q.T

    def via_eigh(x):
        _, v = L.eigh(x)
        return fnp.sum(NW4 * (v[:, 2:] @ v[:, 2:].T))

    g = fg.grad(via_eigh)(a)
    p = q[:, 2:] @ q[:, 2:].T  # dP = ((I - P) dA P + P dA (I - P)) / (3 - 1)
    cross = lambda m: p @ m @ (np.eye(4) - p) + (np.eye(4) - p) @ m @ p  # noqa: E731
    sym = lambda m: np.tril(m + m.T) - np.diag(np.diag(m))  # noqa: E731
    assert_close(g, sym(cross(NW4 + NW4.T) / 4.0), "exact64")


def test_svd_values_gradient_at_repeated_singular_values():
    q = orthogonal(np.random.default_rng(6), 3)
    g = fg.grad(lambda x: L.norm(x, "nuc"))(2.0 * q)
    assert_close(g, q, "exact64")  # d sum(s) = U V^T


def test_det_gradient_at_a_singular_matrix_raises():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert L.det(a) == 0.0
    with pytest.raises(np.linalg.LinAlgError, match=r"[Ss]ingular"):
        fg.grad(L.det)(a)


def test_full_svd_of_non_square_matrix_is_not_differentiable_through_factors():
    with pytest.raises(NotDifferentiableError, match="full_matrices=False"):
        fg.grad(lambda x: fnp.sum(L.svd(x)[0]))(TALL[0])
    g = fg.grad(lambda x: fnp.sum(L.svd(x)[1]))(TALL[0])  # singular values alone: fine
    u, _, vt = np.linalg.svd(TALL[0], full_matrices=False)
    assert_close(g, u @ vt, "exact64")


def test_qr_of_wide_matrix_is_not_differentiable():
    with pytest.raises(NotDifferentiableError, match="wide"):
        fg.grad(lambda x: fnp.sum(L.qr(x)[1]))(WIDE)


def test_errors_name_the_shapes():
    with pytest.raises(ValueError, match="square"):
        L.inv(TALL[0])
    with pytest.raises(ValueError, match="two-dimensional"):
        L.det(V)
    with pytest.raises(ValueError, match="does not match"):
        L.solve(SQ[0, 0], np.ones(3))
    with pytest.raises(TypeError, match="integer"):
        L.matrix_power(SQ[0, 0], 1.5)
    with pytest.raises(ValueError, match="float32 or float64"):
        L.inv(SQ[0, 0].astype(np.float16))
