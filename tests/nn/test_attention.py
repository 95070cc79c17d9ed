"""``nn.functional.scaled_dot_product_attention``: values against a NumPy reference,
gradients against finite differences, the eager node against the IR formula
(``fg.grad`` and ``fg.jit``), double backward, and PyTorch when installed."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F
from tests.helpers import assert_close, numeric_grads

pytestmark = pytest.mark.usefixtures("default_float64")

RNG = np.random.default_rng(3)
Q = RNG.standard_normal((2, 2, 4, 3))
K = RNG.standard_normal((2, 2, 5, 3))
V = RNG.standard_normal((2, 2, 5, 6))
BOOL = RNG.random((4, 5)) > 0.4
BOOL[2] = False  # a query row with every key masked out
FLOAT = RNG.standard_normal((1, 2, 4, 5))


def reference(q, k, v, mask=None, is_causal=False, scale=None):
    """softmax(q kᵀ scale + bias) v in NumPy, fully masked rows giving 0."""
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        mask = np.tril(np.ones(s.shape[-2:], bool))
    if mask is not None and mask.dtype == bool:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    m = np.max(s, -1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    z = e.sum(-1, keepdims=True)
    return (e / np.where(z == 0, 1, z)) @ v


CASES = {
    "plain": {},
    "causal": dict(is_causal=True),
    "bool": dict(attn_mask=BOOL),
    "float": dict(attn_mask=FLOAT),
    "scale": dict(scale=0.7),
}


def _fg_kwargs(kw):
    return {k: fg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_eager(case):
    kw = CASES[case]
    ref_kw = {("mask" if k == "attn_mask" else k): v for k, v in kw.items()}
    q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, **_fg_kwargs(kw))
    assert_close(out.detach().numpy(), reference(Q, K, V, **ref_kw), "exact64")
    g = RNG.standard_normal(out.shape)
    out.backward(fg.tensor(g))
    fd = numeric_grads(lambda a, b, c: np.sum(reference(a, b, c, **ref_kw) * g), [Q, K, V])
    for got, want in zip((q.grad, k.grad, v.grad), fd):
        assert_close(got.numpy(), want, "fd")


def test_node_names_are_pytorchs():
    q, k = (fg.tensor(a, requires_grad=True) for a in (Q, K))
    flash = F.scaled_dot_product_attention(q, k, k, is_causal=True)
    assert flash.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    math = F.scaled_dot_product_attention(q, k, fg.tensor(V))  # value head size differs
    assert math.grad_fn.name() == "UnsafeViewBackward0"


def test_fully_masked_row_is_zero_with_zero_gradient():
    q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=fg.tensor(BOOL))
    assert (out[:, :, 2].detach().numpy() == 0).all()
    out.sum().backward()
    assert (q.grad[:, :, 2].numpy() == 0).all() and np.isfinite(k.grad.numpy()).all()


def test_float_mask_gradient_and_broadcast_batch():
    mask = fg.tensor(FLOAT, requires_grad=True)
    k1 = fg.tensor(K[:1], requires_grad=True)  # key batch 1 broadcast against 2
    out = F.scaled_dot_product_attention(fg.tensor(Q), k1, fg.tensor(V), attn_mask=mask)
    g = RNG.standard_normal(out.shape)
    out.backward(fg.tensor(g))
    fm, fk = numeric_grads(lambda m, kk: np.sum(reference(Q, kk, V, mask=m) * g),
                           [FLOAT, K[:1]])
    assert_close(mask.grad.numpy(), fm, "fd")
    assert_close(k1.grad.numpy(), fk, "fd")


def test_ir_formula_matches_the_fused_node():
    """The arrays / fg.grad path (IR ops) against the eager node."""
    assert_close(F.scaled_dot_product_attention(Q, K, V, attn_mask=BOOL),
                 reference(Q, K, V, mask=BOOL), "exact64")
    gq = fg.grad(lambda q: (F.scaled_dot_product_attention(q, K, V, is_causal=True) ** 2)
                 .sum())(Q)
    q = fg.tensor(Q, requires_grad=True)
    (F.scaled_dot_product_attention(q, fg.tensor(K), fg.tensor(V), is_causal=True) ** 2) \
        .sum().backward()
    assert_close(gq, q.grad.numpy(), "exact64")


def test_under_jit_forward_and_backward():
    step = fg.jit(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    grads = []
    for _ in range(2):  # the first call may run eagerly; the second is compiled
        q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
        out = step(q, k, v)
        assert_close(out.detach().numpy(), reference(Q, K, V, is_causal=True), "exact64")
        out.pow(2).sum().backward()
        grads.append([t.grad.numpy() for t in (q, k, v)])
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    for a, b in zip(*grads):
        assert_close(a, b, "exact64")


def test_create_graph_double_backward():
    q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=fg.tensor(BOOL))
    gq, = fg.autograd.grad(out.pow(2).sum(), [q], create_graph=True)
    assert gq.requires_grad
    gq.pow(2).sum().backward()

    def first(qq):
        return fg.grad(lambda a: (F.scaled_dot_product_attention(a, K, V, attn_mask=BOOL)
                                  ** 2).sum())(qq)

    want = fg.grad(lambda a: (first(a) ** 2).sum())(Q)
    assert_close(q.grad.numpy(), want, "exact64")


def test_dropout_scales_kept_weights():
    fg.manual_seed(0)
    x = fg.ones(1, 1, 6, 4)
    eye = fg.tensor(np.eye(6)[None, None], requires_grad=True)
    out = F.scaled_dot_product_attention(x, x, eye, dropout_p=0.25)
    w = out.detach().numpy()  # with v = I, out is the dropped attention weights
    assert set(np.round(w.ravel(), 12)) <= {0.0, round(1 / 6 / 0.75, 12)}
    assert 0 < (w == 0).sum() < w.size
    out.backward(fg.ones(1, 1, 6, 6))
    assert_close(eye.grad.numpy()[0, 0], np.repeat(w[0, 0].sum(0)[:, None], 6, 1), "exact64")


def test_gqa_and_errors():
    q8 = RNG.standard_normal((1, 4, 3, 5))
    k2 = RNG.standard_normal((1, 2, 3, 5))
    got = F.scaled_dot_product_attention(fg.tensor(q8), fg.tensor(k2), fg.tensor(k2),
                                         enable_gqa=True).numpy()
    rep = np.repeat(k2, 2, axis=1)
    assert_close(got, reference(q8, rep, rep), "exact64")
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(fg.tensor(Q), fg.tensor(K), fg.tensor(V),
                                       attn_mask=fg.tensor(BOOL), is_causal=True)
    with pytest.raises(RuntimeError, match="shapes do not fit"):
        F.scaled_dot_product_attention(fg.tensor(Q), fg.tensor(V), fg.tensor(V))


def test_against_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    for case, kw in [*CASES.items(), ("flash", "kk")]:
        values = K if kw == "kk" else V  # q, k, v of one head size: PyTorch's flash kernel
        kw = {} if kw == "kk" else kw
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Q, K, values))
        tout = TF.scaled_dot_product_attention(tq, tk, tv, **tkw)
        tout.pow(2).sum().backward()
        q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, values))
        out = F.scaled_dot_product_attention(q, k, v, **_fg_kwargs(kw))
        out.pow(2).sum().backward()
        assert out.grad_fn.name() == tout.grad_fn.name()
        assert_close(out.detach().numpy(), tout.detach().numpy(), "exact64", case)
        for a, b in zip((q, k, v), (tq, tk, tv)):
            assert_close(a.grad.numpy(), b.grad.numpy(), "exact64", case)


@pytest.mark.compiled
def test_compiled_matches_the_fused_node():
    m = fg.tensor(BOOL)
    step = fg.jit(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    got = []
    for _ in range(2):
        q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
        out = step(q, k, v)
        out.pow(2).sum().backward()
        got = [out.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    q, k, v = (fg.tensor(a, requires_grad=True) for a in (Q, K, V))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    out.pow(2).sum().backward()
    for a, b in zip(got, [out.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]):
        assert_close(a, b, "exact64")
