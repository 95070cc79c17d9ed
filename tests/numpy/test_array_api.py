"""The array API namespace of traced arrays (``fusegrad.array_api``) and writes into
traced arrays (``fusegrad.tracer.writes``)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.array_api as xp
from fusegrad.ir.errors import TracerError
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 4))
B = RNG.normal(size=(4, 2))

#: name -> (function of (namespace, array), NumPy reference of the array)
CASES = {
    "sum_axis_keepdims": (lambda m, a: m.sum(a * a, axis=1, keepdims=True),
                          lambda a: np.sum(a * a, axis=1, keepdims=True)),
    "max": (lambda m, a: m.max(a, axis=0), lambda a: np.max(a, axis=0)),
    "std_correction": (lambda m, a: m.std(a, axis=0, correction=1),
                       lambda a: np.std(a, axis=0, ddof=1)),
    "var": (lambda m, a: m.var(a, axis=(0, 1)), np.var),
    "prod": (lambda m, a: m.prod(a, axis=1), lambda a: np.prod(a, axis=1)),
    "concat_stack": (lambda m, a: m.concat([a, m.stack([a[0], a[1], a[2]], axis=0)], axis=1),
                     lambda a: np.concatenate([a, a], axis=1)),
    "permute_reshape": (lambda m, a: m.reshape(m.permute_dims(a, (1, 0)), (2, 6)),
                        lambda a: a.T.reshape(2, 6)),
    "matmul_mT": (lambda m, a: m.matmul(a, B) + m.matrix_transpose(B.T @ a.mT),
                  lambda a: 2 * a @ B),
    "where_exp": (lambda m, a: m.where(a > 0, m.exp(a), m.expm1(a)),
                  lambda a: np.where(a > 0, np.exp(a), np.expm1(a))),
    "astype_copy": (lambda m, a: m.astype(a, m.float64, copy=True) * 2, lambda a: 2 * a),
    "cumulative_sum": (lambda m, a: m.cumulative_sum(a, axis=1, include_initial=True),
                       lambda a: np.concatenate([np.zeros((3, 1)), np.cumsum(a, 1)], 1)),
    "sort_descending": (lambda m, a: m.sort(a, axis=1, descending=True),
                        lambda a: -np.sort(-a, axis=1)),
    "trig_names": (lambda m, a: m.atan2(a, 2.0) + m.asinh(a) + m.pow(m.abs(a), 1.5),
                   lambda a: np.arctan2(a, 2.0) + np.arcsinh(a) + np.abs(a) ** 1.5),
    "copysign_trunc": (lambda m, a: m.copysign(a, -a) + m.trunc(3 * a),
                       lambda a: np.copysign(a, -a) + np.trunc(3 * a)),
    "unstack_expand": (lambda m, a: m.expand_dims(m.unstack(a, axis=1)[2], axis=0),
                       lambda a: a[None, :, 2]),
    "broadcast_arrays": (lambda m, a: m.add(*m.broadcast_arrays(a[:1], a)),
                         lambda a: a[:1] + a),
    "clip_tile_flip": (lambda m, a: m.flip(m.tile(m.clip(a, min=-0.5, max=0.5), (1, 2)),
                                           axis=1), lambda a: np.tile(np.clip(a, -.5, .5),
                                                                      (1, 2))[:, ::-1]),
    "linalg_vector_norm": (lambda m, a: m.linalg.vector_norm(a, axis=1),
                           lambda a: np.linalg.norm(a, axis=1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_namespace_functions_on_numpy_arrays(name):
    f, ref = CASES[name]
    assert_close(f(xp, A), ref(A), "exact64")


@pytest.mark.parametrize("name", sorted(CASES))
def test_namespace_functions_traced_and_differentiated(name):
    f, ref = CASES[name]
    got = fg.jit(lambda a: f(a.__array_namespace__(), a))(A)
    assert_close(got, ref(A), "exact64")
    if name != "sort_descending":  # a permutation: its derivative is checked elsewhere
        check_grads(lambda a: f(a.__array_namespace__(), a), [A], order=2)


@pytest.mark.compiled
def test_namespace_compiled_matches_the_reference():
    def f(a):
        m = a.__array_namespace__()
        return m.concat([CASES["where_exp"][0](m, a), CASES["std_correction"][0](m, a)[None]],
                        axis=0)

    assert_close(fg.jit(f)(A), np.concatenate([np.where(A > 0, np.exp(A), np.expm1(A)),
                                               np.std(A, 0, ddof=1)[None]]), "exact64")
    assert_close(fg.jit(fg.grad(lambda a: xp.sum(xp.exp(a))))(A), np.exp(A), "exact64")

    def written(x):  # rosen_der's pattern: writes into an array made inside
        d = xp.zeros_like(x)
        d[1:-1] = x[1:-1] ** 2
        d[0], d[-1] = 3 * x[0], -x[-1]
        d[d > 0.5] = 0.5
        return d

    x = np.array([0.3, 0.9, -0.4, 0.2])
    want = np.array([0.5, 0.5, 0.16, -0.2])  # 0.9 and 0.81 capped: derivative 0
    assert_close(fg.jit(written)(x), want, "exact64")
    assert_close(fg.jit(fg.jacobian(written))(x), np.diag([0.0, 0.0, -0.8, -1.0]), "exact64")


def test_namespace_attributes():
    seen = {}

    def f(a):
        seen["ns"] = a.__array_namespace__(api_version="2023.12")
        seen["device"] = a.device
        assert a.to_device("cpu") is a
        with pytest.raises(ValueError, match="CPU only"):
            a.to_device("cuda")
        with pytest.raises(ValueError, match="array API versions"):
            a.__array_namespace__(api_version="2099.01")
        return xp.sum(a)

    fg.grad(f)(A)
    assert seen["ns"] is xp and repr(seen["device"]) == "cpu" and seen["device"] == "cpu"
    assert xp.__array_api_version__ == "2023.12"
    assert xp.isdtype(xp.float32, "real floating") and xp.isdtype(xp.int8, "integral")
    assert not xp.isdtype(xp.complex64, ("real floating", "bool"))
    assert xp.result_type(xp.float32, 1.0) == xp.float32
    assert xp.result_type(np.ones(2, np.int32), xp.float32) == xp.float64
    assert xp.finfo(xp.float64).eps == np.finfo(np.float64).eps
    assert xp.can_cast(xp.int32, xp.float64) and not xp.can_cast(xp.float64, xp.int32)
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == xp.float64
    assert info.devices() == [info.default_device()]
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}


def test_creation_inside_a_trace_gives_writable_traced_arrays():
    def f(x):
        d = xp.zeros(3)  # written below with values that depend on x
        d[0] = x[0] * x[1]
        d[1:] = xp.exp(x[1:])
        e = xp.asarray(x, copy=True)
        e[e > 0.5] = 0.0  # a traced boolean mask of the full shape
        f = xp.full_like(x, x[2])  # a new array, not a view of x[2]
        f[0] = 0.0
        return xp.sum(d) + xp.sum(e * e) + xp.sum(f)

    x = np.array([0.3, 0.8, -0.2])
    g = fg.grad(f)(x)
    np.testing.assert_allclose(g, [x[1] + 2 * x[0], x[0] + np.exp(x[1]),
                                   np.exp(x[2]) + 2 * x[2] + 2], rtol=1e-14)
    assert isinstance(xp.zeros(2), np.ndarray)  # outside a trace: NumPy's arrays


def test_writes_keep_numpy_meaning_or_raise():
    def write_argument(x):
        x[0] = 1.0
        return xp.sum(x)

    with pytest.raises(TypeError, match="argument of the function being transformed"):
        fg.grad(write_argument)(np.ones(3))

    def write_view(x):
        y = x * 2.0
        v = y[1:]
        v[0] = 5.0
        return xp.sum(y)

    with pytest.raises(TypeError, match="it is a view"):
        fg.grad(write_view)(np.ones(3))

    def read_stale_view(x):
        y = x * 2.0
        v = y[1:]
        y[1] = 5.0
        return xp.sum(v)

    with pytest.raises(TracerError, match="read after the array it was taken from was written"):
        fg.grad(read_stale_view)(np.ones(3))

    def return_stale_view(x):
        y = x * 2.0
        v = y[1:]
        y[1] = 5.0
        return xp.sum(y), v

    with pytest.raises(TracerError, match="read after the array it was taken from was written"):
        fg.jit(return_stale_view)(np.ones(3))

    def write_one_of_two_views(x):
        def halves():
            r = x * 1.0
            return r[:2], r[1:]  # r itself is dropped: a[1] and b[0] share its memory

        a, b = halves()
        a[1] = 7.0  # allowed: no one holds r; in NumPy b[0] would become 7 too
        return xp.sum(a) + xp.sum(b)

    with pytest.raises(TracerError, match="read after the array it was taken from was written"):
        fg.grad(write_one_of_two_views)(np.ones(3))

    def copies_are_independent(x):
        y = x * 2.0
        z = xp.astype(y, xp.float64)  # a copy (copy=True is the default)
        w = +y  # also a copy, in NumPy
        z[0], w[1] = 0.0, 0.0
        t = y.reshape(3)  # nothing else holds the reshape's input once it is dropped
        return xp.sum(y) + xp.sum(z) + xp.sum(w) + xp.sum(t)

    assert fg.grad(copies_are_independent)(np.ones(3)).tolist() == [6.0, 6.0, 8.0]

    def temporary_view_written(x):
        y = xp.max(x * 1.0, axis=0, keepdims=True)  # a reshape of a dropped reduction
        y[y > 0] = 0.0
        return xp.sum(y) + xp.sum(x)

    assert fg.grad(temporary_view_written)(np.ones(3)).tolist() == [1.0, 1.0, 1.0]
