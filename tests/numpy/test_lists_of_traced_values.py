"""Python lists of traced values where NumPy takes array-likes, and the edge
conventions of the added functions (sinc and hypot at 0, cumprod at zeros, sort ties,
one-argument where, allclose under tracing).

``fnp.*`` takes (nested) lists and tuples mixing tracers, arrays and Python numbers,
stacked as ``np.array`` would. Of NumPy's own functions, those whose dispatch looks
at the list *items* (``np.stack``, ``np.concatenate``, ``np.einsum``, ...) reach
fusegrad; those that convert the list themselves (``np.array``, ``np.mean``, ...)
cannot, and raise a TracerError naming the ``fnp`` function to call.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.numpy._coverage import NOT_INTERCEPTABLE
from fusegrad.tracer.trace import trace_pytree
from tests.helpers import assert_close, check_grads, numeric_grads


def check_grads_of(f, args, order=2):
    """``check_grads`` of ``f``'s IR; closed-over arrays are its trailing parameters."""
    tr = trace_pytree(f, tuple(args))
    check_grads(tr.function, [*args, *map(np.asarray, tr.free)], wrt=range(len(args)),
                order=order)

X0 = np.array(0.7)
VEC = np.array([0.3, -1.2, 2.0])

LIST_CASES = {
    "array": (lambda x, v: fnp.array([x, x ** 2, 3.0]),
              lambda x, v: np.array([x, x ** 2, 3.0])),
    "array-nested": (lambda x, v: fnp.array([[x, 1], (2.0, x * v[0])]),
                     lambda x, v: np.array([[x, 1], (2.0, x * v[0])])),
    "array-rows": (lambda x, v: fnp.asarray([v, x * v, np.ones(3)]),
                   lambda x, v: np.asarray([v, x * v, np.ones(3)])),
    "mean": (lambda x, v: fnp.mean([x, x + 2]), lambda x, v: np.mean([x, x + 2])),
    "std": (lambda x, v: fnp.std([x, 2 * x + 1, v[1]]), lambda x, v: np.std([x, 2 * x + 1, v[1]])),
    "var": (lambda x, v: fnp.var([x, v[0], v[2]]), lambda x, v: np.var([x, v[0], v[2]])),
    "sum": (lambda x, v: fnp.sum([x * v, v], axis=0), lambda x, v: np.sum([x * v, v], axis=0)),
    "norm": (lambda x, v: fnp.linalg.norm([x, v[2]]), lambda x, v: np.linalg.norm([x, v[2]])),
    "np.stack": (lambda x, v: np.stack([x * v, v, np.ones(3)]),
                 lambda x, v: np.stack([x * v, v, np.ones(3)])),
    "np.concatenate": (lambda x, v: np.concatenate([x * v, [1.0, 2.0]]),
                       lambda x, v: np.concatenate([x * v, [1.0, 2.0]])),
    "np.einsum": (lambda x, v: np.einsum("i,i", v, x * v), lambda x, v: np.einsum("i,i", v, x * v)),
    "full": (lambda x, v: fnp.full((2, 3), x), lambda x, v: np.full((2, 3), x)),
    "full-row": (lambda x, v: fnp.full((2, 3), x * v), lambda x, v: np.full((2, 3), x * v)),
    "full_like": (lambda x, v: fnp.full_like(np.zeros((2, 2)), x),
                  lambda x, v: np.full_like(np.zeros((2, 2)), x)),
    "np.full_like": (lambda x, v: np.full_like(v, x), lambda x, v: np.full_like(v, x)),
    "r_": (lambda x, v: fnp.r_[v, x, [1.0], 0:2], lambda x, v: np.r_[v, x, [1.0], 0:2]),
    "c_": (lambda x, v: fnp.c_[v, x * v], lambda x, v: np.c_[v, x * v]),
}


@pytest.mark.parametrize("name", sorted(LIST_CASES))
def test_lists_of_traced_values(name):
    f, ref = LIST_CASES[name]
    want = ref(X0, VEC)
    got = fg.jit(f)(X0, VEC)
    assert np.asarray(got).dtype == want.dtype
    assert_close(got, want, "exact64")
    check_grads_of(f, [X0, VEC])


@pytest.mark.compiled
def test_lists_of_traced_values_compiled():
    rng = np.random.default_rng(0)
    ws = {n: rng.standard_normal(np.shape(LIST_CASES[n][1](X0, VEC))) for n in LIST_CASES}

    def total(fs):
        return lambda x, v: sum((fs[n](x, v) * ws[n]).sum() for n in sorted(LIST_CASES))

    fs = {n: c[0] for n, c in LIST_CASES.items()}
    refs = {n: c[1] for n, c in LIST_CASES.items()}
    got = fg.jit(fg.grad(total(fs), argnums=(0, 1)))(X0, VEC)
    fd = numeric_grads(total(refs), [X0, VEC])
    assert_close(got[0], fd[0], "fd")
    assert_close(got[1], fd[1], "fd")


def test_list_dtypes_promote_as_numpy():
    x32, v32 = np.array(1.5, np.float32), np.ones(2, np.float32)
    for items in ([x32, 1.0], [x32, x32], [np.array(2, np.int32), 2], [v32, [True, False]],
                  [np.arange(2, dtype=np.int32), [2, 3]], [x32, np.float32(2.0)]):
        got = fg.jit(lambda a, items=items: fnp.array([a * 1 if i == 0 else e
                                                       for i, e in enumerate(items)]))(items[0])
        want = np.array(items)
        assert got.dtype == want.dtype, items
        assert_close(got, want, "exact64")


def test_vmap_of_list():
    xs = np.array([0.5, -1.0, 2.0])
    got = fg.jit(fg.vmap(lambda x: fnp.mean([x, x ** 2, 1.0])))(xs)
    assert_close(got, np.array([np.mean([x, x ** 2, 1.0]) for x in xs]), "exact64")


NUMPY_CONVERTS = {
    "np.array([x, ...])": lambda x: np.array([x, x]),
    "np.asarray([x, ...])": lambda x: np.asarray([x, 1.0]),
    "np.mean([x, ...])": lambda x: np.mean([x, x + 2]),
    "np.sum([x, ...])": lambda x: np.sum([x, x]),
    "np.std([x, ...])": lambda x: np.std([x, 1.0]),
    "np.var([x, ...])": lambda x: np.var([x, 1.0]),
    "np.linalg.norm([x, ...])": lambda x: np.linalg.norm([x, 1.0]),
    "np.full(shape, x)": lambda x: np.full((2,), x),
    "np.full_like(concrete, x)": lambda x: np.full_like(np.zeros(2), x),
}


@pytest.mark.parametrize("what", NOT_INTERCEPTABLE)
def test_numpy_conversions_of_lists_name_the_fnp_function(what):
    with pytest.raises(fg.TracerError, match=r"fnp\.array / fnp\.stack"):
        fg.jit(NUMPY_CONVERTS[what])(X0)
    if "full_like" in what:  # np.copyto writes in place: refused under every transform
        with pytest.raises(fg.TracerError, match=r"fnp\.array / fnp\.stack"):
            fg.grad(NUMPY_CONVERTS[what])(X0)
        return
    # under grad, NumPy's conversion would drop the gradient of x: an error naming fnp
    with pytest.raises(fg.TracerConversionError, match=r"fnp\.array / fnp\.stack"):
        fg.grad(lambda x: fnp.sum(NUMPY_CONVERTS[what](x)) + x)(X0)
    # of a stop_gradient'ed value it is the constant asked for
    g = fg.grad(lambda x: fnp.sum(NUMPY_CONVERTS[what](fg.stop_gradient(x))) + x)(X0)
    assert_close(g, np.ones_like(X0), "exact64")


def test_where_one_argument():
    assert_close(fnp.where(np.array([[0, 2], [3, 0]]))[1], np.array([1, 0]), "exact64")
    assert all(a.dtype == np.int64 for a in np.nonzero(np.array([1, 0, 1])))
    with pytest.raises(fg.TracerError, match=r"three arguments"):
        fg.jit(lambda x: np.where(x > 0))(VEC)


def test_allclose():
    assert fnp.allclose(VEC, VEC + 1e-9) is True
    assert fnp.allclose(VEC, VEC + 1e-3) is False
    assert bool(fg.jit(lambda a: np.allclose(a, a + 1e-9))(VEC)) is True
    assert bool(fg.jit(lambda a: np.allclose(a, a + 1e-3))(VEC)) is False
    with pytest.raises(fg.TracerError):
        fg.jit(lambda a: a if np.allclose(a, 1.0) else -a)(VEC)


def test_sinc_derivatives_at_zero():
    d1 = fg.grad(np.sinc)
    d2 = fg.grad(fg.grad(np.sinc))
    assert float(d1(0.0)) == 0.0
    assert_close(d2(0.0), -np.pi ** 2 / 3, "exact64")
    for x in (1e-4, 5e-4, 2e-3, 0.3):  # both sides of the switch to the series
        y = np.pi * x
        want = (np.cos(y) * y - np.sin(y)) / (np.pi * x * x)
        assert_close(d1(x), want, "exact64")
    assert float(fg.jit(fg.grad(np.sinc))(0.0)) == 0.0


def test_hypot_at_zero_is_a_subgradient():
    g = fg.grad(lambda a, b: np.hypot(a, b), argnums=(0, 1))(0.0, 0.0)
    assert float(g[0]) == 0.0 and float(g[1]) == 0.0
    g = fg.grad(lambda a, b: np.hypot(a, b), argnums=(0, 1))(1.0, -1.0)  # a tie of magnitudes
    assert_close(np.array(g), np.array([1.0, -1.0]) / np.sqrt(2.0), "exact64")


def test_cumprod_gradient_exact_at_zeros():
    z = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    # d/dz_k sum_j prod_{i<=j} z_i = sum_{j>=k} prod_{i<=j, i!=k} z_i
    want = np.array([sum(np.prod(np.delete(z[: j + 1], k)) for j in range(k, 5))
                     for k in range(5)])
    assert_close(fg.grad(lambda z: np.sum(np.cumprod(z)))(z), want, "exact64")
    assert_close(fg.jit(fg.grad(lambda z: np.sum(np.cumprod(z))))(z), want, "exact64")
    check_grads_of(lambda z: np.cumprod(z), [z])


def test_sort_gradient_follows_the_stable_permutation():
    x = np.array([3.0, 1.0, 3.0, -2.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    g = fg.grad(lambda x: np.sum(np.sort(x) * w))(x)
    # sorted: -2 (index 3), 1 (index 1), 3 (index 0), 3 (index 2): ties in index order
    assert_close(g, np.array([100.0, 10.0, 1000.0, 1.0]), "exact64")
