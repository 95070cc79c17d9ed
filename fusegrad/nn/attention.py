"""``torch.nn.functional.scaled_dot_product_attention``.

``softmax(q kᵀ * scale + bias) v`` over the last two dimensions, with the
leading (batch, head) dimensions broadcast; ``attn_mask`` is boolean (True
takes part) or a float bias, ``is_causal`` keeps ``j <= i`` (the top-left
aligned lower triangle), ``dropout_p`` zeroes attention weights and scales the
rest by ``1 / (1 - p)``, ``scale`` defaults to ``1 / sqrt(E)``, ``enable_gqa``
repeats the key/value heads to the query heads. A query row whose keys are all
masked out gives zeros (and zero gradients), as PyTorch's kernels do.

On concrete eager Tensors it is one autograd node (``_FusedAttention``): the
forward and the backward are written in NumPy, the softmax backward in closed
form (``ds = p * (dp - sum(dp * p))``), and only q, k, v, the mask and the
attention weights are kept. With ``create_graph=True`` the backward recomputes
the forward with recorded ops, so the gradient is differentiable again. On
traced data (``fg.jit``, ``fg.grad``) and on arrays it is the same formula
built from IR ops (``_attention_ops``), one node when the inputs are Tensors.
The node is named as PyTorch's CPU kernels name theirs (its flash kernel's node
for 4-d inputs of one batch shape and head size without dropout, else the math
path's last node, ``UnsafeViewBackward0``).
"""

from __future__ import annotations

import math

import numpy as np

from ..eager import selection
from ..eager.creation import default_generator, from_numpy
from ..eager.custom_function import Function
from ..eager.engine import grad as autograd_grad
from ..eager.grad_mode import enable_grad, is_grad_enabled
from ..eager.record import operation
from ..eager.tensor_base import TensorBase, make
from ..ir import array as A
from ..ir import ops
from ..ir.matrix import T

__all__ = ["scaled_dot_product_attention"]

_FLASH = "ScaledDotProductFlashAttentionForCpuBackward0"
_MATH = "UnsafeViewBackward0"


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False):
    """Attention of ``query`` (..., L, E) over ``key`` (..., S, E) and ``value`` (..., S, Ev):
    an (..., L, Ev) result (see the module docstring for the arguments)."""
    qs, ks, vs = (tuple(A.shape(t)) for t in (query, key, value))
    _check(qs, ks, vs, query, key, value, attn_mask, is_causal, dropout_p)
    if enable_gqa and len(qs) >= 3 and ks[-3] != qs[-3]:
        key, value = _repeat_heads(key, qs[-3]), _repeat_heads(value, qs[-3])
        ks, vs = tuple(A.shape(key)), tuple(A.shape(value))
    L, S = qs[-2], ks[-2]
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    if is_causal:
        attn_mask = np.tril(np.ones((L, S), bool))
    bool_mask = attn_mask is not None and np.dtype(A.dtype(attn_mask)) == np.bool_
    if isinstance(attn_mask, np.ndarray) and isinstance(query, TensorBase):
        attn_mask = from_numpy(attn_mask)
    lead = np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    keep = _keep(query, (*lead, L, S), float(dropout_p))
    statics = (scale, float(dropout_p), bool_mask)
    tensors = (query, key, value, attn_mask, keep)
    if not any(isinstance(t, TensorBase) for t in tensors):
        return _attention_ops(query, key, value, attn_mask, keep, *statics)
    flash = len(qs) == 4 and not dropout_p and qs[:-2] == ks[:-2] == vs[:-2] and vs[-1] == qs[-1]
    name = _FLASH if flash else _MATH
    if all(t is None or (isinstance(t, TensorBase) and isinstance(t._data, np.ndarray))
           for t in tensors):
        node = _FlashNode if name == _FLASH else _MathNode
        return node.apply(*tensors, *statics)
    present = [t for t in (attn_mask, keep) if t is not None]

    def f(q, k, v, *extra):
        extra = list(extra)
        m = extra.pop(0) if attn_mask is not None else None
        d = extra.pop(0) if keep is not None else None
        return _attention_ops(q, k, v, m, d, *statics)

    return operation(name, f, query, key, value, *present)


def _check(qs, ks, vs, query, key, value, attn_mask, is_causal, dropout_p) -> None:
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at "
                           "least 2 dimensions (..., L, E)")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: shapes do not fit: query {list(qs)}"
                           f", key {list(ks)}, value {list(vs)} (need query (..., L, E), key "
                           "(..., S, E), value (..., S, Ev))")
    dts = {np.dtype(A.dtype(t)) for t in (query, key, value)}
    if len(dts) != 1 or next(iter(dts)).kind != "f":
        raise RuntimeError("Expected query, key, and value to have the same floating dtype, "
                           f"but got {sorted(str(d) for d in dts)}")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def _repeat_heads(x, heads: int):
    """(..., Hk, S, E) -> (..., heads, S, E), each head repeated ``heads // Hk`` times."""
    s = tuple(A.shape(x))
    if heads % s[-3]:
        raise RuntimeError(f"scaled_dot_product_attention(enable_gqa=True): the query's {heads} "
                           f"heads are not a multiple of the key/value's {s[-3]}")
    r = heads // s[-3]
    wide = ops.broadcast_to(A.reshape(x, (*s[:-2], 1, *s[-2:])),
                            shape=(*s[:-2], r, *s[-2:]))
    return A.reshape(wide, (*s[:-3], heads, *s[-2:]))


def _keep(query, shape: tuple, p: float):
    """The dropout keep-mask (bool, ``shape``), or None without dropout."""
    if p == 0.0:
        return None
    if isinstance(query, TensorBase) and not isinstance(query._data, np.ndarray):
        return selection._hashed_uniform(default_generator, shape) >= p
    with default_generator._lock:
        u = default_generator._rng.random(shape)
    keep = u >= p
    return from_numpy(keep) if isinstance(query, TensorBase) else keep


def _attention_ops(q, k, v, mask, keep, scale: float, p: float, bool_mask: bool):
    """The attention formula in IR ops (arrays, tracers, Tensors inside one operation)."""
    s = A.matmul(q, T(k)) * scale
    if mask is not None:
        s = ops.select(mask, s, -np.inf) if bool_mask else s + mask
    m = A.max(s, -1, keepdims=True)
    m = ops.stop_gradient(ops.select(ops.isfinite(m), m, 0))
    e = ops.exp(s - m)
    z = A.sum(e, -1, keepdims=True)
    w = e / ops.select(z == 0, 1, z)  # a fully masked row: all zeros, as PyTorch
    if keep is not None:
        w = ops.select(keep, w * (0.0 if p == 1.0 else 1.0 / (1.0 - p)), 0)
    return A.matmul(w, v)


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


class _FusedAttention(Function):
    """One node: forward and closed-form backward in NumPy."""

    @staticmethod
    def forward(ctx, q, k, v, mask, keep, scale, p, bool_mask):
        qa, ka, va = q._data, k._data, v._data
        s = (qa @ _swap(ka)) * qa.dtype.type(scale)
        if mask is not None:
            s = np.where(mask._data, s, -np.inf) if bool_mask else s + mask._data
        m = s.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(s.dtype)
        e = np.exp(s - m)
        z = e.sum(-1, keepdims=True)
        w = e / np.where(z == 0, 1, z)
        wd = w if keep is None else _drop(w, keep._data, p)
        ctx.save_for_backward(q, k, v, mask, keep)
        ctx.attn = (w, wd, scale, p, bool_mask)
        return make(wd @ va)

    @staticmethod
    def backward(ctx, g):
        q, k, v, mask, keep = ctx.saved_tensors
        w, wd, scale, p, bool_mask = ctx.attn
        if is_grad_enabled():  # create_graph=True: a differentiable backward
            return _recorded_backward(ctx, g, q, k, v, mask, keep, scale, p, bool_mask)
        ga = g._data
        dv = _swap(wd) @ ga
        dw = ga @ _swap(v._data)
        if keep is not None:
            dw = _drop(dw, keep._data, p)
        ds = w * (dw - (dw * w).sum(-1, keepdims=True))
        c = ds.dtype.type(scale)
        dq = (ds @ k._data) * c
        dk = (_swap(ds) @ q._data) * c
        dmask = make(ds) if mask is not None and not bool_mask and ctx.needs_input_grad[3] \
            else None
        return make(dq), make(dk), make(dv), dmask, None, None, None, None


class _FlashNode(_FusedAttention):
    _node_name = _FLASH


class _MathNode(_FusedAttention):
    _node_name = _MATH


def _drop(w: np.ndarray, keep: np.ndarray, p: float) -> np.ndarray:
    c = w.dtype.type(0.0 if p == 1.0 else 1.0 / (1.0 - p))
    return np.where(keep, w * c, w.dtype.type(0))


def _recorded_backward(ctx, g, q, k, v, mask, keep, scale, p, bool_mask):
    """The gradients through the recorded formula, keeping their graph (``create_graph``)."""
    wants = [t for t, need in zip((q, k, v, mask), ctx.needs_input_grad) if need]
    with enable_grad():
        out = _attention_ops(q, k, v, mask, keep, scale, p, bool_mask)
        grads = iter(autograd_grad(out, wants, g, create_graph=True))
    res = [next(grads) if need else None for need in ctx.needs_input_grad[:4]]
    return (*res, None, None, None, None)
