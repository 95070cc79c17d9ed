"""``.njit(*example)``: fusegrad callables as Numba dispatchers, called from ``@njit`` code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import interpreted

pytestmark = pytest.mark.compiled


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def layer(x, w):
    return fnp.sum(fnp.tanh(x @ w) ** 2) + fnp.sum(x[1:, :] * 2.0)


def _tol(dtype):
    return {"rtol": 1e-12, "atol": 1e-14} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grad_called_from_njit_for_several_shapes(dtype):
    g = fg.grad(w1).njit(np.zeros(4, dtype))

    @numba.njit
    def call(x):
        return g(x)

    rng = np.random.default_rng(0)
    for n in (1, 3, 1000, 4099):
        x = rng.standard_normal(n).astype(dtype)
        got = call(x)
        assert got.dtype == dtype and got.shape == (n,)
        np.testing.assert_allclose(got, interpreted(fg.grad(w1), x), **_tol(dtype))


def test_grad_in_prange_loop_equals_per_row_grad():
    g = fg.grad(w1).njit(np.zeros(3))

    @numba.njit(parallel=True)
    def rows(X):
        out = np.empty_like(X)
        for i in numba.prange(X.shape[0]):
            out[i] = g(X[i])
        return out

    X = np.random.default_rng(1).standard_normal((64, 33))
    want = np.stack([fg.grad(w1)(x) for x in X])  # compiled: the same bits
    for _ in range(3):  # concurrent calls share no scratch: the same answer every time
        np.testing.assert_array_equal(rows(X), want)


def test_value_and_grad_of_two_matrices_for_other_extents():
    vg = fg.value_and_grad(layer, argnums=(0, 1))
    e = vg.njit(np.ones((5, 3)), np.ones((3, 4)))
    rng = np.random.default_rng(2)
    for m, k, n in ((5, 3, 4), (9, 2, 7), (2, 6, 2), (40, 17, 3)):
        x, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        value, gx, gw = e(x, w)
        want_value, (want_gx, want_gw) = interpreted(vg, x, w)
        np.testing.assert_allclose(value, want_value, rtol=1e-12)
        np.testing.assert_allclose(gx, want_gx, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gw, want_gw, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="matmul"):
        e(np.ones((4, 3)), np.ones((2, 4)))  # inner extents differ: no matrix product


def test_exported_derivatives_match_finite_differences_to_second_order():
    fwd = fg.jit(w1).njit(np.zeros(3))
    g = fg.grad(w1).njit(np.zeros(3))
    h = fg.hvp(w1).njit(np.zeros(3), np.zeros(3))
    rng = np.random.default_rng(3)
    x, u = rng.standard_normal(11), rng.standard_normal(11)
    eps = 1e-5
    fd1 = (fwd(x + eps * u) - fwd(x - eps * u)) / (2 * eps)
    np.testing.assert_allclose(g(x) @ u, fd1, rtol=1e-7)
    fd2 = (g(x + eps * u) - g(x - eps * u)) / (2 * eps)
    np.testing.assert_allclose(h(x, u), fd2, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(h(x, u), interpreted(fg.hvp(w1), x, u), rtol=1e-12)
    hess = np.stack([h(x, row) for row in np.eye(11)])
    np.testing.assert_allclose(hess, interpreted(fg.hessian(w1), x), rtol=1e-10, atol=1e-12)


def test_scalar_function_exports_scalar_to_scalar():
    d = fg.grad(lambda t: fnp.sin(t) * t ** 3).njit(1.0)

    @numba.njit
    def total(ts):
        s = 0.0
        for t in ts:
            s += d(t)
        return s

    ts = np.linspace(-2, 2, 7)
    want = sum(np.cos(t) * t ** 3 + 3 * np.sin(t) * t ** 2 for t in ts)
    np.testing.assert_allclose(total(ts), want, rtol=1e-12)


def test_closed_over_array_is_part_of_the_export():
    c = np.array([1.0, -2.0, 0.5])
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x * c) ** 2)).njit(np.zeros(3))
    x = np.array([0.3, 0.1, -0.7])
    np.testing.assert_allclose(g(x), 2 * np.sin(x * c) * np.cos(x * c) * c, rtol=1e-12)


def test_size_dependent_structure_is_traced_again_for_each_size():
    def unrolled(x):
        total = x[0]
        for i in range(1, x.shape[0]):  # unrolled while tracing: one trace per size
            total = total * fnp.cos(x[i])
        return total

    g = fg.grad(unrolled).njit(np.zeros(4))

    @numba.njit
    def call(x):
        return g(x)

    for x in (np.array([0.5, 0.2, -0.3, 1.1]), np.linspace(-1.0, 1.0, 5), np.ones(1)):
        np.testing.assert_allclose(call(x), interpreted(fg.grad(unrolled), x), rtol=1e-12)


def test_second_process_loads_the_machine_code_from_the_cache(tmp_path):
    script = tmp_path / "export_once.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, fusegrad as fg, fusegrad.numpy as fnp

        def f(x):
            return fnp.sum(fnp.log1p(x * x) * fnp.cos(x))

        from fusegrad.codegen.lean import engine

        g = fg.grad(f).njit(np.zeros(2))
        x = np.linspace(-1, 1, 5)
        assert np.array_equal(g(x), fg.grad(f)(x))
        print(engine.stats()["loaded"], engine.stats()["compiled"])
    """))
    env = {**os.environ, "FUSEGRAD_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    loaded, compiled = map(int, runs[1].stdout.split())
    assert loaded >= 1 and compiled == 0
    assert int(runs[0].stdout.split()[1]) >= 1  # the first process compiled it


def test_other_transforms_export_through_jit():
    jac = fg.jit(fg.jacfwd(lambda x: fnp.sin(x) * x[::-1])).njit(np.zeros(3))
    x = np.array([0.2, -0.5, 1.3])
    np.testing.assert_allclose(jac(x), interpreted(fg.jacfwd(lambda x: fnp.sin(x) * x[::-1]), x),
                               rtol=1e-12)
    tangent = fg.jit(lambda x, v: fg.jvp(w1, (x,), (v,))[1]).njit(np.zeros(3), np.zeros(3))
    x, v = np.linspace(-1, 1, 9), np.linspace(0, 2, 9)
    np.testing.assert_allclose(tangent(x, v), interpreted(fg.grad(w1), x) @ v, rtol=1e-12)


def test_strided_slices_stay_shape_generic():
    def f(x):
        return fnp.sum(fnp.sin(x[::2])) * fnp.sum(x[1::2] ** 2) + fnp.sum(x[::3])

    e = fg.grad(f).njit(np.zeros(6))
    for n in (6, 7, 11, 40):
        x = np.linspace(-1, 2, n)
        np.testing.assert_allclose(e(x), interpreted(fg.grad(f), x), rtol=1e-12, atol=1e-15)


def test_a_program_with_ops_run_between_segments_is_called_through_python():
    def f(x):  # cumsum is not lowered: its segments run from Python (numba.objmode)
        return fnp.sum(fnp.cumsum(fnp.sin(x)) ** 2)

    g = fg.grad(f).njit(np.zeros(4))

    @numba.njit
    def call(x):
        return g(x)

    for n in (4, 6):
        x = np.linspace(-1.0, 1.0, n)
        np.testing.assert_allclose(call(x), interpreted(fg.grad(f), x), rtol=1e-12)


def test_an_index_out_of_range_raises_index_error():
    def f(x, i):
        return fnp.sum(fnp.take(x, i) ** 2)

    g = fg.grad(f).njit(np.zeros(4), np.zeros(2, np.int64))
    np.testing.assert_array_equal(g(np.ones(4), np.array([0, 3])), [2.0, 0.0, 0.0, 2.0])
    with pytest.raises(IndexError, match="out of range in @f"):
        g(np.ones(4), np.array([0, 7]))


def test_new_extents_reuse_the_entry():
    # the C entry reads its sizes from the arena's table: a new extent traces again but
    # compiles no module, and the dispatcher finds it in its native table after that
    from fusegrad.codegen.lean import engine

    g = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x * 1.375))
    exported = g.njit(np.ones(200))  # above SMALL_KERNEL: its extent is read at run time
    before = engine.stats()["compiled"]
    for n in (170, 300, 170):
        x = np.linspace(-1.0, 1.0, n)
        np.testing.assert_allclose(exported(x), np.sin(x) * 1.375 + x * np.cos(x) * 1.375,
                                   rtol=1e-13, atol=1e-14)
    assert engine.stats()["compiled"] == before
