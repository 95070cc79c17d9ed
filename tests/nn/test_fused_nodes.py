"""The fused eager nodes (``eager.fused``, ``nn.fused``): layer_norm, softmax, log_softmax,
gelu, linear, nll_loss / cross_entropy and the 2-norm are one autograd node each on concrete
Tensors. Values against NumPy references, gradients against finite differences and
against the IR composite (``fg.grad`` on arrays), double backward, ``fg.jit``,
forward-mode AD, and PyTorch in float32 when installed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.autograd import forward_ad as fwd
from fusegrad.autograd import gradcheck, gradgradcheck
from tests.helpers import assert_close, numeric_grads

pytestmark = pytest.mark.usefixtures("default_float64")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 5))
X3 = RNG.standard_normal((2, 3, 4))
W = RNG.standard_normal(5)
B = RNG.standard_normal(5)
CW = RNG.random(5) + 0.5
W2 = RNG.standard_normal((4, 5))
B4 = RNG.standard_normal(4)
W34 = RNG.standard_normal((5, 4))
T = np.array([0, 4, 2])
T_IGN = np.array([1, -100, 3])


def np_layer_norm(x, w, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def np_log_softmax(x, axis):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def np_nll(logp, t, w=None, ignore=-100, reduction="mean"):
    wt = np.ones(logp.shape[1]) if w is None else w
    valid = t != ignore
    tc = np.where(valid, t, 0)
    wi = np.where(valid, wt[tc], 0.0)
    loss = -logp[np.arange(len(t)), tc] * wi
    return {"mean": loss.sum() / wi.sum(), "sum": loss.sum(), "none": loss}[reduction]


def np_cross_entropy(x, t, w=None, ignore=-100, reduction="mean", eps=0.0):
    logp = np_log_softmax(x, 1)
    loss = np_nll(logp, t, w, ignore, reduction)
    if not eps:
        return loss
    wt = np.ones(x.shape[1]) if w is None else w
    valid = t != ignore
    smooth = np.where(valid, -(logp * wt).sum(1) / x.shape[1], 0.0)
    if reduction == "mean":
        wi = np.where(valid, wt[np.where(valid, t, 0)], 0.0)
        smooth = smooth.sum() / (wi.sum() if w is not None else valid.sum())
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - eps) * loss + eps * smooth


# name -> (function of Tensors or arrays, NumPy reference, inputs, node name)
CASES = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), np_layer_norm, (X, W, B),
                   "NativeLayerNormBackward0"),
    "layer_norm_2d": (lambda x: F.layer_norm(x, (3, 4)),
                      lambda x: np_layer_norm(x.reshape(2, 12), 1, 0).reshape(x.shape),
                      (X3,), "NativeLayerNormBackward0"),
    "softmax": (lambda x: F.softmax(x, dim=1),
                lambda x: np.exp(np_log_softmax(x, 1)), (X,), "SoftmaxBackward0"),
    "softmax_dim0": (lambda x: F.softmax(x, dim=0),
                     lambda x: np.exp(np_log_softmax(x, 0)), (X3,), "SoftmaxBackward0"),
    "log_softmax": (lambda x: F.log_softmax(x, dim=-1),
                    lambda x: np_log_softmax(x, -1), (X3,), "LogSoftmaxBackward0"),
    "gelu": (F.gelu, lambda x: x * 0.5 * (1 + special.erf(x / math.sqrt(2))), (X,),
             "GeluBackward0"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), np_gelu_tanh, (X,),
                  "GeluBackward0"),
    "linear": (F.linear, lambda x, w, b: x @ w.T + b, (X, W2, B4), "AddmmBackward0"),
    "linear_nobias": (F.linear, lambda x, w: x @ w.T, (X, W2), "MmBackward0"),
    "linear_3d": (F.linear, lambda x, w, b: x @ w.T + b, (X3, W34, W), "ViewBackward0"),
    "cross_entropy": (lambda x: F.cross_entropy(x, _t(x, T)),
                      lambda x: np_cross_entropy(x, T), (X,), "NllLossBackward0"),
    "cross_entropy_ignore_sum": (
        lambda x: F.cross_entropy(x, _t(x, T_IGN), reduction="sum"),
        lambda x: np_cross_entropy(x, T_IGN, reduction="sum"), (X,), "NllLossBackward0"),
    "cross_entropy_weight_none": (
        lambda x: F.cross_entropy(x, _t(x, T_IGN), weight=_t(x, CW), reduction="none"),
        lambda x: np_cross_entropy(x, T_IGN, CW, reduction="none"), (X,), "NllLossBackward0"),
    "cross_entropy_weight_mean": (
        lambda x: F.cross_entropy(x, _t(x, T_IGN), weight=_t(x, CW)),
        lambda x: np_cross_entropy(x, T_IGN, CW), (X,), "NllLossBackward0"),
    "cross_entropy_smoothing": (
        lambda x: F.cross_entropy(x, _t(x, T), label_smoothing=0.2),
        lambda x: np_cross_entropy(x, T, eps=0.2), (X,), "AddBackward0"),
}


def _t(like, a):
    """``a`` as a Tensor when ``like`` is one (the eager path), else the array."""
    return fg.tensor(a) if isinstance(like, fg.Tensor) else a


def _eager(name):
    fn, _, inputs, _ = CASES[name]
    ts = [fg.tensor(a, requires_grad=True) for a in inputs]
    return fn, ts, fn(*ts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_gradients_and_node(name):
    fn, ref, inputs, node = CASES[name]
    _, ts, out = _eager(name)
    assert out.grad_fn.name() == node
    assert_close(out.detach().numpy(), ref(*inputs), "exact64")
    g = RNG.standard_normal(out.shape)
    out.backward(fg.tensor(g))
    fd = numeric_grads(lambda *a: np.sum(ref(*a) * g), list(inputs))
    composite = fg.grad(lambda *a: (fn(*a) * g).sum(), argnums=tuple(range(len(inputs))))(
        *inputs)
    composite = composite if isinstance(composite, tuple) else (composite,)
    for t, want, comp in zip(ts, fd, composite):
        assert_close(t.grad.numpy(), want, "fd")
        assert_close(t.grad.numpy(), comp, "exact64")


@pytest.mark.parametrize("name", sorted(CASES))
def test_double_backward(name):
    fn, _, inputs, _ = CASES[name]
    ts = [fg.tensor(a, requires_grad=True) for a in inputs]
    assert gradcheck(fn, ts)
    assert gradgradcheck(fn, ts)


def test_create_graph_matches_composite_second_order():
    x = fg.tensor(X, requires_grad=True)
    gx, = fg.autograd.grad((F.layer_norm(x, (5,)) ** 3).sum(), [x], create_graph=True)
    (gx ** 2).sum().backward()

    def first(a):
        return fg.grad(lambda b: (F.layer_norm(b, (5,)) ** 3).sum())(a)

    assert_close(x.grad.numpy(), fg.grad(lambda a: (first(a) ** 2).sum())(X), "exact64")


def test_vector_norm():
    x = fg.tensor(X, requires_grad=True)
    n = x.norm()
    assert n.grad_fn.name() == "LinalgVectorNormBackward0"
    assert_close(n.detach().numpy(), np.linalg.norm(X), "exact64")
    n.backward()
    assert_close(x.grad.numpy(), X / np.linalg.norm(X), "exact64")
    rows = fg.tensor(X, requires_grad=True)
    r = rows.norm(dim=1, keepdim=True)
    assert r.shape == (3, 1)
    r.backward(fg.tensor(np.arange(3.0)[:, None]))
    want = X / np.linalg.norm(X, axis=1, keepdims=True) * np.arange(3.0)[:, None]
    assert_close(rows.grad.numpy(), want, "exact64")
    z = fg.zeros(4, requires_grad=True)
    z.norm().backward()
    assert (z.grad.numpy() == 0).all()
    assert gradgradcheck(lambda t: t.norm(dim=0), [fg.tensor(X, requires_grad=True)])


def test_modules_are_one_node():
    ln, gelu = fg.nn.LayerNorm(5), fg.nn.GELU(approximate="tanh")
    x = fg.tensor(X, requires_grad=True)
    out = gelu(ln(x))
    assert out.grad_fn.name() == "GeluBackward0"
    assert out.grad_fn.next_functions[0][0].name() == "NativeLayerNormBackward0"
    out.sum().backward()
    assert ln.weight.grad.shape == (5,) and ln.bias.grad.shape == (5,)
    assert_close(ln.bias.grad.numpy(), fg.grad(lambda a: gelu(a).sum())(
        np_layer_norm(X, 1, 0)).sum(0), "exact64")


def test_softmax_dtype_and_masked_row():
    x = fg.tensor(X.astype(np.float32), requires_grad=True)
    y = F.softmax(x, dim=1, dtype=fg.float64)
    assert y.dtype == fg.float64 and y.grad_fn.name() == "SoftmaxBackward0"
    y.sum().backward()
    assert x.grad.dtype == fg.float32
    masked = fg.tensor(np.where(np.arange(5) < 2, X, -np.inf), requires_grad=True)
    p = masked.softmax(-1)
    assert (p.detach().numpy()[:, 2:] == 0).all()
    p.backward(fg.tensor(RNG.standard_normal(p.shape)))
    assert (masked.grad.numpy()[:, 2:] == 0).all() and np.isfinite(masked.grad.numpy()).all()


def test_cross_entropy_weight_requiring_grad_keeps_the_composite():
    w = fg.tensor(CW, requires_grad=True)
    loss = F.cross_entropy(fg.tensor(X, requires_grad=True), fg.tensor(T), weight=w)
    loss.backward()
    want = fg.grad(lambda ww: F.cross_entropy(X, T, weight=ww))(CW)
    assert_close(w.grad.numpy(), want, "exact64")


@pytest.mark.parametrize("name", ["layer_norm", "softmax", "gelu", "gelu_tanh",
                                  "cross_entropy_weight_mean", "log_softmax", "linear"])
def test_under_jit(name):
    fn, ref, inputs, _ = CASES[name]
    step = fg.jit(fn)
    grads = []
    for _ in range(2):  # the first call may run eagerly; the second is traced
        ts = [fg.tensor(a, requires_grad=True) for a in inputs]
        out = step(*ts)
        assert_close(out.detach().numpy(), ref(*inputs), "exact64")
        (out ** 2).sum().backward()
        grads.append([t.grad.numpy() for t in ts])
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    for a, b in zip(*grads):
        assert_close(a, b, "exact64")


@pytest.mark.parametrize("name", ["layer_norm_2d", "softmax", "log_softmax", "gelu",
                                  "gelu_tanh"])
def test_forward_mode_keeps_the_composite(name):
    fn, ref, inputs, _ = CASES[name]
    u = RNG.standard_normal(inputs[0].shape)
    with fwd.dual_level():
        out = fn(fwd.make_dual(fg.tensor(inputs[0]), fg.tensor(u)))
        tangent = fwd.unpack_dual(out).tangent.numpy()
    h = 1e-6
    want = (ref(inputs[0] + h * u) - ref(inputs[0] - h * u)) / (2 * h)
    np.testing.assert_allclose(tangent, want, rtol=1e-6, atol=1e-8)  # a 2-point stencil


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_against_torch(name):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    tfns = {
        "layer_norm": lambda x, w, b: TF.layer_norm(x, (5,), w, b),
        "layer_norm_2d": lambda x: TF.layer_norm(x, (3, 4)),
        "softmax": lambda x: TF.softmax(x, dim=1),
        "softmax_dim0": lambda x: TF.softmax(x, dim=0),
        "log_softmax": lambda x: TF.log_softmax(x, dim=-1),
        "gelu": TF.gelu,
        "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"),
        "linear": TF.linear,
        "linear_nobias": TF.linear,
        "linear_3d": TF.linear,
        "cross_entropy": lambda x: TF.cross_entropy(x, torch.tensor(T)),
        "cross_entropy_ignore_sum": lambda x: TF.cross_entropy(x, torch.tensor(T_IGN),
                                                               reduction="sum"),
        "cross_entropy_weight_none": lambda x: TF.cross_entropy(
            x, torch.tensor(T_IGN), weight=torch.tensor(CW, dtype=torch.float32),
            reduction="none"),
        "cross_entropy_weight_mean": lambda x: TF.cross_entropy(
            x, torch.tensor(T_IGN), weight=torch.tensor(CW, dtype=torch.float32)),
        "cross_entropy_smoothing": lambda x: TF.cross_entropy(x, torch.tensor(T),
                                                              label_smoothing=0.2),
    }
    fn, _, inputs, node = CASES[name]
    f32 = [a.astype(np.float32) for a in inputs]
    tt = [torch.tensor(a, requires_grad=True) for a in f32]
    tout = tfns[name](*tt)
    ts = [fg.tensor(a, requires_grad=True) for a in f32]
    out = fn(*ts)
    assert out.grad_fn.name() == tout.grad_fn.name() == node
    g = RNG.standard_normal(out.shape).astype(np.float32)
    tout.backward(torch.tensor(g))
    out.backward(fg.tensor(g))
    assert out.dtype == fg.float32
    assert_close(out.detach().numpy(), tout.detach().numpy(), "f32")
    for a, b in zip(ts, tt):
        assert a.grad.dtype == fg.float32
        assert_close(a.grad.numpy(), b.grad.numpy(), "f32")


def test_norm_float32_against_torch():
    torch = pytest.importorskip("torch")
    a = X.astype(np.float32)
    x, tx = fg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    n, tn = x.norm(), torch.linalg.vector_norm(tx)
    assert n.grad_fn.name() == tn.grad_fn.name()
    n.backward()
    tn.backward()
    assert_close(n.detach().numpy(), tn.detach().numpy(), "f32")
    assert_close(x.grad.numpy(), tx.grad.numpy(), "f32")


@pytest.mark.compiled
def test_large_gelu_uses_the_math_library_erf():
    a = RNG.standard_normal((8, 1024)) * 3
    for dtype, kind in ((np.float64, "exact64"), (np.float32, "f32")):
        x = fg.tensor(a.astype(dtype), requires_grad=True)
        y = F.gelu(x)
        y.sum().backward()
        xa = a.astype(np.float64)
        phi = 0.5 * (1 + special.erf(xa / math.sqrt(2)))
        assert_close(y.detach().numpy(), (xa * phi).astype(dtype), kind)
        want = phi + xa * np.exp(-0.5 * xa * xa) / math.sqrt(2 * math.pi)
        assert_close(x.grad.numpy(), want.astype(dtype), kind)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_spatial_matches_composite(reduction):
    x = RNG.standard_normal((2, 5, 3, 2))
    t = RNG.integers(0, 5, (2, 3, 2))
    t[0, 1, 1] = -100
    xt = fg.tensor(x, requires_grad=True)
    out = F.cross_entropy(xt, fg.tensor(t), weight=fg.tensor(CW), reduction=reduction)
    assert out.grad_fn.name() == "NllLossBackward0"
    g = RNG.standard_normal(out.shape)
    out.backward(fg.tensor(g))
    assert_close(out.detach().numpy(), F.cross_entropy(x, t, weight=CW, reduction=reduction),
                 "exact64")
    want = fg.grad(lambda a: (F.cross_entropy(a, t, weight=CW, reduction=reduction) * g)
                   .sum())(x)
    assert_close(xt.grad.numpy(), want, "exact64")


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "norm"])
def test_writing_the_output_in_place(name):
    """Softmax and log_softmax save their result (PyTorch's version check fires); the
    others keep their own arrays, so the write does not change their gradient."""
    fn = {"softmax": lambda x: x.softmax(1), "log_softmax": lambda x: x.log_softmax(1),
          "layer_norm": lambda x: F.layer_norm(x, (5,)), "norm": lambda x: x.norm()}[name]
    x = fg.tensor(X, requires_grad=True)
    g = fg.tensor(RNG.standard_normal(fn(x).shape))
    ref, = fg.autograd.grad(fn(x), [x], g)
    y = fn(x)
    y.add_(1)
    if name in ("softmax", "log_softmax"):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward(g)
    else:
        y.backward(g)
        assert_close(x.grad.numpy(), ref.numpy(), "exact64")


def test_float32_erf_within_an_ulp_without_numba():
    """The float32 GELU's erf is NumPy (no kernel to load): within one float32 ulp of
    the float64 erf rounded, exact at the special values."""
    from fusegrad.eager import bigmath

    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.standard_normal(20000) * 3, rng.uniform(-6, 6, 20000),
                         np.linspace(-5, 5, 20001),
                         [1.0, -1.0, 4.0, -4.0, 3.9999998, 0.9999999, 1e-30, 1e-45, 1e38]])
    xs = xs.astype(np.float32)
    got = bigmath.erf_f32(xs)
    assert got.dtype == np.float32
    want = special.erf(xs.astype(np.float64)).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1
    assert np.mean(ulps == 0) > 0.8
    special_in = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 10.0, -10.0], np.float32)
    out = bigmath.erf_f32(special_in)
    np.testing.assert_array_equal(out[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(out[1]) and np.isnan(out[4])
    np.testing.assert_array_equal(out[5:], [1.0, -1.0])
    assert bigmath.erf_f32(np.zeros((0, 3), np.float32)).shape == (0, 3)


def test_float32_gelu_loads_no_numba():
    import subprocess
    import sys

    code = ("import sys, numpy as np, fusegrad as fg, fusegrad.nn.functional as F\n"
            "x = fg.tensor(np.linspace(-3, 3, 8192, dtype=np.float32), requires_grad=True)\n"
            "F.gelu(x).sum().backward()\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_linear_forward_mode_keeps_the_composite():
    x, w, b = X3, W34, W
    u = RNG.standard_normal(x.shape)
    with fwd.dual_level():
        out = F.linear(fwd.make_dual(fg.tensor(x), fg.tensor(u)), fg.tensor(w), fg.tensor(b))
        tangent = fwd.unpack_dual(out).tangent.numpy()
    assert_close(tangent, u @ w.T, "exact64")


def test_linear_hooks_and_partial_grads():
    """Only the inputs that require grad get one; tensor hooks see the fused node's
    gradient; retain_graph allows a second backward."""
    x = fg.tensor(X3, requires_grad=True)
    w = fg.tensor(W34)
    b = fg.tensor(W, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.shape))
    out = F.linear(x, w, b)
    out.sum().backward(retain_graph=True)
    out.sum().backward()
    assert seen == [(2, 3, 4)] * 2 and w.grad is None
    assert_close(x.grad.numpy(), 2 * np.ones((2, 3, 5)) @ W34, "exact64")
    assert_close(b.grad.numpy(), np.full(5, 12.0), "exact64")


def test_fused_backward_checks_saved_values_and_runs_unpack_hooks():
    """The fused nodes' NumPy backward reads the saved values as the Tensor backward does:
    an input written in place after the forward raises, a freed graph raises, and saved
    tensor hooks pack and unpack."""
    x = fg.tensor(X, requires_grad=True)
    h = x * 1
    y = F.layer_norm(h, (5,))
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y = F.linear(x, fg.tensor(W2, requires_grad=True))
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t.detach().numpy().copy()

    with fg.autograd.graph.saved_tensors_hooks(pack, lambda a: fg.tensor(a)):
        z = F.gelu(fg.tensor(X, requires_grad=True))
    g, = fg.autograd.grad(z.sum(), [z.grad_fn.next_functions[0][0].variable])
    assert packed == [(3, 5)]
    want = fg.grad(lambda a: F.gelu(a).sum())(X)
    assert_close(g.numpy(), want, "exact64")
