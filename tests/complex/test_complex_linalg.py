"""Complex ``eigh``/``eigvalsh``/``svd``/``svdvals``/``solve``, general ``eig``/``eigvals`` and
``scipy.linalg.sqrtm`` / ``solve_sylvester``: NumPy's and SciPy's values, gradients
against finite differences to second order (losses invariant to the eigenvectors'
phases, which are LAPACK's), forward mode, JAX's gradients, compiled == interpreter
(both code generators), vmap, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.errors import ShapeError
from fusegrad.passes.autodiff import NotDifferentiableError
from fusegrad.scipy import linalg as fsl
from tests.helpers import FD_STEP, assert_close, check_grads, interpreted

L = fnp.linalg
RNG = np.random.default_rng(3)


def crand(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


C4 = crand(4, 4)                          # general complex (eigh reads its lower triangle)
C53 = crand(5, 3)                         # tall complex
R4 = RNG.standard_normal((4, 4))          # general real: two complex eigenvalues
S = RNG.standard_normal((4, 4)) * 0.3 + np.eye(4)
RS4 = (S * np.array([-1.0, 0.5, 2.0, 3.5])) @ np.linalg.inv(S)  # real, real spectrum
SPD = R4 @ R4.T + np.eye(4)
CSH = crand(3, 3) + 4 * np.eye(3)         # complex, eigenvalues near 4
WB = RNG.standard_normal((4, 4))          # weights of the losses
WC = RNG.standard_normal(4)
STACK = crand(3, 4, 4)


# --- values --------------------------------------------------------------------------------


def test_complex_eigh_matches_numpy():
    for uplo in ("L", "U"):
        w, v = L.eigh(C4, UPLO=uplo)
        w0, v0 = np.linalg.eigh(C4, UPLO=uplo)
        assert w.dtype == np.float64 and v.dtype == np.complex128
        assert_close(w, w0, "exact64")
        assert_close(np.abs(v), np.abs(v0), "exact64")  # phases may differ with 'U'
        assert_close(L.eigvalsh(STACK, UPLO=uplo), np.linalg.eigvalsh(STACK, UPLO=uplo),
                     "exact64")
    assert_close(fg.jit(L.eigh)(C4)[1], np.linalg.eigh(C4)[1], "exact64")


def test_complex_svd_matches_numpy():
    for full in (True, False):
        for got, want in zip(L.svd(C53, full_matrices=full),
                             np.linalg.svd(C53, full_matrices=full)):
            assert_close(got, want, "exact64")
    s = L.svdvals(STACK)
    assert s.dtype == np.float64
    assert_close(s, np.linalg.svd(STACK, compute_uv=False), "exact64")
    assert_close(L.svd(C53, compute_uv=False), np.linalg.svd(C53, compute_uv=False), "exact64")


def test_complex_solve_inv_pinv_lstsq_match_numpy():
    assert_close(L.solve(C4, C53[:4]), np.linalg.solve(C4, C53[:4]), "exact64")
    assert_close(fg.jit(L.inv)(STACK), np.linalg.inv(STACK), "exact64")
    assert_close(L.pinv(C53), np.linalg.pinv(C53), "exact64")
    assert_close(L.pinv(C53.T), np.linalg.pinv(C53.T), "exact64")
    b = crand(5)
    for got, want in zip(L.lstsq(C53, b), np.linalg.lstsq(C53, b)):
        assert np.asarray(got).dtype.kind == np.asarray(want).dtype.kind
        assert_close(got, want, "exact64")


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, 2, -2, "nuc", np.inf])
def test_complex_norms_match_numpy(ord):
    got = L.norm(C53, ord)
    assert got.dtype == np.float64
    assert_close(got, np.linalg.norm(C53, ord), "exact64")
    assert_close(L.norm(C53, axis=0), np.linalg.norm(C53, axis=0), "exact64")


def test_eig_is_complex_always_and_matches_numpy():
    for a, dt in [(R4, np.complex128), (RS4, np.complex128), (C4, np.complex128),
                  (R4.astype(np.float32), np.complex64)]:
        w, v = fg.jit(L.eig)(a)
        w0, v0 = np.linalg.eig(a)
        assert w.dtype == v.dtype == dt
        kind = "f32" if dt == np.complex64 else "exact64"
        assert_close(w, w0.astype(dt), kind)
        assert_close(v, v0.astype(dt), kind)
        assert_close(L.eigvals(a), w0.astype(dt), kind)
    w, v = L.eig(STACK)
    assert_close(STACK @ v, v * w[..., None, :], "exact64")
    assert L.eigvals(np.eye(2, dtype=np.int64)).dtype == np.complex128


def test_sqrtm_matches_scipy():
    for a in (SPD, R4 + 4 * np.eye(4), CSH, np.array([[0.0, 1.0], [-1.0, 0.0]])):
        x = fg.jit(fsl.sqrtm)(a)
        assert x.dtype == a.dtype
        assert_close(x, sla.sqrtm(a), "exact64")
        assert_close(x @ x, a, "exact64")
    assert fsl.sqrtm(SPD.astype(np.float32)).dtype == np.float32
    stack = np.stack([SPD, 2 * SPD])
    assert_close(fsl.sqrtm(stack), np.stack([sla.sqrtm(m) for m in stack]), "exact64")


def test_real_sqrtm_with_a_negative_eigenvalue_is_nan():
    """SciPy returns a complex root there; a traced dtype cannot depend on values."""
    neg = np.diag([-4.0, 1.0]) + 0.1
    assert np.iscomplexobj(sla.sqrtm(neg))
    stack = fg.jit(fsl.sqrtm)(np.stack([neg, np.eye(2)]))
    assert np.isnan(stack[0]).all()
    assert_close(stack[1], np.eye(2), "exact64")
    assert_close(fsl.sqrtm(neg.astype(complex)), sla.sqrtm(neg), "exact64")


def test_solve_sylvester_on_stacks_matches_scipy():
    a, b, q = R4[:3, :3] + 4 * np.eye(3), CSH[:2, :2], crand(2, 3, 2)
    got = fsl.solve_sylvester(a, b, q)
    assert got.dtype == np.complex128
    assert_close(got, np.stack([sla.solve_sylvester(a, b, x) for x in q]), "exact64")


# --- gradients: finite differences to second order ---------------------------------------


def _eigh_loss(uplo):
    def f(a):
        w, v = L.eigh(a, UPLO=uplo)
        proj = v[:, :2] @ v[:, :2].conj().T  # the projector onto two eigenvectors
        return fnp.sum(w * WC) + fnp.sum(fnp.abs(v) ** 2 * WB) + fnp.sum(fnp.abs(proj))
    return f


def _svd_loss(a):
    u, s, vh = L.svd(a, full_matrices=False)
    k = s.shape[-1]
    return (fnp.sum(s * WC[:k]) + fnp.sum(fnp.abs(u) ** 2 * WB[0, 0])
            + fnp.sum(fnp.abs(vh) ** 3) + fnp.sum(fnp.abs(u[:, :2] @ vh[:2]) ** 2)
            + fnp.real(fnp.sum(u[:2] * vh[:, :2].T)))  # invariant to a common phase only


def _eig_loss(a):
    w, v = L.eig(a)
    return (fnp.sum(fnp.real(w) * WC + fnp.imag(w) * WC[::-1] + fnp.abs(w) ** 2)
            + fnp.sum(fnp.abs(v) ** 2 * WB))


def _eig_real_vectors_loss(a):
    """Real matrices with real eigenvalues have real eigenvectors: their sign is locally
    constant, so the vectors themselves are differentiable."""
    w, v = L.eig(a)
    return fnp.sum(fnp.real(v) * WB) + fnp.sum(fnp.real(w) ** 2)


def _eigvals_loss(a):
    w = L.eigvals(a)
    return fnp.sum(fnp.real(w * w) * WC) + fnp.sum(fnp.imag(w))


def _sqrtm_loss(a):
    x = fsl.sqrtm(a)
    n = x.shape[-1]
    return fnp.sum(fnp.real(x) * WB[:n, :n]) + fnp.sum(fnp.imag(x) * WB[:n, :n].T)


GRAD_CASES = {
    "eigh-L": (_eigh_loss("L"), C4),
    "eigh-U": (_eigh_loss("U"), C4),
    "eigvalsh-stack": (lambda a: fnp.sum(L.eigvalsh(a) ** 3), STACK[:2, :3, :3]),
    "svd-tall": (_svd_loss, C53),
    "svd-wide": (_svd_loss, C53.T.copy()),
    "svd-square": (_svd_loss, C4),
    "svdvals": (lambda a: fnp.sum(L.svdvals(a) ** 2 * WC[:3]), C53),
    "solve": (lambda a: fnp.sum(fnp.abs(L.solve(a, C53[:4, :2])) ** 2), C4 + 3 * np.eye(4)),
    "norms": (lambda a: L.norm(a) + L.norm(a, 2) + L.norm(a, "nuc"), C53),
    "pinv": (lambda a: fnp.sum(fnp.abs(L.pinv(a)) ** 2 * WB[:3, :]), C53[:4]),
    "lstsq": (lambda a: fnp.sum(fnp.abs(L.lstsq(a, C53[:, 0])[0]) ** 2)
              + fnp.sum(L.lstsq(a, C53[:, 0])[1]), C53[:, ::-1].copy()),
    "eig-real": (_eig_loss, R4),
    "eig-complex": (_eig_loss, C4),
    "eig-real-vectors": (_eig_real_vectors_loss, RS4),
    "eigvals-real": (_eigvals_loss, R4),
    "eigvals-complex": (_eigvals_loss, C4),
    "sqrtm-spd": (_sqrtm_loss, SPD),
    "sqrtm-real": (_sqrtm_loss, R4 + 4 * np.eye(4)),
    "sqrtm-complex": (_sqrtm_loss, CSH),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_finite_differences_to_second_order(name):
    f, a = GRAD_CASES[name]
    check_grads(f, [a], order=2)


def test_solve_sylvester_gradients_in_all_arguments():
    a, b, q = CSH, R4[:2, :2] + 4 * np.eye(2), crand(3, 2)
    check_grads(lambda a, b, q: fnp.sum(fnp.abs(fsl.solve_sylvester(a, b, q)) ** 2),
                [a, b.astype(complex), q], order=2)


def _fd_jvp(f, x, t):
    h = FD_STEP
    return (8 * (f(x + h * t) - f(x - h * t)) - (f(x + 2 * h * t) - f(x - 2 * h * t))) / (12 * h)


@pytest.mark.parametrize("name", ["eigh-L", "svd-tall", "svd-wide", "eig-complex",
                                  "eig-real-vectors", "sqrtm-real", "sqrtm-complex"])
def test_forward_mode_matches_finite_differences(name):
    f, a = GRAD_CASES[name]
    t = RNG.standard_normal(a.shape) + (1j * RNG.standard_normal(a.shape)
                                        if np.iscomplexobj(a) else 0)
    t = t / np.abs(t).max()
    assert_close(fg.jvp(f, (a,), (t,))[1], _fd_jvp(f, a, t), "fd")


def test_eig_vectors_gradient_is_the_real_part_for_real_input():
    g = fg.grad(_eig_loss)(R4)
    assert g.dtype == np.float64


# --- JAX ------------------------------------------------------------------------------------


def test_gradients_match_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def losses(lib, eig):
        def herm(a):  # JAX's eigh symmetrises; fusegrad's reads the lower triangle
            return (a + lib.conj(a.T)) / 2

        def f(a, r):
            w, v = lib.linalg.eigh(herm(a))
            u, s, vh = lib.linalg.svd(a[:, :3], full_matrices=False)
            we, ve = eig(r)
            return (lib.sum(w * WC) + lib.sum(lib.abs(v) ** 2 * WB) + lib.sum(s ** 3)
                    + lib.sum(lib.abs(u) ** 2 * WB[:, :3]) + lib.sum(lib.abs(u[:3] * vh.T) ** 2)
                    + lib.sum(lib.abs(ve) ** 2 * WB) + lib.sum(lib.real(we) ** 3)
                    + lib.sum(lib.imag(lib.linalg.eigvals(a)) ** 2))
        return f

    jeig = lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=False,  # noqa: E731
                                        enable_eigvec_derivs=True)
    want = jax.jit(jax.grad(losses(jnp, jeig), argnums=(0, 1)))(jnp.asarray(C4), jnp.asarray(R4))
    got = fg.grad(losses(fnp, L.eig), argnums=(0, 1))(C4, R4)
    for g, w in zip(got, want):
        assert_close(g, np.asarray(w), "fd")


# --- compiled == interpreter, vmap -------------------------------------------------------------


def _all_losses(c, r):
    return (_eigh_loss("L")(c) + _svd_loss(c[:, :3]) + _eig_loss(r) + _eigvals_loss(c)
            + _sqrtm_loss(r @ r.T + np.eye(4)) + _sqrtm_loss(c[:3, :3] + 4 * np.eye(3))
            + fnp.sum(fnp.abs(fsl.solve_sylvester(r[:3, :3] + 4 * np.eye(3), c[:2, :2]
                                                  + 4 * np.eye(2), c[:3, :2])) ** 2)
            + fnp.sum(fnp.abs(L.inv(c)) ** 2))


@pytest.mark.compiled
def test_compiled_gradients_equal_interpreter():
    grad = fg.value_and_grad(_all_losses, argnums=(0, 1))
    got, want = fg.jit(grad)(C4, R4), interpreted(grad, C4, R4)
    assert_close(got[0], want[0], "exact64")
    for x, y in zip(got[1], want[1]):
        assert x.dtype == y.dtype
        assert_close(x, y, "exact64")


def _small_losses(c, r):
    return (fnp.sum(fnp.abs(L.eig(r)[0]) ** 2) + fnp.sum(fsl.sqrtm(r @ r.T + np.eye(3)))
            + fnp.sum(L.eigvalsh(c) ** 2) + fnp.sum(L.svdvals(c)))


def test_vmap_matches_per_example():
    assert_close(fg.vmap(L.eigvalsh)(STACK), np.linalg.eigvalsh(STACK), "exact64")
    assert_close(fg.vmap(L.eigvals)(STACK), np.linalg.eigvals(STACK), "exact64")
    assert_close(fg.vmap(L.svdvals)(STACK), np.linalg.svd(STACK, compute_uv=False), "exact64")
    shifted = STACK + 4 * np.eye(4)
    assert_close(fg.vmap(fsl.sqrtm)(shifted), np.stack([sla.sqrtm(m) for m in shifted]),
                 "exact64")
    for f in (_eig_loss, _sqrtm_loss, _eigh_loss("L"), _svd_loss):
        g = fg.grad(f)
        assert_close(fg.vmap(g)(shifted), np.stack([g(m) for m in shifted]), "exact64")


# --- errors ------------------------------------------------------------------------------------


def test_errors():
    with pytest.raises(ShapeError, match="square"):
        L.eig(C53)
    with pytest.raises(ShapeError, match="square"):
        fsl.sqrtm(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="two-dimensional"):
        L.eigvals(np.ones(3))
    with pytest.raises(ShapeError, match="complex"):
        L.cholesky(C4)
    with pytest.raises(ShapeError, match="complex"):
        L.qr(C53)
    with pytest.raises(ShapeError, match="float32 or float64"):
        L.eig(np.eye(2, dtype=np.float16))
    with pytest.raises(ShapeError, match=r"\(\.\.\., 3, 2\)"):
        fsl.solve_sylvester(CSH, np.eye(2), np.ones((2, 3)))
    with pytest.raises(ValueError, match="UPLO"):
        L.eigh(C4, UPLO="X")
    with pytest.raises(NotDifferentiableError, match="full_matrices=False"):
        fg.grad(lambda a: fnp.sum(fnp.abs(L.svd(a)[0]) ** 2))(C53)
