"""jacobian, jacfwd and hessian as one VJP (JVP) batched over the identity basis.

Values against the unrolled approach (one ``fg.vjp`` per output element, one ``fg.jvp``
per input element) and finite differences, for scalar, vector, matrix and pytree
inputs and outputs, ``argnums`` tuples, complex (holomorphic) and float32 values,
Python control flow on values, and nesting; compiled and interpreted. Then the size of
the traced program: it does not grow with the number of outputs (inputs) nor multiply
under nesting.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.tree import tree_flatten, tree_unflatten
from tests.helpers import assert_close
from tests.transforms.test_transforms import numeric_jacobian

RNG = np.random.default_rng(7)
EXECUTORS = [pytest.param("interpreted"), pytest.param("compiled", marks=pytest.mark.compiled)]


@contextlib.contextmanager
def interpreted():
    """References run with the interpreter: only the program under test is compiled."""
    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        yield
    finally:
        config.DISABLE_JIT = old


def unrolled_jacobian(f, args, nums, single):
    """The Jacobian from one ``fg.vjp`` per output element (what jacobian did before)."""
    with interpreted():
        return _unrolled_jacobian(f, args, nums, single)


def _unrolled_jacobian(f, args, nums, single):

    def sub(*dyn):
        full = list(args)
        for i, d in zip(nums, dyn):
            full[i] = d
        return f(*full)

    # one vjp per differentiated argument position, so repeated argnums stay independent
    results_per_arg = []
    for i in nums:
        out, vjp_fn = fg.vjp(lambda a, i=i: sub(*(a if j == i else args[j] for j in nums)),
                             args[i])
        out_leaves, out_tree = tree_flatten(out)
        in_leaves, in_tree = tree_flatten(args[i])
        per_out = []
        for k, o in enumerate(out_leaves):
            o = np.asarray(o)
            rows = []
            for j in range(o.size):
                cts = [np.zeros_like(np.asarray(x)) for x in out_leaves]
                cts[k] = np.zeros(o.size, o.dtype)
                cts[k][j] = 1
                cts[k] = cts[k].reshape(o.shape)
                rows.append(tree_flatten(vjp_fn(tree_unflatten(out_tree, cts))[0])[0])
            blocks = [np.stack([r[li] for r in rows]).reshape(o.shape + np.shape(x))
                      if rows else np.zeros(o.shape + np.shape(x))
                      for li, x in enumerate(in_leaves)]
            per_out.append(tree_unflatten(in_tree, blocks))
        results_per_arg.append((out_tree, per_out))
    out_tree = results_per_arg[0][0]
    n_out = len(results_per_arg[0][1])
    return tree_unflatten(out_tree, [
        results_per_arg[0][1][k] if single else tuple(r[1][k] for r in results_per_arg)
        for k in range(n_out)])


def unrolled_jacfwd(f, x):
    """The Jacobian of array -> array ``f`` from one ``fg.jvp`` per input element."""
    x = np.asarray(x)
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size, x.dtype)
        e[j] = 1
        with interpreted():
            cols.append(np.asarray(fg.jvp(f, (x,), (e.reshape(x.shape),))[1]))
    out_shape = cols[0].shape
    return np.stack(cols, axis=-1).reshape(out_shape + x.shape)


def assert_tree_close(got, want, kind="exact64"):
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        assert_close(g, w, kind)


# --- one array in, one array out: reverse and forward against unrolled and FD ---------

X3 = np.array([0.5, -1.0, 2.0])
X23 = RNG.standard_normal((2, 3))

ARRAY_CASES = {
    "scalar_out": (lambda x: fnp.sum(fnp.sin(x) * x), X3),
    "vector_out": (lambda x: fnp.sin(x) * x[::-1] + fnp.exp(x).sum(), X3),
    "matrix_in_out": (lambda x: fnp.tanh(x.T @ x), X23),
    "scalar_in": (lambda x: x * np.arange(1.0, 4.0) + x ** 3, np.array(0.7)),
    "wider_out": (lambda x: fnp.outer(fnp.sin(x), x), X3),
}


def _cases(names, compiled):
    """Every case interpreted, the ``compiled`` ones compiled too (compiles cost seconds)."""
    return [*(pytest.param(n, "interpreted") for n in names),
            *(pytest.param(n, "compiled", marks=pytest.mark.compiled) for n in compiled)]


@pytest.mark.parametrize(("name", "executor"),
                         _cases(sorted(ARRAY_CASES), ["matrix_in_out", "vector_out"]))
def test_array_jacobians(name, executor):
    f, x = ARRAY_CASES[name]
    want = unrolled_jacobian(f, (x,), (0,), True)
    assert_tree_close(fg.jacobian(f)(x), want)
    assert_tree_close(fg.jacfwd(f)(x), unrolled_jacfwd(f, x))
    assert_close(fg.jacobian(f)(x), numeric_jacobian(lambda z: np.asarray(f(z)), x), "fd")


# --- pytrees, argnums, dtypes --------------------------------------------------------


def pytree_f(p, y):
    return {"prod": p["a"] * p["s"] * y, "norm": fnp.sum(p["a"] ** 2) + y[0]}


P = {"a": np.array([1.0, -2.0, 0.5]), "s": np.array(3.0)}
Y = np.array([0.25, 4.0, -1.0])


@pytest.mark.parametrize(("argnums", "executor"),
                         _cases([0, 1, (0, 1), (1, 0), (0, 0)], [(1, 0)]))
def test_pytrees_and_argnums(argnums, executor):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else argnums
    want = unrolled_jacobian(pytree_f, (P, Y), nums, single)
    assert_tree_close(fg.jacobian(pytree_f, argnums=argnums)(P, Y), want)
    assert_tree_close(fg.jacfwd(pytree_f, argnums=argnums)(P, Y), want)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float32_and_integer_outputs_keep_their_dtypes(executor):
    x = X3.astype(np.float32)
    f = lambda x: (fnp.sin(x) * 2, x.astype(np.float64) * x[0], fnp.argmax(x))  # noqa: E731
    want = unrolled_jacobian(f, (x,), (0,), True)
    for g, w in zip(fg.jacobian(f)(x), want):
        assert g.dtype == w.dtype  # the cotangents' dtypes: the input's
        assert_close(g, w, "f32")
    with interpreted():
        tangents = fg.jvp(f, (x,), (np.ones(3, np.float32),))[1]
    for g, w, t in zip(fg.jacfwd(f)(x), want, tangents):
        assert g.dtype == np.asarray(t).dtype  # the output tangents' dtypes
        assert_close(g, w, "f32")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_holomorphic_jacobian(executor):
    z = np.array([0.3 + 0.2j, -1.0 + 0.5j, 0.7 - 0.1j])
    f = lambda z: fnp.sin(z) * z[::-1] + fnp.exp(z).sum()  # noqa: E731
    got = fg.jacobian(f, holomorphic=True)(z)
    want = np.diag(np.cos(z) * z[::-1]) + np.diag(np.sin(z))[::-1].T + np.exp(z)[None, :]
    assert got.dtype == np.complex128
    assert_close(got, want, "exact64")
    assert_close(fg.jacfwd(f)(z), want, "exact64")
    with pytest.raises(fg.GradError, match="holomorphic"):
        fg.jacobian(f)(z)


def test_empty_outputs_and_inputs():
    assert fg.jacobian(lambda x: x[:0])(X3).shape == (0, 3)
    assert fg.jacfwd(lambda x: x[:0])(X3).shape == (0, 3)
    assert fg.jacobian(lambda x: fnp.sum(x) + 1.0)(np.zeros(0)).shape == (0,)
    assert fg.jacfwd(lambda x: x * 2.0)(np.zeros(0)).shape == (0, 0)


def test_integer_input_is_an_error():
    with pytest.raises(fg.GradError, match="jacobian: argument 0 has dtype int64"):
        fg.jacobian(lambda x: x * 2)(np.arange(3))


# --- Python control flow on values: guarded traces per path ---------------------------


@pytest.mark.parametrize("executor", EXECUTORS)
def test_python_if_on_values_alternating_paths(executor):
    def f(x):
        if fnp.sum(x) > 0:
            return fnp.sin(x) * x
        return x ** 3

    jac, jf = fg.jacobian(f), fg.jacfwd(f)
    for x in (X3, -X3, X3 * 1.5, -X3 * 0.5):
        want = np.diag(np.cos(x) * x + np.sin(x)) if x.sum() > 0 else np.diag(3 * x ** 2)
        assert_close(jac(x), want, "exact64")
        assert_close(jf(x), want, "exact64")


# --- nesting ---------------------------------------------------------------------------


def outer_f(x):
    return fnp.sin(fnp.outer(x, x)) + fnp.cos(x @ x)


def outer_f_second(x):
    """d² outer_f[i, j] / dx_k dx_l, by hand."""
    n = x.size
    e = np.eye(n)
    p = np.outer(x, x)
    # d(x_i x_j)/dx_k = e_ik x_j + e_jk x_i
    d = np.einsum("ik,j->ijk", e, x) + np.einsum("jk,i->ijk", e, x)
    dd = np.einsum("ik,jl->ijkl", e, e) + np.einsum("jk,il->ijkl", e, e)
    sin_part = (-np.sin(p)[:, :, None, None] * np.einsum("ijk,ijl->ijkl", d, d)
                + np.cos(p)[:, :, None, None] * dd)
    s = x @ x
    cos_part = -np.cos(s) * 4 * np.outer(x, x) - np.sin(s) * 2 * e
    return sin_part + cos_part[None, None]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_nested_jacobians(executor):
    x = np.array([0.3, -0.7])
    want = outer_f_second(x)
    assert_close(fg.jacobian(fg.jacobian(outer_f))(x), want, "exact64")
    if executor == "compiled":
        return  # the mixed nestings compile to programs of the same kind
    assert_close(fg.jacfwd(fg.jacobian(outer_f))(x), want, "exact64")
    assert_close(fg.jacobian(fg.jacfwd(outer_f))(x), want, "exact64")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_hessians(executor):
    x = np.array([0.3, -0.7, 1.1])

    def s(x):
        return fnp.sum(fnp.sin(fnp.outer(x, x))) * fnp.cos(x @ x)

    h = fg.hessian(s)(x)
    assert_close(h, h.T, "exact64")
    with interpreted():
        assert_close(h, fg.jacobian(fg.grad(s))(x), "exact64")
        assert_close(h, numeric_jacobian(fg.grad(s), x), "fd")
    hx, hy = fg.hessian(lambda x, y: fnp.sum(x * x * y), argnums=(0, 1))(x[:2], 2.0)
    assert_close(hx[0], 2 * 2.0 * np.eye(2), "exact64")
    assert_close(hx[1], 2 * x[:2], "exact64")
    assert_close(hy[1], np.array(0.0), "exact64")


def test_gradient_through_a_jacobian_of_a_closure():
    a = 1.5

    def total(a):
        return fnp.sum(fg.jacobian(lambda x: fnp.sin(x) * a)(X3))

    got = fg.grad(total)(a)
    assert_close(got, np.array(np.sum(np.cos(X3))), "exact64")


# --- program size ---------------------------------------------------------------------


def n_ops(fn) -> int:
    """Ops of a Function, those of its regions included."""
    todo, n = [fn], 0
    while todo:
        for op in todo.pop().ops:
            n += 1
            todo.extend(op.regions or ())
    return n


def test_program_does_not_grow_with_the_output_size():
    def f(x):
        return fnp.sin(x) * fnp.sum(x * x)

    small, large = np.linspace(0.1, 1, 2), np.linspace(0.1, 1, 50)
    for transform in (fg.jacobian, fg.jacfwd, lambda g: fg.hessian(lambda z: fnp.sum(g(z)))):
        sizes = {n_ops(fg.make_ir(transform(f))(x)) for x in (small, large)}
        assert len(sizes) == 1, sizes
    # a wider output only, the input fixed
    wide = [n_ops(fg.make_ir(fg.jacobian(lambda x, n=n: fnp.outer(fnp.ones(n), fnp.sin(x))))(
        small)) for n in (1, 25)]
    assert wide[0] == wide[1]


def test_nested_jacobian_program_is_small():
    """2,302 ops when each output element had its own VJP; 85 batched (measured)."""
    x = np.array([0.3, -0.7])
    nested = fg.jacobian(fg.jacobian(outer_f))
    assert n_ops(fg.make_ir(nested)(x)) <= 120
    assert n_ops(fg.make_ir(fg.grad(lambda x: fnp.sum(nested(x))))(x)) <= 260  # 187; was 3,285
    assert n_ops(fg.make_ir(fg.hessian(lambda x: fnp.sum(outer_f(x))))(x)) <= 80
    # a third level does not multiply either
    third = n_ops(fg.make_ir(fg.jacobian(nested))(x))
    assert third <= 400
