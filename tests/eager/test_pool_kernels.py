"""Eager pooling through the compiled ``rt_pool`` kernels (``eager.bigpool``).

The kernels must give the NumPy references' results bit for bit (first maximum,
last NaN, the selected zero's sign, PyTorch's order of gradient additions), on the
shared views/geometry of ``codegen.pool_lower.pool_apply``; the eager Tensor must
route forward and backward pooling ops to them (and not with JIT disabled, nor
while ``fg.jit`` traces eager code), and agree with PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import config, nn
from fusegrad.codegen.pool_lower import pool_apply
from fusegrad.eager import bigpool
from fusegrad.ir.opdef import OPS
from fusegrad.ir.pool_ops import pool_out_shape
from fusegrad.nn import functional as F
from tests.helpers import assert_close

pytestmark = pytest.mark.compiled  # the kernels are used only with JIT enabled

# (input shape, kernel, strides, dilation, pad_lo, pad_hi)
GEOMETRIES = [
    ((3, 2, 11), (3,), (2,), (1,), (1,), (1,)),
    ((2, 17), (4,), (1,), (2,), (0,), (3,)),
    ((2, 3, 9, 10), (2, 2), (2, 2), (1, 1), (0, 0), (1, 0)),
    ((2, 3, 9, 10), (3, 3), (1, 2), (1, 1), (1, 1), (1, 2)),
    ((1, 2, 12, 8), (3, 2), (2, 1), (2, 3), (1, 0), (2, 1)),
    ((2, 2, 5, 6, 7), (2, 3, 2), (2, 1, 2), (1, 1, 2), (1, 0, 1), (0, 1, 1)),
    ((4, 40, 40), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0)),  # above LIMIT
    ((2, 3, 40, 40), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),  # above LIMIT, overlapping
]
IDS = [f"{len(g[1])}d-{'x'.join(map(str, g[0]))}-k{''.join(map(str, g[1]))}" for g in GEOMETRIES]


def _attrs(g):
    _, k, st, dl, lo, hi = g
    return dict(kernel=k, strides=st, dilation=dl, pad_lo=lo, pad_hi=hi)


def _data(shape, dtype, kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "ties":  # few distinct values: many equal maxima per window
        x = rng.integers(-2, 3, size=shape).astype(dtype)
    elif kind == "zeros":  # -0.0 and 0.0 only (and a few negatives)
        x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(dtype)
        x[rng.random(shape) < 0.1] = -1
    else:
        x = rng.normal(size=shape).astype(dtype)
    if kind == "nan":
        x[rng.random(shape) < 0.08] = np.nan
        x[rng.random(shape) < 0.05] = -np.inf
    return x


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)  # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


def _overlapping(attrs):
    return any(s < 1 + d * (k - 1) for s, d, k in zip(attrs["strides"], attrs["dilation"],
                                                       attrs["kernel"]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "nan", "zeros"])
@pytest.mark.parametrize("g", GEOMETRIES, ids=IDS)
def test_kernels_equal_the_numpy_references(g, kind, dtype):
    attrs = _attrs(g)
    x = _data(g[0], dtype, kind)
    nd = len(attrs["kernel"])
    oshape = x.shape[:x.ndim - nd] + pool_out_shape(x.shape[x.ndim - nd:], **attrs)
    gy = _data(oshape, dtype, "normal", seed=1)
    c = _data(x.shape, dtype, "normal", seed=2)
    tsize = dict(attrs, size=x.shape[x.ndim - nd:])
    cases = [("max_pool", (x,), attrs), ("max_pool_argmax", (x,), attrs),
             ("max_pool_grad", (x, gy), attrs), ("max_pool_take", (x, c), attrs),
             ("sum_pool", (x,), attrs), ("sum_pool_transpose", (gy,), tsize)]
    for name, args, kw in cases:
        ref = OPS[name].impl(*args, **kw)
        got = pool_apply(name, args, kw)
        if name == "sum_pool_transpose" and _overlapping(attrs):
            # the kernel adds each output's window in turn, the reference tap by tap:
            # another order of the additions where windows overlap, equal to rounding
            assert_close(got, ref, "f32" if dtype == np.float32 else "exact64", name)
            assert got.dtype == ref.dtype
        elif kind == "nan" and name.startswith("sum_pool"):
            _same(np.isnan(got), np.isnan(ref))  # -inf + inf: NaN in both; values aside
            ok = ~np.isnan(ref)
            _same(got[ok], ref[ok])
        else:
            _same(got, ref)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("g", GEOMETRIES[:6], ids=IDS[:6])
def test_integer_max_pool_equals_the_references(g, dtype):
    attrs = _attrs(g)
    x = np.random.default_rng(7).integers(0, 4, size=g[0]).astype(dtype)  # ties
    for name in ("max_pool", "max_pool_argmax"):
        assert bigpool.usable(name, (x,), attrs)
        _same(bigpool.apply(name, OPS[name].impl, (x,), attrs), OPS[name].impl(x, **attrs))
    assert not bigpool.usable("sum_pool", (x,), attrs)


def test_integer_eager_max_pool(monkeypatch):
    x = np.random.default_rng(8).integers(-3, 3, size=(2, 3, 9, 8)).astype(np.int32)
    spy = _Spy(monkeypatch)
    y, idx = F.max_pool2d(fg.tensor(x), 3, stride=2, padding=1, return_indices=True)
    assert spy.calls == ["max_pool", "max_pool_argmax"]
    a = dict(kernel=(3, 3), strides=(2, 2), dilation=(1, 1), pad_lo=(1, 1), pad_hi=(1, 1))
    assert y.numpy().dtype == np.int32
    _same(y.numpy(), OPS["max_pool"].impl(x, **a))
    _same(idx.numpy(), OPS["max_pool_argmax"].impl(x, **a))


def test_zero_size_and_all_padding_windows():
    attrs = dict(kernel=(3,), strides=(1,), dilation=(1,), pad_lo=(2,), pad_hi=(2,))
    x = np.zeros((2, 0), np.float32)
    for name in ("max_pool", "max_pool_argmax", "sum_pool"):
        _same(pool_apply(name, (x,), attrs), OPS[name].impl(x, **attrs))
    x = np.ones((2, 1), np.float64)
    attrs = dict(kernel=(2,), strides=(3,), dilation=(1,), pad_lo=(2,), pad_hi=(2,))
    for name in ("max_pool", "max_pool_argmax"):  # the first window is all padding
        _same(pool_apply(name, (x,), attrs), OPS[name].impl(x, **attrs))


class _Spy:
    def __init__(self, monkeypatch):
        self.calls = []
        real = bigpool.pool_apply

        def spy(name, arrays, attrs):
            self.calls.append(name)
            return real(name, arrays, attrs)
        monkeypatch.setattr(bigpool, "pool_apply", spy)


EAGER = [  # (function, input shape, kwargs)
    (F.max_pool1d, (2, 3, 15), dict(kernel_size=3, stride=2, padding=1)),
    (F.max_pool2d, (2, 3, 10, 9), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (F.max_pool2d, (2, 3, 10, 9), dict(kernel_size=2, dilation=2)),
    (F.max_pool2d, (4, 8, 32, 32), dict(kernel_size=2)),  # above LIMIT
    (F.max_pool2d, (4, 8, 32, 32), dict(kernel_size=3, stride=1, padding=1)),
    (F.max_pool3d, (1, 2, 6, 7, 5), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2),
                                         padding=(1, 1, 0), ceil_mode=True)),
    (F.avg_pool1d, (2, 3, 15), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    (F.avg_pool2d, (2, 3, 10, 9), dict(kernel_size=3, stride=2, padding=1)),
    (F.avg_pool2d, (4, 8, 32, 32), dict(kernel_size=2)),  # above LIMIT
    (F.avg_pool3d, (1, 2, 6, 7, 5), dict(kernel_size=2, count_include_pad=False, padding=1)),
]
EIDS = [f"{f.__name__}-{'x'.join(map(str, s))}-{i}" for i, (f, s, _) in enumerate(EAGER)]


def _eager(fn, x, kw, gy=None):
    t = fg.tensor(x, requires_grad=True)
    y = fn(t, **kw)
    if gy is None:
        gy = _data(tuple(y.shape), x.dtype, "normal", seed=3)
    y.backward(fg.tensor(gy))
    return y.detach().numpy(), t.grad.numpy(), gy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
@pytest.mark.parametrize("fn, shape, kw", EAGER, ids=EIDS)
def test_eager_equals_the_references_and_uses_the_kernels(fn, shape, kw, kind, dtype,
                                                          monkeypatch):
    if kind != "normal" and fn.__name__.startswith("avg"):
        pytest.skip("ties/NaN matter to max pooling only")
    x = _data(shape, dtype, kind)
    spy = _Spy(monkeypatch)
    for _ in range(2):  # the first call is recorded, the second replayed
        y, gx, gy = _eager(fn, x, kw)
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    n = len(spy.calls)
    y0, gx0, _ = _eager(fn, x, kw, gy)
    assert len(spy.calls) == n  # JIT disabled: the NumPy references
    _same(y, y0)
    if fn.__name__.startswith("avg"):  # sum_pool_transpose: overlapping windows' additions
        assert_close(gx, gx0, "f32" if dtype == np.float32 else "exact64", "avg grad")
    else:
        _same(gx, gx0)
    big = x.size > bigpool.LIMIT
    if fn.__name__.startswith("max"):
        # forward kernel up to LIMIT, max_pool_grad's kernel always, both calls
        assert spy.calls.count("max_pool_grad") == 2
        assert spy.calls.count("max_pool") == (0 if big else 2)
    else:
        assert spy.calls.count("sum_pool") == (0 if big else 2)
        assert spy.calls.count("sum_pool_transpose") == (0 if big else 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "nan"])
@pytest.mark.parametrize("fn, shape, kw", EAGER, ids=EIDS)
def test_eager_matches_pytorch(fn, shape, kw, kind, dtype):
    torch = pytest.importorskip("torch")
    if kind != "normal" and fn.__name__.startswith("avg"):
        pytest.skip("ties/NaN matter to max pooling only")
    x = _data(shape, dtype, kind)
    y, gx, gy = _eager(fn, x, kw)
    tx = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.nn.functional, fn.__name__)(tx, **kw)
    ty.backward(torch.tensor(gy))
    if fn.__name__.startswith("max"):
        _same(y, ty.detach().numpy())
        _same(gx, tx.grad.numpy())  # same selected taps, same order of additions
    else:
        k = "f32" if dtype == np.float32 else "exact64"
        assert_close(y, ty.detach().numpy(), k, "avg forward")
        assert_close(gx, tx.grad.numpy(), k, "avg grad")


@pytest.mark.parametrize("fn, shape, kw", [EAGER[1], EAGER[5], EAGER[7], EAGER[9]],
                         ids=[EIDS[1], EIDS[5], EIDS[7], EIDS[9]])
def test_eager_gradients_match_finite_differences(fn, shape, kw):
    x = np.random.default_rng(4).permutation(np.prod(shape)).reshape(shape) * 0.1 + 0.3
    gy = None
    _, gx, gy = _eager(fn, x, kw, gy)

    def f(v):
        return float(np.sum(fn(fg.tensor(v), **kw).numpy() * gy))
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (f(x + e) - f(x - e)) / (2 * eps)
    np.testing.assert_allclose(gx, fd, rtol=1e-6, atol=1e-7)


def test_eager_second_order_through_the_pooling_kernels(monkeypatch):
    # d/dx of <grad_x sum(max_pool(x)^2 * w), v>: through max_pool_grad and max_pool_take
    shape, kw = (1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1)
    rng = np.random.default_rng(5)
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.1 + 0.3
    w = rng.normal(size=(1, 2, 4, 3))
    v = rng.normal(size=shape)

    def first(xv, create_graph):
        t = fg.tensor(xv, requires_grad=True)
        loss = (F.max_pool2d(t, **kw) ** 2 * fg.tensor(w)).sum()
        (gx,) = fg.autograd.grad(loss, [t], create_graph=create_graph)
        return t, gx

    spy = _Spy(monkeypatch)
    t, gx = first(x, True)
    (hv,) = fg.autograd.grad((gx * fg.tensor(v)).sum(), [t])
    assert "max_pool_take" in spy.calls or "max_pool_grad" in spy.calls
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        gp = first(x + e, False)[1].numpy()
        gm = first(x - e, False)[1].numpy()
        fd[i] = np.sum((gp - gm) * v) / (2 * eps)
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-5, atol=1e-6)


def test_jit_over_eager_pooling_traces(monkeypatch):
    fg.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
                          nn.AvgPool2d(2))

    def step(x):
        model.zero_grad()
        loss = (model(x) ** 2).sum()
        loss.backward()
        return loss

    x = fg.tensor(np.random.default_rng(6).normal(size=(2, 2, 8, 8)).astype(np.float32))
    l1 = step(x)
    g1 = [p.grad.numpy().copy() for p in model.parameters()]
    spy = _Spy(monkeypatch)
    jstep = fg.jit(step)
    l2 = jstep(x)
    assert spy.calls == []  # traced and compiled: no eager kernel call
    assert_close(l2.numpy(), l1.detach().numpy(), "f32", "loss")
    for a, p in zip(g1, model.parameters()):
        assert_close(p.grad.numpy(), a, "f32", "grad")
