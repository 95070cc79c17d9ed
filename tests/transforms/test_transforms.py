"""The functional transforms of ``fusegrad.transforms`` (SEMANTICS.md, "Functional API").

grad / value_and_grad (argnums, has_aux, pytrees, dtypes), nested derivatives
and perturbation confusion, vjp, jacobian, hessian, elementwise_grad,
stop_gradient, custom_vjp, jit and its cache, make_ir and the stage IR.
Derivatives are checked against closed forms ("exact64") or against central
finite differences of the plain function ("fd").
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.parser import parse_function
from fusegrad.ir.verifier import verify
from fusegrad.transforms.inspection import STAGES, stages
from tests.helpers import FD_STEP, assert_close

RNG = np.random.default_rng(1234)


def numeric_grad(f, x, step: float = FD_STEP):
    """d f / d x for scalar ``f`` of one float64 array ``x``, by the 4-point central stencil."""
    x = np.asarray(x, dtype=np.float64)
    h = step * max(1.0, float(np.abs(x).max(initial=0.0)))
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):

        def at(t, i=i):
            moved = x.copy()
            moved[i] += t
            return float(f(moved))

        out[i] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)
    return out


def numeric_jacobian(f, x, step: float = FD_STEP):
    """Jacobian of array-valued ``f`` at ``x``, shape ``f(x).shape + x.shape``."""
    out_shape = np.shape(f(x))
    jac = np.zeros(out_shape + np.shape(x))
    for j in np.ndindex(out_shape):
        jac[j] = numeric_grad(lambda z, j=j: np.asarray(f(z))[j], x, step)
    return jac


# --- grad: decorator, argnums, value_and_grad, has_aux ------------------------------


def test_grad_as_bare_decorator():
    @fg.grad
    def df(x):
        return fnp.sum(fnp.sin(x) * x)

    x = np.linspace(0, 1, 7)
    assert_close(df(x), np.cos(x) * x + np.sin(x), "exact64")
    assert df.__name__ == "df"


def f_xy(x, y):
    return x * y * y + fnp.sin(x)


@pytest.mark.parametrize(
    ("argnums", "expected"),
    [
        (0, lambda x, y: y * y + np.cos(x)),
        (1, lambda x, y: 2 * x * y),
        (-1, lambda x, y: 2 * x * y),
        (-2, lambda x, y: y * y + np.cos(x)),
        ((0, 1), lambda x, y: (y * y + np.cos(x), 2 * x * y)),
        ((1, 0), lambda x, y: (2 * x * y, y * y + np.cos(x))),
        ((0,), lambda x, y: (y * y + np.cos(x),)),
        ((1, 1), lambda x, y: (2 * x * y, 2 * x * y)),
    ],
)
def test_grad_argnums(argnums, expected):
    x, y = 0.7, -1.3
    got = fg.grad(f_xy, argnums=argnums)(x, y)
    want = expected(x, y)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, np.asarray(w), "exact64")
    else:
        assert_close(got, np.asarray(want), "exact64")


def test_grad_argnums_order_with_different_shapes():
    x, y = RNG.standard_normal(4), RNG.standard_normal((3, 1))
    gy, gx = fg.grad(lambda x, y: fnp.sum(x * y * y), argnums=(1, 0))(x, y)
    assert gy.shape == (3, 1) and gx.shape == (4,)
    assert_close(gy, 2 * y * x.sum(), "exact64")
    assert_close(gx, np.full(4, (y * y).sum()), "exact64")


def test_grad_partial_decorator_form():
    @fg.grad(argnums=1)
    def df(x, y):
        return x * y**3

    assert_close(df(2.0, 3.0), np.asarray(2.0 * 27.0), "exact64")


def test_grad_keyword_arguments_are_not_differentiated():
    def f(x, scale=1.0):
        return scale * x * x

    assert_close(fg.grad(f)(3.0, scale=5.0), np.asarray(30.0), "exact64")


def test_value_and_grad():
    x = np.array([0.3, -1.2, 2.0])
    value, g = fg.value_and_grad(lambda x: fnp.sum(fnp.exp(x) * x))(x)
    assert_close(value, np.sum(np.exp(x) * x), "exact64")
    assert_close(g, np.exp(x) * (x + 1), "exact64")


def test_value_and_grad_argnums_tuple():
    value, (gx, gy) = fg.value_and_grad(f_xy, argnums=(0, 1))(0.5, 2.0)
    assert_close(value, np.asarray(0.5 * 4 + np.sin(0.5)), "exact64")
    assert_close(gx, np.asarray(4 + np.cos(0.5)), "exact64")
    assert_close(gy, np.asarray(2.0), "exact64")


def test_grad_has_aux():
    def f(x):
        loss = fnp.sum(x * x)
        return loss, {"mean": fnp.mean(x), "twice": 2 * x}

    x = np.array([1.0, -2.0, 4.0])
    g, aux = fg.grad(f, has_aux=True)(x)
    assert_close(g, 2 * x, "exact64")
    assert set(aux) == {"mean", "twice"}
    assert_close(aux["mean"], np.asarray(1.0), "exact64")
    assert_close(aux["twice"], 2 * x, "exact64")


def test_value_and_grad_has_aux():
    def f(x, y):
        return x * y, (x + 1, y - 1)

    (value, aux), g = fg.value_and_grad(f, argnums=1, has_aux=True)(2.0, 5.0)
    assert_close(value, np.asarray(10.0), "exact64")
    assert_close(aux[0], np.asarray(3.0), "exact64")
    assert_close(aux[1], np.asarray(4.0), "exact64")
    assert_close(g, np.asarray(2.0), "exact64")


def test_has_aux_without_a_pair_is_an_error():
    with pytest.raises(fg.GradError, match="has_aux"):
        fg.grad(lambda x: x * x, has_aux=True)(1.0)


# --- pytrees ------------------------------------------------------------------------


class Params(NamedTuple):
    w: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class Layer:
    w: np.ndarray
    b: np.ndarray


def _model_loss(w, b, x):
    return fnp.sum(fnp.tanh(x @ w + b) ** 2)


X = RNG.standard_normal((5, 3))
W0 = RNG.standard_normal((3, 2))
B0 = RNG.standard_normal(2)


def _expected_model_grads():
    gw = numeric_grad(lambda w: _model_loss(w, B0, X), W0)
    gb = numeric_grad(lambda b: _model_loss(W0, b, X), B0)
    return gw, gb


@pytest.mark.parametrize(
    ("pack", "unpack"),
    [
        (lambda w, b: {"w": w, "b": b}, lambda p: (p["w"], p["b"])),
        (lambda w, b: (w, b), lambda p: p),
        (lambda w, b: [w, b], lambda p: tuple(p)),
        (Params, lambda p: (p.w, p.b)),
        (Layer, lambda p: (p.w, p.b)),
        (lambda w, b: {"layer": Params(w, b), "extra": ()}, lambda p: tuple(p["layer"])),
    ],
    ids=["dict", "tuple", "list", "namedtuple", "dataclass", "nested"],
)
def test_grad_over_pytrees_keeps_the_structure(pack, unpack):
    params = pack(W0, B0)
    grads = fg.grad(lambda p, x: _model_loss(*unpack(p), x))(params, X)
    assert fg.tree.structure(grads) == fg.tree.structure(params)
    assert type(grads) is type(params)
    gw, gb = unpack(grads)
    want_w, want_b = _expected_model_grads()
    assert_close(gw, want_w, "fd")
    assert_close(gb, want_b, "fd")


class Affine:
    """A plain class made a pytree with ``fg.tree.register``."""

    def __init__(self, w, b, name="affine"):
        self.w, self.b, self.name = w, b, name


fg.tree.register(Affine, lambda a: ((a.w, a.b), a.name), lambda name, ch: Affine(*ch, name))


def test_grad_over_a_registered_class():
    g = fg.grad(lambda p, x: _model_loss(p.w, p.b, x))(Affine(W0, B0, "layer1"), X)
    assert isinstance(g, Affine) and g.name == "layer1"
    want_w, want_b = _expected_model_grads()
    assert_close(g.w, want_w, "fd")
    assert_close(g.b, want_b, "fd")


def test_grad_dtypes_follow_numpy_promotion():
    g = fg.grad(lambda x: x**3)(3.0)
    assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == ()
    assert_close(g, np.asarray(27.0), "exact64")
    x32 = np.array([1.0, 2.0, 3.0], np.float32)
    g32 = fg.grad(lambda x: fnp.sum(x * 2.0 + x**2))(x32)
    assert g32.dtype == np.float32
    assert_close(g32, (2 + 2 * x32).astype(np.float32), "f32")
    s32 = fg.grad(lambda x: x * x)(np.float32(1.5))
    assert s32.dtype == np.float32
    assert_close(s32, np.float32(3.0), "f32")


@pytest.mark.xfail(
    strict=True,
    reason="a Python scalar passed as an argument becomes a strong float64 parameter "
    "(TensorType has no weak flag), so it promotes float32 arrays to float64; JAX keeps "
    "it weakly typed and returns float32",
)
def test_python_scalar_argument_is_weak():
    x32 = np.ones(2, np.float32)
    assert fg.jit(lambda x, s: x * s)(x32, 2.0).dtype == np.float32
    value, _ = fg.value_and_grad(lambda x, s: fnp.sum(x * s))(x32, 2.0)
    assert value.dtype == np.float32


# --- higher order and perturbation confusion -----------------------------------------


@pytest.mark.parametrize(
    ("f", "derivs"),
    [
        (lambda x: x**4, lambda x: (4 * x**3, 12 * x**2, 24 * x)),
        (lambda x: x * x * x * x, lambda x: (4 * x**3, 12 * x**2, 24 * x)),
        (fnp.sin, lambda x: (np.cos(x), -np.sin(x), -np.cos(x))),
        (fnp.exp, lambda x: (np.exp(x),) * 3),
        (lambda x: x * fnp.log(x), lambda x: (np.log(x) + 1, 1 / x, -1 / x**2)),
    ],
    ids=["pow4", "mul4", "sin", "exp", "xlogx"],
)
def test_nested_grad_to_third_order(f, derivs):
    x = 2.0
    d1, d2, d3 = derivs(x)
    assert_close(fg.grad(f)(x), np.asarray(d1), "exact64")
    assert_close(fg.grad(fg.grad(f))(x), np.asarray(d2), "exact64")
    assert_close(fg.grad(fg.grad(fg.grad(f)))(x), np.asarray(d3), "exact64")


def test_third_order_x4_exact_values():
    assert float(fg.grad(fg.grad(fg.grad(lambda x: x**4)))(2.0)) == 48.0
    assert float(fg.grad(fg.grad(lambda x: x**4))(3.0)) == 108.0


@pytest.mark.parametrize(
    ("f", "x", "expected"),
    [
        # d/dx [x * d/dy (x + y)] = d/dx x = 1 (Siskind & Pearlmutter)
        (lambda x: x * fg.grad(lambda y: x + y)(1.0), 1.0, 1.0),
        # d/dx [x * d/dy (x * y)] = d/dx x**2 = 2x
        (lambda x: x * fg.grad(lambda y: x * y)(1.0), 3.0, 6.0),
        # d/dx [d/dy (x y**2) at y = x] = d/dx 2 x**2 = 4x
        (lambda x: fg.grad(lambda y: x * y * y)(x), 3.0, 12.0),
        # d/dx [d/dy sin(x y) at y = 1] = d/dx x cos x = cos x - x sin x
        (lambda x: fg.grad(lambda y: fnp.sin(x * y))(1.0), 0.8,
         np.cos(0.8) - 0.8 * np.sin(0.8)),
        # three levels: d/dy d/dz (x y z) = x, so d/dx = 1
        (lambda x: fg.grad(lambda y: fg.grad(lambda z: x * y * z)(2.0))(3.0), 5.0, 1.0),
        # d/dy [x y d/dz (x z)] = x**2, so d/dx = 2x
        (lambda x: fg.grad(lambda y: x * y * fg.grad(lambda z: x * z)(2.0))(3.0), 5.0, 10.0),
    ],
)
def test_perturbation_confusion(f, x, expected):
    assert_close(fg.grad(f)(x), np.asarray(expected), "exact64")


def test_perturbation_confusion_exact_one():
    assert fg.grad(lambda x: x * fg.grad(lambda y: x + y)(1.0))(1.0) == 1.0


def test_pinn_style_loss_gradient_wrt_weights():
    """Loss built from u''(x), u closing over the weights, differentiated w.r.t. the weights."""
    rng = np.random.default_rng(7)
    w1, b1, w2 = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)
    xs = np.linspace(-1.0, 1.0, 5)

    def loss(w1, b1, w2):
        def u(x):
            return fnp.sum(fnp.tanh(x * w1 + b1) * w2)

        u_xx = fg.grad(fg.grad(u))
        total = 0.0
        for x in xs:
            r = u_xx(x) + np.sin(np.pi * x)
            total = total + r * r
        return total

    grads = fg.grad(loss, argnums=(0, 1, 2))(w1, b1, w2)
    assert_close(grads[0], numeric_grad(lambda w: loss(w, b1, w2), w1), "fd")
    assert_close(grads[1], numeric_grad(lambda b: loss(w1, b, w2), b1), "fd")
    assert_close(grads[2], numeric_grad(lambda w: loss(w1, b1, w), w2), "fd")


# --- vjp, jacobian, hessian, elementwise_grad ----------------------------------------


def test_vjp_with_pytree_primals():
    p = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array([0.5, -1.0, 2.0])}
    out, vjp_fn = fg.vjp(lambda p: fnp.sin(p["a"]) * p["b"], p)
    assert_close(out, np.sin(p["a"]) * p["b"], "exact64")
    ct = np.array([1.0, -2.0, 0.5])
    (g,) = vjp_fn(ct)
    assert set(g) == {"a", "b"}
    assert_close(g["a"], ct * np.cos(p["a"]) * p["b"], "exact64")
    assert_close(g["b"], ct * np.sin(p["a"]), "exact64")


def test_vjp_dict_cotangent_in_another_key_order():
    x = np.array([1.0, 2.0])
    out, vjp_fn = fg.vjp(lambda x: {"b": x * 3.0, "a": fnp.sum(x)}, x)
    assert list(out) == ["b", "a"]
    (g,) = vjp_fn({"a": 2.0, "b": np.array([1.0, -1.0])})
    assert_close(g, np.array([3.0 + 2.0, -3.0 + 2.0]), "exact64")


def test_grad_dict_keeps_the_insertion_order():
    g = fg.grad(lambda p: p["z"] * p["a"] ** 2)({"z": 2.0, "a": 3.0})
    assert list(g) == ["z", "a"]
    assert_close(g["z"], np.asarray(9.0), "exact64")
    assert_close(g["a"], np.asarray(12.0), "exact64")


def test_vjp_several_primals_and_pytree_output():
    x, y = np.array([1.0, 2.0]), 3.0
    out, vjp_fn = fg.vjp(lambda x, y: (x * y, fnp.sum(x) * y), x, y)
    assert_close(out[0], x * y, "exact64")
    assert_close(out[1], np.asarray(9.0), "exact64")
    gx, gy = vjp_fn((np.array([1.0, 10.0]), 2.0))
    assert_close(gx, np.array([1.0, 10.0]) * y + 2.0 * y, "exact64")
    assert_close(gy, np.asarray(1.0 * 1 + 10.0 * 2 + 2.0 * 3), "exact64")


def test_vjp_has_aux():
    x = np.array([0.5, 1.5])
    out, vjp_fn, aux = fg.vjp(lambda x: (x * x, {"n": fnp.sum(x)}), x, has_aux=True)
    assert_close(out, x * x, "exact64")
    assert_close(aux["n"], np.asarray(2.0), "exact64")
    (g,) = vjp_fn(np.array([1.0, 3.0]))
    assert_close(g, 2 * x * np.array([1.0, 3.0]), "exact64")


def _vec_fn(x):
    return fnp.sin(x)[:, None] * fnp.exp(x)[None, :] + fnp.sum(x * x)


def test_jacobian_against_finite_differences():
    x = np.array([0.3, -0.7, 1.1])
    jac = fg.jacobian(_vec_fn)(x)
    assert jac.shape == (3, 3, 3)
    assert_close(jac, numeric_jacobian(_vec_fn, x), "fd")


def test_jacobian_shape_is_out_shape_plus_in_shape():
    x = RNG.standard_normal((2, 3))
    jac = fg.jacobian(lambda x: x.T @ x)(x)
    assert jac.shape == (3, 3, 2, 3)
    assert_close(jac, numeric_jacobian(lambda z: z.T @ z, x), "fd")
    assert fg.jacobian(lambda x: fnp.sum(x * x))(x).shape == (2, 3)


def test_jacobian_pytree_input_and_argnums():
    p = {"a": np.array([1.0, 2.0]), "s": 3.0}
    jac = fg.jacobian(lambda p: p["a"] * p["s"])(p)
    assert_close(jac["a"], 3.0 * np.eye(2), "exact64")
    assert_close(jac["s"], np.array([1.0, 2.0]), "exact64")
    jx, jy = fg.jacobian(lambda x, y: x * y, argnums=(0, 1))(np.array([1.0, 2.0]), 4.0)
    assert_close(jx, 4.0 * np.eye(2), "exact64")
    assert_close(jy, np.array([1.0, 2.0]), "exact64")


def test_hessian_of_a_quadratic_form():
    a = RNG.standard_normal((4, 4))
    x = RNG.standard_normal(4)
    h = fg.hessian(lambda x: x @ a @ x)(x)
    assert_close(h, a + a.T, "exact64")


def test_hessian_against_finite_differences():
    def f(x):
        return fnp.sum(fnp.exp(x[0] * x) * fnp.tanh(x))

    x = np.array([0.2, -0.5, 0.9])
    h = fg.hessian(f)(x)
    assert h.shape == (3, 3)
    assert_close(h, h.T, "exact64")
    assert_close(h, numeric_jacobian(lambda z: fg.grad(f)(z), x), "fd")


def test_elementwise_grad():
    x = np.linspace(-2, 2, 9)
    assert_close(fg.elementwise_grad(fnp.tanh)(x), 1 - np.tanh(x) ** 2, "exact64")
    got = fg.elementwise_grad(lambda a, x: a * fnp.sin(x), argnums=1)(2.0, x)
    assert_close(got, 2.0 * np.cos(x), "exact64")
    got = fg.elementwise_grad(lambda a, x: a * fnp.sin(x), argnums=-1)(2.0, x)
    assert_close(got, 2.0 * np.cos(x), "exact64")


# --- stop_gradient and custom_vjp --------------------------------------------------


def test_stop_gradient_value_unchanged_gradient_zero():
    x = np.array([1.0, -2.0, 3.0])
    assert_close(fg.stop_gradient(x), x, "exact64")
    assert_close(fg.grad(lambda x: fnp.sum(fg.stop_gradient(x) ** 2))(x), np.zeros(3), "exact64")
    # the gradient flows only through the unstopped factor
    assert_close(fg.grad(lambda x: fnp.sum(fg.stop_gradient(x) * x))(x), x, "exact64")
    tree = fg.stop_gradient({"a": x, "b": 2.0})
    assert_close(tree["a"], x, "exact64")
    assert_close(tree["b"], np.asarray(2.0), "exact64")


def test_custom_vjp_uses_fwd_and_bwd():
    calls = []

    @fg.custom_vjp
    def f(x):
        return fnp.sin(x)

    def f_fwd(x):
        calls.append("fwd")
        return fnp.sin(x), fnp.cos(x)

    def f_bwd(cos_x, g):
        calls.append("bwd")
        return (10.0 * g * cos_x,)

    f.defvjp(f_fwd, f_bwd)
    x = np.array([0.0, 0.5, 1.0])
    assert_close(f(x), np.sin(x), "exact64")
    assert calls == []
    g = fg.grad(lambda x: fnp.sum(f(x)))(x)
    assert_close(g, 10.0 * np.cos(x), "exact64")
    assert calls == ["fwd", "bwd"]


@fg.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return (None, None, fnp.clip(g, lo, hi))


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_gradient_clipping():
    x = np.ones(3)
    w = np.array([0.5, 3.0, -7.0])
    g = fg.grad(lambda x: fnp.sum(clip_gradient(-1.0, 1.0, x) * w))(x)
    assert_close(g, np.array([0.5, 1.0, -1.0]), "exact64")
    assert_close(clip_gradient(-1.0, 1.0, w), w, "exact64")


def test_custom_vjp_inside_grad_inside_grad():
    # f = c(x) * x with c the identity whose gradient is clipped to [-1, 1]:
    # f' = clip(x, -1, 1) + x, f'' = 1 + 1 for |x| < 1, 0 + 1 outside
    def f(x):
        return clip_gradient(-1.0, 1.0, x) * x

    assert_close(fg.grad(f)(0.5), np.asarray(1.0), "exact64")
    assert_close(fg.grad(f)(3.0), np.asarray(4.0), "exact64")
    assert_close(fg.grad(fg.grad(f))(0.5), np.asarray(2.0), "exact64")
    assert_close(fg.grad(fg.grad(f))(3.0), np.asarray(1.0), "exact64")


@pytest.mark.parametrize("order", [2, 3])
def test_custom_vjp_higher_order_through_residuals(order):
    """The residual depends on x, so the second derivative also flows through ``fwd``."""
    @fg.custom_vjp
    def sq(x):
        return x * x

    sq.defvjp(lambda x: (x * x, x), lambda x, g: (2 * x * g,))
    f = lambda x: sq(x) * x  # noqa: E731  (x**3 with a custom rule for x**2)
    for _ in range(order):
        f = fg.grad(f)
    assert_close(f(3.0), np.asarray(18.0 if order == 2 else 6.0), "exact64")


def test_custom_vjp_closure_over_an_array():
    a = np.array([1.0, 2.0, 3.0])

    @fg.custom_vjp
    def dot_a(x):
        return fnp.sum(x * a)

    dot_a.defvjp(lambda x: (fnp.sum(x * a), x), lambda x, g: (2.0 * g * a,))
    assert_close(fg.grad(dot_a)(np.ones(3)), 2.0 * a, "exact64")
    other = fg.grad(lambda x: 3.0 * dot_a(x))(np.zeros(3))
    assert_close(other, 6.0 * a, "exact64")

    @fg.custom_vjp
    def scaled(x):
        return x * a

    scaled.defvjp(lambda x: (x * a, None), lambda _, g: (-g * a,))
    assert_close(fg.grad(lambda x: fnp.sum(scaled(x)))(np.ones(3)), -a, "exact64")


def test_custom_vjp_without_residuals():
    @fg.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -1.0, 1.0),))
    w = np.array([0.5, 3.0, -7.0])
    g = fg.grad(lambda x: fnp.sum(clip_grad(x) * w))(np.ones(3))
    assert_close(g, np.array([0.5, 1.0, -1.0]), "exact64")


@pytest.mark.parametrize("zero", ["a", "b"])
def test_custom_vjp_pytree_argument_with_none_cotangents(zero):
    @fg.custom_vjp
    def prod(p):
        return p["a"] * p["b"]

    def bwd(p, g):
        ct = {"a": g * p["b"], "b": g * p["a"]}
        ct[zero] = None
        return (ct,)

    prod.defvjp(lambda p: (p["a"] * p["b"], p), bwd)
    p = {"a": np.array([5.0, 6.0]), "b": np.array([1.0, 2.0])}
    g = fg.grad(lambda p: fnp.sum(prod(p)))(p)
    other = "b" if zero == "a" else "a"
    assert_close(g[zero], np.zeros(2), "exact64")
    assert_close(g[other], p[zero], "exact64")


def test_custom_vjp_without_defvjp_is_an_error():
    @fg.custom_vjp
    def f(x):
        return x

    with pytest.raises(fg.GradError, match=r"defvjp"):
        fg.grad(f)(1.0)


# --- jit ----------------------------------------------------------------------------


def test_jit_matches_the_plain_function_and_caches_per_shape():
    def f(x, y):
        return fnp.sin(x) * y + fnp.sum(x * x)

    jf = fg.jit(f)
    x, y = RNG.standard_normal(3), 2.5
    assert_close(jf(x, y), f(x, y), "exact64")
    assert len(jf._cache) == 1
    x2 = RNG.standard_normal(3)
    assert_close(jf(x2, -1.0), f(x2, -1.0), "exact64")
    assert len(jf._cache) == 1
    x3 = RNG.standard_normal(5)
    assert_close(jf(x3, y), f(x3, y), "exact64")
    assert len(jf._cache) == 2
    assert_close(jf(x.astype(np.float32), np.float32(y)), f(x, y).astype(np.float32), "f32")
    assert len(jf._cache) == 3


def test_jit_pytree_arguments():
    jf = fg.jit(lambda p: {"s": p["a"] + p["b"], "p": p["a"] * p["b"]})
    out = jf({"a": np.array([1.0, 2.0]), "b": 3.0})
    assert_close(out["s"], np.array([4.0, 5.0]), "exact64")
    assert_close(out["p"], np.array([3.0, 6.0]), "exact64")


def test_jit_static_argnums_steer_control_flow():
    def power(x, n):
        for _ in range(n):
            x = x * x
        return x if n % 2 == 0 else -x

    jp = fg.jit(power, static_argnums=1)
    assert_close(jp(2.0, 2), np.asarray(16.0), "exact64")
    assert_close(jp(2.0, 3), np.asarray(-256.0), "exact64")
    assert len(jp._cache) == 2
    assert_close(jp(3.0, 2), np.asarray(81.0), "exact64")
    assert len(jp._cache) == 2


def test_jit_keyword_arguments_are_dynamic():
    def f(x, n, *, scale, shift=0.0):
        return x * n * scale + shift

    jf = fg.jit(f, static_argnums=1)
    x = np.array([1.0, 2.0])
    assert_close(jf(x, 3, scale=2.0), x * 6.0, "exact64")
    assert_close(jf(x, 3, scale=-1.0), -3.0 * x, "exact64")
    assert len(jf._cache) == 1
    assert_close(jf(x, 3, scale=2.0, shift=1.0), x * 6.0 + 1.0, "exact64")
    assert len(jf._cache) == 2
    (traced,) = [p.traced for p in jf._cache.values() if len(p.fn.params) == 2]
    assert [p.hint for p in traced.function.params] == ["x", "scale"]
    assert_close(fg.grad(lambda s: jf(2.0, 3, scale=s))(5.0), np.asarray(6.0), "exact64")


def test_jit_unhashable_static_argument_is_an_error():
    jf = fg.jit(lambda x, opts: x * len(opts), static_argnums=(1,))
    with pytest.raises(TypeError, match="hashable"):
        jf(2.0, [1, 2])


def test_jit_composes_with_grad():
    def f(x):
        return fnp.sum(x**3)

    x = np.array([1.0, -2.0])
    assert_close(fg.jit(fg.grad(f))(x), 3 * x**2, "exact64")
    assert_close(fg.grad(fg.jit(f))(x), 3 * x**2, "exact64")


# --- IR: make_ir, parser round trip, verifier --------------------------------------


def _rich(x, w):
    h = fnp.tanh(x @ w)
    m = fnp.max(h, axis=1, keepdims=True)
    sel = fnp.where(h > 0, h, 0.5 * h)
    return fnp.mean(sel - m) + fnp.sum(fnp.exp(-x.T) ** 2)


RICH_ARGS = (RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)))


def test_make_ir_prints_and_parses_back():
    fn = fg.make_ir(_rich)(*RICH_ARGS)
    assert isinstance(fn, fg.Function)
    text = str(fn)
    assert text.startswith("func @_rich(%x: f64[3,4], %w: f64[4,2]) -> f64[]")
    assert "tanh" in text and "matmul" in text and "reduce_max" in text
    parsed = parse_function(text)
    assert str(parsed) == text
    verify(parsed)


@pytest.mark.parametrize("static", [(1,), 1, -1])
def test_make_ir_with_static_argnums_keeps_parameter_names(static):
    fn = fg.make_ir(lambda x, n: x * n, static_argnums=static)(np.ones(2), 3)
    assert [p.hint for p in fn.params] == ["x"]
    assert "constant {dtype=f64, value=3.0}" in str(fn)


@pytest.mark.parametrize(
    ("f", "args"),
    [
        (_rich, RICH_ARGS),
        (lambda x: fnp.sum(fnp.sin(x) * x), (np.linspace(0, 1, 5),)),
        (lambda p: fnp.sum(p["w"] * p["b"]) ** 2, ({"w": np.ones((2, 3)), "b": np.ones(3)},)),
    ],
    ids=["rich", "sin", "pytree"],
)
def test_stages_verify_and_round_trip(f, args):
    got = stages(f, *args)
    assert [name for name, _, _ in got] == list(STAGES)
    assert STAGES[:2] == ("traced", "grad")
    *ir_stages, (_, _, source) = got
    # (a kernel of a few elements is a small one, ``s_``)
    assert "define i8* @\"e_" in source and re.search(r'define external void @"[ks]_', source)
    for _, secs, fn in ir_stages:
        assert secs >= 0
        verify(fn)
        assert str(parse_function(str(fn))) == str(fn)
    n_in = len(got[0][2].params)
    for _, _, grad_fn in ir_stages[1:]:
        assert len(grad_fn.params) == n_in + 1  # one cotangent for the one result
        assert len(grad_fn.results) == 1 + n_in


def test_dump_prints_each_stage(capsys):
    fg.dump(lambda x: fnp.sum(x * x), np.ones(3), stage="all", grad=True)
    out = capsys.readouterr().out
    assert out.count("// ---- stage: ") == len(STAGES)
    for name in STAGES:
        assert f"// ---- stage: {name} (" in out
    fg.dump(lambda x: fnp.sum(x * x), np.ones(3), stage="all")
    assert "stage: grad" not in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown stage"):
        fg.dump(lambda x: x, np.ones(3), stage="codegen")
