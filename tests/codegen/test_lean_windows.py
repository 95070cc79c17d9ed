"""Convolution and pooling lowered natively by the lean code generator
(``codegen/lean/windows.py``, ``convolve.py``, ``pooling.py``): programs with them compile
whole (no op left to NumPy between segments), against the interpreter and finite
differences through compiled code, to second order.

Pooling gives the interpreter's bits, zeros' signs included (NaNs compare as NaNs: which
of two NaNs a sum keeps is not specified, LLVM may commute an addition). Convolutions
are compared under the tolerance policy (``"exact64"``, ``"f32"``): both sides multiply
through BLAS, but the interpreter through NumPy's OpenBLAS build and compiled code
through SciPy's, NumPy calls ``gemv`` for a product with one row or column, and
``conv_impl`` adds shifted products where there are fewer output than input channels.
Elsewhere the two are usually bitwise equal (the columns are laid out as
``conv_impl``'s, and each ``gemm`` is NumPy's)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen import lean
from fusegrad.ir import ops
from fusegrad.ir.pool_ops import pool_out_shape
from fusegrad.nn import functional as F
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import lean_exec
from fusegrad.tracer import trace_pytree
from tests.helpers import FD_STEP, assert_close, interpreted, lowered_natively, pair

pytestmark = pytest.mark.compiled


def _conv_attrs(nd, stride=None, padding=None, lhs=None, rhs=None, groups=1):
    return {"stride": stride or (1,) * nd, "padding": padding or (0,) * (2 * nd),
            "lhs_dilation": lhs or (1,) * nd, "rhs_dilation": rhs or (1,) * nd,
            "groups": groups}


#: (id, x shape, w shape, attributes, dtype)
CONV_CASES = [
    ("1d", (1, 2, 9), (3, 2, 3), _conv_attrs(1), np.float64),
    ("1d-stride-crop-dilated", (2, 3, 11), (4, 3, 3),
     _conv_attrs(1, (2,), (2, -1), rhs=(2,)), np.float32),
    ("2d-groups-padding", (3, 4, 7, 6), (6, 2, 3, 2),
     _conv_attrs(2, (2, 1), (1, 1, 0, 2), groups=2), np.float64),
    ("2d-transposed", (2, 3, 5, 4), (2, 3, 3, 3),
     _conv_attrs(2, (1, 2), (2, 2, -1, 1), lhs=(2, 3)), np.float64),
    ("2d-crop-f32", (2, 2, 8, 8), (3, 2, 3, 3),
     _conv_attrs(2, (1, 1), (-1, -2, 1, -1), rhs=(1, 2)), np.float32),
    ("2d-weight-gradient-layout", (2, 3, 9, 8), (2, 3, 7, 6), _conv_attrs(2), np.float64),
    ("2d-fewer-outputs", (2, 6, 7, 7), (2, 6, 3, 3),
     _conv_attrs(2, padding=(1, 1, 1, 1)), np.float64),
    ("3d-groups-dilations", (2, 3, 5, 6, 4), (6, 1, 2, 3, 2),
     _conv_attrs(3, (1, 2, 1), (0, 1, 1, 0, 1, 1), (1, 1, 2), (2, 1, 1), 3), np.float64),
    ("3d-f32", (1, 2, 4, 5, 6), (2, 2, 3, 1, 3), _conv_attrs(3, (2, 1, 2)), np.float32),
]

#: convolutions with an empty result or an empty product
EMPTY_CASES = [
    ("no-images", (0, 2, 5), (3, 2, 2), _conv_attrs(1)),
    ("kernel-longer-than-input", (2, 2, 3), (3, 2, 5), _conv_attrs(1)),
    ("no-input-channels", (2, 0, 5, 5), (3, 0, 2, 2), _conv_attrs(2)),
    ("empty-kernel-axis", (1, 2, 4, 4), (3, 2, 0, 2), _conv_attrs(2)),
    ("empty-input-padded", (2, 1, 0), (2, 1, 2), _conv_attrs(1, padding=(2, 1))),
]


def _conv(attrs):
    return lambda x, w: ops.conv(x, w, **attrs)


def _one_program(f, *args) -> None:
    """``f`` at ``args`` (pytrees of arrays) compiles to one native program: every op
    lowered, one segment."""
    fused = fuse(simplify(trace_pytree(f, args).function))
    assert all(lean.lowers(op) for op in fused.ops)
    assert lean_exec.segments(fused) == [fused]


def _close(got, want, dtype) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert_close(got, want, "exact64" if dtype == np.float64 else "f32")


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[0])
def test_conv_equals_interpreter(case):
    _, xs, ws, attrs, dtype = case
    rng = np.random.default_rng(len(xs) + sum(ws))
    x, w = rng.normal(size=xs).astype(dtype), rng.normal(size=ws).astype(dtype)
    f = _conv(attrs)
    assert lowered_natively(f, x, w)
    _one_program(f, x, w)
    _close(fg.jit(f)(x, w), interpreted(f, x, w), dtype)


@pytest.mark.parametrize("case", EMPTY_CASES, ids=lambda c: c[0])
def test_conv_of_zero_size(case):
    _, xs, ws, attrs = case
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    f = _conv(attrs)
    assert lowered_natively(f, x, w)
    got, want = fg.jit(f)(x, w), interpreted(f, x, w)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # zeros, or nothing


def _fd_check(f, args, seed: int = 0) -> None:
    """``<u, grad f>`` from compiled code against central differences of compiled ``f``
    along a random ``u``; then the same for ``h = <grad f, v>`` (second derivatives),
    every program native."""
    rng = np.random.default_rng(seed)
    argnums = tuple(range(len(args)))

    def check(fun):
        assert lowered_natively(fg.grad(fun, argnums=argnums), *args)
        grads = fg.jit(fg.grad(fun, argnums=argnums))(*args)
        value = fg.jit(fun)
        u = [rng.normal(size=a.shape) for a in args]
        size = max(np.abs(d).max() for d in u)
        u = [d / size for d in u]
        h = FD_STEP * max(1.0, *(float(np.abs(a).max()) for a in args))

        def along(t):
            return float(value(*(a + t * d for a, d in zip(args, u))))
        numeric = (8 * (along(h) - along(-h)) - (along(2 * h) - along(-2 * h))) / (12 * h)
        assert_close(sum(pair(d, g) for d, g in zip(u, grads)), numeric, "fd")

    check(f)
    v = [rng.normal(size=a.shape) for a in args]

    def second(*xs):
        return sum(fnp.sum(g * d) for g, d in zip(fg.grad(f, argnums=argnums)(*xs), v))
    check(second)


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=[pytest.mark.slow] if i in (1, 2) else [])  # (pytest -m slow)
    for i, c in enumerate([c for c in CONV_CASES if c[4] == np.float64][:4] + [CONV_CASES[7]])
], ids=lambda c: c[0])
def test_conv_gradients_to_second_order(case):
    _, xs, ws, attrs, _ = case
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=xs), rng.normal(size=ws) * 0.5
    cot = rng.normal(size=interpreted(_conv(attrs), x, w).shape)

    def f(x, w):
        return fnp.sum(fnp.tanh(ops.conv(x, w, **attrs)) * cot)
    _fd_check(f, [x, w])


def _geometry(kernel, strides=None, dilation=None, pad_lo=None, pad_hi=None):
    nd = len(kernel)
    return {"kernel": kernel, "strides": strides or kernel, "dilation": dilation or (1,) * nd,
            "pad_lo": pad_lo or (0,) * nd, "pad_hi": pad_hi or (0,) * nd}


#: (id, input shape, geometry, dtype)
POOL_CASES = [
    ("1d-overlapping-dilated-padded", (2, 3, 11), _geometry((3,), (1,), (2,), (1,), (2,)),
     np.float64),
    ("2d-disjoint-f32", (2, 3, 8, 9), _geometry((2, 2)), np.float32),
    ("2d-3x3-stride-2-padded", (2, 2, 9, 10), _geometry((3, 3), (2, 2), None, (1, 1),
                                                        (1, 1)), np.float64),
    ("3d-mixed", (2, 5, 6, 7), _geometry((2, 1, 3), (1, 2, 1), (1, 1, 2), (1, 0, 2),
                                        (0, 1, 1)), np.float64),
    ("windows-of-padding-only", (3, 2, 2), _geometry((1, 2), (3, 2), None, (2, 0),
                                                     (3, 3)), np.float64),
    ("large-kernel", (2, 9, 9), _geometry((6, 6), (1, 2), None, (2, 1), (2, 1)),
     np.float64),
    ("no-planes", (0, 3, 6), _geometry((2,), (1,)), np.float64),
    ("empty-pooled-axis-padded", (2, 0, 3), _geometry((1, 2), (1, 1), None, (1, 0),
                                                      (1, 0)), np.float32),
]


def _all_pools(geo, size):
    def f(x, g, c):
        return (ops.max_pool(x, **geo), ops.max_pool_argmax(x, **geo),
                ops.max_pool_grad(x, g, **geo), ops.max_pool_take(x, c, **geo),
                ops.sum_pool(x, **geo), ops.sum_pool_transpose(g, size=size, **geo))
    return f


def _same_bits(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        nan = np.isnan(w) if w.dtype.kind == "f" else np.zeros(w.shape, bool)
        np.testing.assert_array_equal(np.isnan(g) if w.dtype.kind == "f" else nan, nan)
        assert g[~nan].tobytes() == w[~nan].tobytes()


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: c[0])
def test_pooling_gives_the_interpreters_bits(case):
    _, xs, geo, dtype = case
    nd = len(geo["kernel"])
    rng = np.random.default_rng(len(xs))
    # ties, signed zeros, infinities and NaNs among ordinary values
    special = np.array([0.0, -0.0, 1.0, 1.0, -np.inf, np.inf, np.nan, -2.5], dtype)
    x = rng.normal(size=xs).astype(dtype)
    pick = rng.random(xs) < 0.4
    x[pick] = rng.choice(special, size=int(pick.sum()))
    qs = xs[:len(xs) - nd] + pool_out_shape(xs[len(xs) - nd:], **geo)
    # cotangents with a -0.0 and magnitudes far apart, so that the order of additions
    # shows in the bits
    g = (rng.choice([1.0, -0.0, 1e16, -3.0, 0.1], size=qs) * rng.random(qs)).astype(dtype)
    c = rng.normal(size=xs).astype(dtype)
    f = _all_pools(geo, xs[len(xs) - nd:])
    _one_program(f, x, g, c)
    _same_bits(fg.jit(f)(x, g, c), interpreted(f, x, g, c))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_integer_max_pool_gives_the_interpreters_bits(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    x = rng.choice(np.array([info.min, info.max, 0, 1, 1, 2], dtype), size=(2, 3, 7, 6))
    geo = _geometry((3, 2), (2, 2), (1, 2), (1, 1), (2, 0))

    def f(x):
        return ops.max_pool(x, **geo), ops.max_pool_argmax(x, **geo)
    _one_program(f, x)
    _same_bits(fg.jit(f)(x), interpreted(f, x))


def _distinct(rng, shape):
    """Values at least 2 / size apart (no ties, no kink within a finite-difference step)."""
    n = int(np.prod(shape))
    return rng.permutation(np.linspace(-2.0, 2.0, n)).reshape(shape)


@pytest.mark.parametrize("geo", [_geometry((2, 2)), _geometry((3, 2), (2, 1), (1, 2),
                                                              (1, 1), (1, 0))],
                         ids=["disjoint", "overlapping-padded"])
def test_pooling_gradients_to_second_order(geo):
    rng = np.random.default_rng(4)
    x = _distinct(rng, (2, 2, 6, 7))
    qs = (2, 2) + pool_out_shape((6, 7), **geo)
    r, s = rng.normal(size=qs), rng.normal(size=qs)

    def f(x):
        m = ops.max_pool(x, **geo)
        return fnp.sum(m * m * r) + fnp.sum(fnp.sin(ops.sum_pool(x, **geo)) * s)
    _fd_check(f, [x])


def _cnn_loss(params, x, y):
    w, b, w2, b2 = params
    h = F.max_pool2d(fnp.maximum(F.conv2d(x, w, b, padding=1), 0.0), 2)
    logits = fnp.reshape(h, (h.shape[0], -1)) @ w2 + b2
    return fnp.mean(fnp.sum((logits - y) ** 2, axis=1))


def _cnn_step(params, x, y):
    grads = fg.grad(_cnn_loss)(params, x, y)
    return tuple(p - 0.1 * g for p, g in zip(params, grads))


def test_cnn_training_step_is_one_native_program():
    """Convolution, ReLU, max pooling and a dense layer, and their gradients: one
    native call, which releases the GIL around its work."""
    rng = np.random.default_rng(5)
    params = (rng.normal(size=(4, 1, 3, 3)) * 0.3, np.zeros(4),
              rng.normal(size=(4 * 6 * 6, 3)) * 0.1, np.zeros(3))
    x, y = rng.normal(size=(8, 1, 12, 12)), rng.normal(size=(8, 3))
    _one_program(_cnn_step, params, x, y)
    traced = trace_pytree(_cnn_step, (params, x, y))
    assert "PyEval_SaveThread" in lean.source(fuse(simplify(traced.function)))
    for got, want in zip(fg.jit(_cnn_step)(params, x, y), interpreted(_cnn_step, params, x, y)):
        assert_close(got, want, "exact64")


def test_windows_in_a_scan_body():
    """Convolution and pooling inside a control-flow region run natively too."""
    rng = np.random.default_rng(6)
    w = rng.normal(size=(2, 2, 3)) * 0.5
    xs = rng.normal(size=(4, 1, 2, 8))

    def f(w, xs):
        def step(h, x):
            y = fnp.tanh(F.conv1d(x + h, w, padding=1))
            return y, fnp.sum(F.max_pool1d(y, 3, 1, 1)) + fnp.sum(F.avg_pool1d(y, 2))
        return fg.scan(step, np.zeros((1, 2, 8)), xs)

    _one_program(f, w, xs)
    for got, want in zip(fg.jit(f)(w, xs), interpreted(f, w, xs)):
        assert_close(got, want, "exact64")
