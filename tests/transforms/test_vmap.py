"""fg.vmap: JAX's contract, composition with the other transforms, compiled == interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import assert_close
from tests.transforms.test_random_programs import SETTINGS, describe, programs, sampled

RNG = np.random.default_rng(0)
XS = RNG.standard_normal((5, 3))
W = RNG.standard_normal(3)


def stack(fn, *per_example, axis=0):
    """``fn`` applied to each example, results stacked (pytrees of arrays)."""
    outs = [fn(*args) for args in zip(*per_example)]
    return fg.tree.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=axis), *outs)


def assert_tree_close(got, want):
    got_leaves, got_tree = fg.tree.tree_flatten(got)
    want_leaves, want_tree = fg.tree.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert_close(g, w, "exact64")


def mlp(p, x):
    """A small network of one example ``x`` (shape (3,))."""
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.sum(h * p["v"])


PARAMS = {"w1": RNG.standard_normal((3, 4)), "b1": RNG.standard_normal(4),
          "v": RNG.standard_normal(4)}


# --- the in_axes / out_axes contract ------------------------------------------------


def test_in_axes_int_none_and_negative():
    f = fg.vmap(lambda x, w: fnp.sin(x) * w, in_axes=(0, None))
    assert_close(f(XS, W), np.sin(XS) * W, "exact64")
    f = fg.vmap(lambda x, w: fnp.sin(x) * w, in_axes=(-1, None))
    assert_close(f(XS.T, W[:, None]), stack(lambda x: np.sin(x) * W[:, None], XS), "exact64")


def test_in_axes_pytree_prefix_and_kwargs():
    batch_p = {"w1": np.stack([PARAMS["w1"]] * 5), "b1": PARAMS["b1"], "v": PARAMS["v"]}
    f = fg.vmap(mlp, in_axes=({"w1": 0, "b1": None, "v": None}, 0))
    assert_close(f(batch_p, XS), stack(lambda x: mlp(PARAMS, x), XS), "exact64")
    g = fg.vmap(lambda x, *, scale: x * scale, in_axes=0)
    assert_close(g(XS, scale=np.arange(5.0)), XS * np.arange(5.0)[:, None], "exact64")


def test_out_axes_tree_and_none():
    f = fg.vmap(lambda x, w: (x * w, fnp.sum(w)), in_axes=(0, None), out_axes=(1, None))
    a, b = f(XS, W)
    assert_close(a, (XS * W).T, "exact64")
    assert_close(b, np.sum(W), "exact64")


def test_axis_size_when_nothing_is_mapped():
    f = fg.vmap(lambda w: w * 2.0, in_axes=None, axis_size=4)
    assert_close(f(W), np.broadcast_to(W * 2, (4, 3)), "exact64")


def test_signature_cache_is_reused():
    f = fg.vmap(lambda x: fnp.exp(x))
    f(XS)
    f(XS + 1)
    f(XS[:2])
    assert len(f._plans) == 2


# --- composition --------------------------------------------------------------------


def test_per_example_gradients_match_a_loop():
    per_example = fg.vmap(fg.grad(mlp), in_axes=(None, 0))(PARAMS, XS)
    assert_tree_close(per_example, stack(lambda x: fg.grad(mlp)(PARAMS, x), XS))


def test_grad_of_vmap_matches_sum_of_loop():
    def loss(p):
        return fnp.sum(fg.vmap(mlp, in_axes=(None, 0))(p, XS))

    want = stack(lambda x: fg.grad(mlp)(PARAMS, x), XS)
    assert_tree_close(fg.grad(loss)(PARAMS), fg.tree.tree_map(lambda g: g.sum(0), want))


def test_vmap_of_grad_of_grad_matches_a_loop():
    def u(x):
        return fnp.sin(x) * fnp.exp(0.3 * x) + x ** 3

    xs = np.linspace(-1, 1, 7)
    got = fg.vmap(fg.grad(fg.grad(u)))(xs)
    assert_close(got, stack(fg.grad(fg.grad(u)), xs), "exact64")


def test_vmap_composes_with_forward_mode():
    def f(x):
        return fnp.sin(x) * fnp.exp(0.3 * x)

    xs = np.linspace(-1, 1, 5)
    slope = fg.vmap(lambda x: fg.jvp(f, (x,), (1.0,))[1])(xs)
    assert_close(slope, stack(lambda x: fg.jvp(f, (x,), (1.0,))[1], xs), "exact64")
    assert_close(fg.jvp(fg.vmap(f), (xs,), (np.ones(5),))[1], slope, "exact64")

    def g(x):
        return fnp.sum(fnp.sin(x) ** 3)

    assert_close(fg.vmap(fg.hvp(g))(XS, XS), stack(fg.hvp(g), XS, XS), "exact64")
    assert_close(fg.vmap(fg.jacfwd(fnp.tanh))(XS), stack(fg.jacfwd(fnp.tanh), XS), "exact64")


def test_nested_vmap_is_an_outer_product():
    f = fg.vmap(fg.vmap(lambda a, b: a * b + fnp.sin(a), in_axes=(None, 0)), in_axes=(0, None))
    a, b = np.arange(3.0), np.arange(4.0)
    assert_close(f(a, b), a[:, None] * b[None, :] + np.sin(a)[:, None], "exact64")


def test_jit_of_vmap_and_vmap_in_jit():
    f = fg.jit(fg.vmap(lambda x, w: fnp.sum(x * w), in_axes=(0, None)))
    assert_close(f(XS, W), XS @ W, "exact64")
    g = fg.vmap(fg.jit(lambda x: fnp.sum(fnp.sin(x))))
    assert_close(g(XS), np.sin(XS).sum(1), "exact64")


def test_closure_over_an_outer_tracer_is_shared_by_the_batch():
    def loss(w):
        return fnp.sum(fg.vmap(lambda x: fnp.sum(fnp.sin(x * w)))(XS))

    assert_close(fg.grad(loss)(W), (np.cos(XS * W) * XS).sum(0), "exact64")


def test_vmap_of_custom_vjp():
    @fg.custom_vjp
    def clipped(x):
        return x * 1.0

    clipped.defvjp(lambda x: (x * 1.0, None), lambda res, g: (fnp.clip(g, -0.5, 0.5),))
    f = fg.grad(lambda x: fnp.sum(fg.vmap(lambda r: clipped(r) * 3.0)(x)))
    assert_close(f(XS), np.full(XS.shape, 0.5), "exact64")


def test_elementwise_grad_inside_vmap():
    f = fg.vmap(fg.elementwise_grad(lambda x: x * fnp.tanh(x)))
    want = np.tanh(XS) + XS * (1 - np.tanh(XS) ** 2)
    assert_close(f(XS), want, "exact64")


@sampled(programs(), st.lists(st.sampled_from([0, -1, None]), min_size=3, max_size=3),
         st.integers(0, 2**32 - 1), default=20, full=60, **SETTINGS)
def test_random_program_and_its_gradient_match_a_loop(case, axes, seed):
    """vmap(f) and vmap(grad(f)) over random programs, random in_axes (0, -1, None)."""
    program, inputs = case
    rng = np.random.default_rng(seed)
    axes = [a if a is None or np.ndim(x) else 0 for a, x in zip(axes, inputs)]
    if all(a is None for a in axes):
        axes[0] = 0
    rows = [[x * (1 + 0.1 * rng.standard_normal(np.shape(x))) if a is not None else x
             for x, a in zip(inputs, axes)] for _ in range(3)]
    batched = [x if a is None else np.stack([r[i] for r in rows], axis=a)
               for i, (x, a) in enumerate(zip(inputs, axes))]
    argnums = tuple(range(len(inputs)))
    msg = describe(program, inputs) + f"\nin_axes={axes}"
    got = fg.vmap(program, in_axes=tuple(axes))(*batched)
    assert_close(got, stack(program, *zip(*rows)), "exact64", msg)
    got = fg.vmap(fg.grad(program, argnums=argnums), in_axes=tuple(axes))(*batched)
    want = stack(fg.grad(program, argnums=argnums), *zip(*rows))
    for g, w in zip(got, want):
        assert_close(g, w, "exact64", msg)


# --- errors -------------------------------------------------------------------------


def test_error_inconsistent_sizes_names_arguments():
    f = fg.vmap(lambda x, u: fnp.sum(x) + fnp.sum(u), in_axes=(0, 1))
    with pytest.raises(fg.BatchingError, match=r"(?s)different sizes:.*`x` of shape \(10, 4\), "
                       r"axis 0: size 10.*`u` of shape \(10, 2\), axis 1: size 2"):
        f(np.ones((10, 4)), np.ones((10, 2)))


def test_error_in_axes_length_and_structure():
    f = fg.vmap(lambda a, b, c: a, in_axes=(0, 0))
    with pytest.raises(fg.BatchingError, match=r"in_axes has 2 entries but the function was "
                                               r"called with 3 positional argument"):
        f(XS, XS, XS)
    g = fg.vmap(lambda p: p[0], in_axes=((0, 0),))
    with pytest.raises(fg.BatchingError, match=r"in_axes\[0\] = \(0, 0\) does not match the "
                                               r"structure of argument 0, tuple\(\*, \*, \*\)"):
        g((XS, XS, XS))


def test_error_axis_out_of_range_and_scalar():
    with pytest.raises(fg.BatchingError, match=r"maps axis 2 of `x`, which is shape \(5, 3\) "
                                               r"\(rank 2\); valid axes are -2 to 1"):
        fg.vmap(lambda x: x, in_axes=2)(XS)
    with pytest.raises(fg.BatchingError, match=r"`y`, which is a scalar; it has no axis"):
        fg.vmap(lambda x, y: x * y)(XS, 2.0)
    with pytest.raises(fg.BatchingError, match=r"out_axes gives axis 3 for output leaf 0"):
        fg.vmap(lambda x: x, out_axes=3)(XS)


def test_error_no_mapped_argument_and_bad_spec():
    with pytest.raises(fg.BatchingError, match=r"no argument is mapped.*axis_size="):
        fg.vmap(lambda x: x, in_axes=None)(XS)
    with pytest.raises(fg.BatchingError, match=r"in_axes must be an int, None, or a "
                                               r"tuple/list/dict.*'0' of type str"):
        fg.vmap(lambda x: x, in_axes="0")
    with pytest.raises(fg.BatchingError, match=r"result 0 .*cannot be returned with out_axes "
                                               r"None"):
        fg.vmap(lambda x: x * 2.0, out_axes=None)(XS)


# --- compiled == interpreter --------------------------------------------------------


def _representative(p, x, idx, w):
    """Matmul with shared weights, reductions, cumsum, gathers with batched indices,
    concatenation and slicing, elementwise with broadcasting: one compiled Function."""
    h = mlp(p, x)
    g = fg.grad(mlp, argnums=1)(p, x)
    picked = fnp.take(x, idx, axis=0)
    cat = fnp.concatenate([fnp.cumsum(x), x[::-1] * w, fnp.maximum(x, 0.0)])
    return h, g, picked, fnp.max(cat), cat @ fnp.ones((9, 2))


@pytest.mark.compiled
def test_compiled_matches_interpreter(monkeypatch):
    from fusegrad import config

    idx = RNG.integers(-3, 3, (5, 2))
    f = fg.vmap(_representative, in_axes=(None, 0, 0, None), out_axes=(0, 1, 0, 0, 0))
    compiled = f(PARAMS, XS, idx, W)
    compiled_grad = fg.grad(lambda p: fnp.sum(fg.vmap(mlp, in_axes=(None, 0))(p, XS) ** 2))(
        PARAMS)
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert_tree_close(compiled, f(PARAMS, XS, idx, W))
    assert_tree_close(compiled_grad, fg.grad(
        lambda p: fnp.sum(fg.vmap(mlp, in_axes=(None, 0))(p, XS) ** 2))(PARAMS))
    want = stack(lambda x, i: _representative(PARAMS, x, i, W), XS, idx)
    want = (want[0], want[1].T, *want[2:])
    assert_tree_close(compiled, want)


def test_error_tensor_that_requires_grad_is_refused_not_detached():
    t = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(fg.BatchingError, match=r"Tensor that requires grad \(shape \(2,\)\)"):
        fg.vmap(lambda x: x * 2.0)(t)
    assert_close(fg.vmap(lambda x: x * 2.0)(t.detach()), np.array([2.0, 4.0]), "f32")
