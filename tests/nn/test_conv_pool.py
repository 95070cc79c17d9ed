"""Convolutions and pooling against PyTorch (values and gradients), finite differences
to second order, and the compiled path (``fg.jit(fg.grad(...))``)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.nn import functional as F
from tests.helpers import assert_close, check_grads

torch = pytest.importorskip("torch")
TF = torch.nn.functional

CONV = [  # (nd, x shape, w shape, kwargs)
    (1, (2, 4, 9), (6, 2, 3), {"stride": 2, "padding": 1, "dilation": 1, "groups": 2}),
    (1, (2, 3, 8), (4, 3, 3), {"padding": "same", "dilation": 2}),
    (2, (2, 3, 7, 6), (4, 3, 3, 2), {"stride": (2, 1), "padding": (1, 0)}),
    (2, (1, 4, 6, 7), (4, 1, 3, 3), {"padding": "same", "groups": 4}),
    (2, (2, 2, 9, 8), (3, 2, 2, 3), {"stride": 3, "dilation": (2, 1), "padding": "valid"}),
]


def _rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("nd,xs,ws,kw", CONV)
@pytest.mark.parametrize("dtype,tol", [(np.float64, "exact64"), (np.float32, "f32")])
def test_conv_matches_torch_values_and_grads(nd, xs, ws, kw, dtype, tol):
    rng = _rng()
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in (xs, ws, (ws[0],)))
    fconv, tconv = (F.conv1d, TF.conv1d) if nd == 1 else (F.conv2d, TF.conv2d)
    fx, fw, fb = (fg.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out, ref = fconv(fx, fw, fb, **kw), tconv(tx, tw, tb, **kw)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    assert_close(out.detach().numpy(), ref.detach().numpy(), tol)
    g = rng.standard_normal(ref.shape).astype(dtype)
    out.backward(fg.tensor(g))
    ref.backward(torch.tensor(g))
    for a, r in ((fx, tx), (fw, tw), (fb, tb)):
        assert_close(a.grad.numpy(), r.grad.numpy(), tol)


def test_unbatched_conv_matches_torch():
    rng = _rng(1)
    x, w = rng.standard_normal((3, 6, 5)), rng.standard_normal((2, 3, 3, 3))
    assert_close(F.conv2d(fg.tensor(x), fg.tensor(w), padding=1).numpy(),
                 TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy(), "exact64")


@pytest.mark.parametrize("nd,xs,ws,kw", CONV[:3])
def test_conv_second_order_finite_differences(nd, xs, ws, kw):
    rng = _rng(2)
    fconv = F.conv1d if nd == 1 else F.conv2d
    args = [rng.standard_normal(xs), rng.standard_normal(ws)]
    check_grads(lambda x, w: fconv(x, w, **kw), args, order=2)


POOL = [
    ("max", 2, (2, 3, 7, 6), {"kernel_size": 2}),
    ("max", 2, (2, 2, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max", 2, (1, 2, 9, 9), {"kernel_size": (3, 2), "stride": (2, 3), "dilation": 2}),
    ("max", 1, (2, 3, 11), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("avg", 2, (2, 3, 7, 6), {"kernel_size": 2}),
    ("avg", 2, (2, 2, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg", 2, (2, 2, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                              "count_include_pad": False}),
    ("avg", 2, (1, 2, 6, 6), {"kernel_size": 3, "padding": 1, "divisor_override": 4}),
    ("avg", 1, (2, 3, 11), {"kernel_size": 4, "stride": 3, "padding": 2,
                            "count_include_pad": False}),
]


def _pool_fns(kind, nd):
    name = f"{kind}_pool{nd}d"
    return getattr(F, name), getattr(TF, name)


@pytest.mark.parametrize("kind,nd,xs,kw", POOL)
def test_pool_matches_torch_values_and_grads(kind, nd, xs, kw):
    rng = _rng(3)
    x = rng.standard_normal(xs)
    f, t = _pool_fns(kind, nd)
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = f(fx, **kw), t(tx, **kw)
    assert_close(out.detach().numpy(), ref.detach().numpy(), "exact64")
    g = rng.standard_normal(ref.shape)
    out.backward(fg.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")


def test_max_pool_ties_route_to_the_first_maximum_as_torch():
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 2.0], [0.0, 2.0, 2.0]]]])
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.max_pool2d(fx, 2, 1).sum().backward()
    TF.max_pool2d(tx, 2, 1).sum().backward()
    assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")
    assert fx.grad.numpy()[0, 0, 0, 0] == 1.0  # the first of four tied ones


@pytest.mark.parametrize("kind,nd,xs,kw", [POOL[1], POOL[6]])
def test_pool_second_order_finite_differences(kind, nd, xs, kw):
    rng = _rng(4)
    x = rng.permutation(np.prod(xs)).reshape(xs) * 0.1  # distinct: no ties in a window
    f, _ = _pool_fns(kind, nd)
    check_grads(lambda x: f(x, **kw) ** 2, [x], order=2)


def test_compiled_grad_of_conv_and_pool_matches_torch():
    """One compiled gradient through conv2d (strided, padded, grouped), max and avg
    pooling and conv1d, against PyTorch."""
    rng = _rng(5)
    x = rng.standard_normal((2, 4, 9, 8))
    w1 = rng.standard_normal((6, 2, 3, 3))
    w2 = rng.standard_normal((3, 6, 2))

    def loss(x, w1, w2, lib, fn):
        y = fn.conv2d(x, w1, stride=(2, 1), padding=1, groups=2)
        y = fn.max_pool2d(y, 2, ceil_mode=True) + fn.avg_pool2d(y, 2, ceil_mode=True)
        y = lib.reshape(y, (2, 6, -1))
        z = fn.conv1d(y, w2, padding="same", dilation=2)
        return lib.sum(lib.tanh(z) * z)

    g = fg.jit(fg.grad(lambda *a: loss(*a, fg.numpy, F), argnums=(0, 1, 2)))(x, w1, w2)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w1, w2)]
    loss(*ts, torch, TF).backward()
    for a, t in zip(g, ts):
        assert_close(a, t.grad.numpy(), "exact64")
    ge = fg.grad(lambda *a: loss(*a, fg.numpy, F), argnums=(0, 1, 2))(x, w1, w2)
    for a, b in zip(g, ge):
        assert_close(a, b, "exact64")


def test_conv_vmap_matches_loop():
    rng = _rng(6)
    xs, w = rng.standard_normal((3, 2, 2, 5, 5)), rng.standard_normal((3, 4, 1, 3, 3))
    out = fg.vmap(lambda x, w: F.conv2d(x, w, padding=1, groups=2))(xs, w)
    for i in range(3):
        assert_close(out[i], F.conv2d(xs[i], w[i], padding=1, groups=2), "exact64")
