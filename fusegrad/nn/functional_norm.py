"""Normalisation, dropout, embedding and two activations (``torch.nn.functional``).

``layer_norm batch_norm dropout embedding leaky_relu elu``. ``batch_norm`` in
training mode updates ``running_mean`` / ``running_var`` in place (the variance
unbiased, as PyTorch), outside autograd. ``dropout``'s mask is a Threefry hash of
the element index under a key: ``dropout_with_key`` takes the key (an int64
Tensor of 2 words) and advances it in place, which is how ``nn.Dropout`` keeps
its masks fresh under ``fg.jit``; plain ``dropout`` draws a key from fusegrad's
default generator (so after ``fg.manual_seed`` its masks repeat), and is
therefore fixed when traced by ``fg.jit`` (use the module there).
"""

from __future__ import annotations

import math

import numpy as np

from ..eager.creation import default_generator
from ..eager.fused import concrete
from ..eager.grad_mode import no_grad
from ..eager.tensor_base import TensorBase
from ..ir import array as A
from ..ir import ops
from . import fused
from ._node import named as _named

__all__ = ["batch_norm", "dropout", "dropout_with_key", "elu", "embedding", "layer_norm",
           "leaky_relu"]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``normalized_shape`` axes (biased variance, as PyTorch)."""
    ns = (int(normalized_shape),) if isinstance(normalized_shape, int | np.integer) else tuple(
        int(i) for i in normalized_shape)
    xs = tuple(A.shape(input))
    if xs[len(xs) - len(ns):] != ns:
        raise RuntimeError(f"layer_norm: expected input with trailing shape {list(ns)}, got "
                           f"{list(xs)}")
    axes = tuple(range(len(xs) - len(ns), len(xs)))

    def f(x, *wb):
        m = A.mean(x, axes, keepdims=True)
        d = x - m
        v = A.mean(d * d, axes, keepdims=True)
        y = d / ops.sqrt(v + eps)
        if weight is not None:
            y = y * wb[0]
        if bias is not None:
            y = y + wb[-1]
        return y

    extra = tuple(t for t in (weight, bias) if t is not None)

    def composite(x, w=None, b=None):
        return _named("NativeLayerNormBackward0", f, x, *(t for t in (w, b) if t is not None),
                      structure=("layer_norm", ns, eps, weight is None, bias is None))

    n = math.prod(ns)
    if n and concrete(input, weight, bias) and input._data.dtype.kind == "f" and len(
            {t._data.dtype for t in (input, *extra)}) == 1:
        return fused.LayerNorm.apply(input, weight, bias, n, float(eps), composite)
    return composite(input, weight, bias)


def _store(buf, value) -> None:
    if isinstance(buf, TensorBase):
        with no_grad():
            buf.copy_(value)
    else:
        buf[...] = value


def _data(x):
    return x.detach() if isinstance(x, TensorBase) else x


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise over every axis but the channels (axis 1) with the batch's statistics
    (``training``) or the running ones; in training the running statistics move by
    ``momentum`` towards the batch mean and the unbiased batch variance."""
    xs = tuple(A.shape(input))
    if len(xs) < 2:
        raise ValueError(f"batch_norm: expected at least 2-d input (N, C, ...), got {xs}")
    axes = (0, *range(2, len(xs)))
    cshape = (1, xs[1]) + (1,) * (len(xs) - 2)
    n = math.prod(xs) // xs[1]
    if training and n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {list(xs)}")
    use_batch = training or running_mean is None
    if training and running_mean is not None:
        xd = _data(input)
        m = A.mean(xd, axes)
        d = xd - A.reshape(m, cshape)
        v = A.sum(d * d, axes) * (1.0 / max(n - 1, 1))
        _store(running_mean, _data(running_mean) * (1 - momentum) + m * momentum)
        _store(running_var, _data(running_var) * (1 - momentum) + v * momentum)

    def f(x, *rest):
        rest = list(rest)
        if use_batch:
            m = A.mean(x, axes, keepdims=True)
            d = x - m
            v = A.mean(d * d, axes, keepdims=True)
        else:
            rm, rv = rest.pop(0), rest.pop(0)
            d = x - A.reshape(rm, cshape)
            v = A.reshape(rv, cshape)
        y = d / ops.sqrt(v + eps)
        if weight is not None:
            y = y * A.reshape(rest.pop(0), cshape)
        if bias is not None:
            y = y + A.reshape(rest.pop(0), cshape)
        return y

    stats = () if use_batch else (running_mean, running_var)
    extra = tuple(t for t in (weight, bias) if t is not None)
    return _named("NativeBatchNormBackward0", f, input, *stats, *extra,
                  structure=("batch_norm", use_batch, eps, weight is None, bias is None))


# --- dropout --------------------------------------------------------------------------


def _keep_mask(key, shape, p: float):
    """``uniform >= p`` per element: the element's index hashed under ``key``."""
    k0 = A.reshape(ops.slice(key, starts=(0,), stops=(1,), steps=(1,)), ())
    k1 = A.reshape(ops.slice(key, starts=(1,), stops=(2,), steps=(1,)), ())
    size = math.prod(shape)
    idx = A.reshape(ops.iota(n=size, dtype="i64"), shape)
    bits = ops.threefry2x32(k0, k1, idx, np.int64(0), word=0)
    u = A.astype(bits, np.float64) * (2.0 ** -32)
    return ops.ge(u, p)


def _next_key(key):
    """The key after one use: two hash words of counters disjoint from the masks'."""
    k0 = A.reshape(ops.slice(key, starts=(0,), stops=(1,), steps=(1,)), ())
    k1 = A.reshape(ops.slice(key, starts=(1,), stops=(2,), steps=(1,)), ())
    return ops.threefry2x32(k0, k1, np.array([0, 1], np.int64), np.int64(1), word=0)


def _check_p(p) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def dropout_with_key(input, key, p: float = 0.5, training: bool = True):
    """Inverted dropout with the mask drawn from ``key`` (int64, 2 words), then ``key``
    advanced in place."""
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    shape = tuple(A.shape(input))
    keep = _keep_mask(_data(key), shape, p)
    _store(key, _next_key(_data(key)))
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)

    def f(x, k):
        return ops.select(k, x * scale, 0)

    return _named("NativeDropoutBackward0", f, input, keep, structure=("dropout", scale))


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (identity when not ``training``)."""
    p = _check_p(p)
    if not training or p == 0.0:
        return input
    key = default_generator._rng.integers(0, 2 ** 32, size=2, dtype=np.int64)
    out = dropout_with_key(input, key, p, training)
    if inplace and isinstance(input, TensorBase):
        return input.copy_(out)
    return out


# --- embedding and activations ----------------------------------------------------------


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows ``weight[input]``; rows at ``padding_idx`` get no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported")
    n = A.shape(weight)[0]
    if padding_idx is not None:
        padding_idx = int(padding_idx)
        if not -n <= padding_idx < n:
            raise ValueError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    ishape = tuple(A.shape(input))
    dim = A.shape(weight)[1]

    def f(w, idx):
        rows = ops.take(w, idx, axis=0)
        if padding_idx is None:
            return rows
        pad = A.reshape(ops.eq(idx, padding_idx), (*ishape, 1))
        return ops.select(ops.broadcast_to(pad, shape=(*ishape, dim)),
                          ops.stop_gradient(rows), rows)

    return _named("EmbeddingBackward0", f, weight, input, structure=("embedding", padding_idx))


def leaky_relu(input, negative_slope: float = 0.01, inplace: bool = False):
    """``x`` where positive, else ``negative_slope * x``."""
    return _named("LeakyReluBackward0", lambda x: ops.select(x > 0, x, x * negative_slope),
                  input, structure=("leaky_relu", float(negative_slope)))


def elu(input, alpha: float = 1.0, inplace: bool = False):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    def f(x):
        return ops.select(x > 0, x, ops.expm1(ops.select(x > 0, 0, x)) * alpha)

    return _named("EluBackward0", f, input, structure=("elu", float(alpha)))
