"""Numerically stable activations, losses and the linear map.

``sigmoid softplus logsumexp softmax log_softmax relu gelu erf``: finite values
and gradients over the whole float range (no ``exp`` overflow), written with
the same ops as everything else so they trace, differentiate and (later)
compile like any other function.

``linear mse_loss nll_loss cross_entropy`` follow PyTorch's ``torch.nn.functional``
(class dimension 1, ``reduction="mean" | "sum" | "none"``) and also work on
NumPy arrays and inside ``fg.grad``; on eager Tensors each is one autograd
node named as PyTorch names it (``MseLossBackward0``, ``NllLossBackward0``, ...).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..eager import replay
from ..eager.fused import concrete
from ..eager.record import operation
from ..eager.tensor_base import TensorBase
from ..ir import array as A
from ..ir import ops
from ..ir.errors import ShapeError
from . import fused
from ._node import check_weight, legacy_reduction

__all__ = ["cross_entropy", "erf", "gelu", "linear", "log_sigmoid", "log_softmax", "logsumexp",
           "mse_loss", "nll_loss", "relu", "sigmoid", "softmax", "softplus"]


def _f(x):
    return A.to_float(A.asarray(x) if not A.is_weak(x) else x)


def sigmoid(input):
    """1 / (1 + exp(-x)), the ``logistic`` op (exact in both tails)."""
    return ops.logistic(_f(input))


def relu(input, inplace: bool = False):
    """max(x, 0) with relu'(0) = 0 (PyTorch's convention); NaN stays NaN (as np.maximum).
    ``inplace=True`` on a Tensor is ``input.relu_()``."""
    if inplace and isinstance(input, TensorBase):
        return input.relu_()
    x = A.asarray(input)
    return ops.select(x <= 0, 0, x)


def softplus(input, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta x)) / beta = logaddexp(beta x, 0) / beta (no overflow, smooth at 0);
    ``x`` itself where ``beta x > threshold``, as PyTorch."""
    x = _f(input)
    if beta == 1.0 and threshold >= 20.0:  # logaddexp already equals x beyond the threshold
        return A.logaddexp(x, 0)
    bx = x * beta
    return ops.select(bx > threshold, x, A.logaddexp(bx, 0) * (1.0 / beta))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_f(x))


def erf(x):
    """The error function (the ``erf`` op)."""
    return ops.erf(_f(x))


def gelu(input, approximate: bool | str = "none"):
    """x * Phi(x); ``approximate="tanh"`` (or True) uses the tanh form, as PyTorch."""
    tanh = approximate in (True, "tanh")
    if approximate not in (True, False, "tanh", "none"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if concrete(input) and input._data.dtype.kind == "f":
        return fused.Gelu.apply(input, tanh, lambda t: _gelu(t, tanh))
    return _gelu(input, tanh)


def _gelu(input, tanh: bool):
    """GELU written with ops; on a Tensor one ``GeluBackward0`` node."""
    def f(x):
        if tanh:
            c = math.sqrt(2.0 / math.pi)
            return 0.5 * x * (1 + ops.tanh(c * (x + 0.044715 * x * x * x)))
        return 0.5 * x * (1 + ops.erf(x * (1 / math.sqrt(2.0))))

    return _named("GeluBackward0", f, _f(input), structure=("gelu", tanh))


def _stable_max(x, axis):
    """max(x) over ``axis`` (kept), 0 where it is not finite, with no gradient."""
    m = A.max(x, axis, keepdims=True)
    return ops.stop_gradient(ops.select(ops.isfinite(m), m, 0))


def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) over ``axis``, shifted by the max so nothing overflows.

    All ``-inf`` inputs give ``-inf``; the gradient is ``softmax(x)``.
    """
    x = _f(x)
    m = _stable_max(x, axis)
    s = A.sum(ops.exp(x - m), axis, keepdims=True)
    empty = s == 0  # every input -inf: log(0) would send 0 * inf = NaN into the gradient
    out = ops.select(empty, -np.inf, ops.log(ops.select(empty, 1, s)) + m)
    if keepdims:
        return out
    return A.reshape(out, tuple(d for i, d in enumerate(A.shape(x))
                                if i not in A.norm_axes(axis, A.ndim(x))))


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None, *, axis=None):
    """exp(x) / sum(exp(x)) over ``dim`` (or ``axis``, NumPy's name), computed from
    x - max(x); ``dtype`` casts the input first (PyTorch's signature).

    On a Tensor it is ``input.softmax(dim)`` (one ``SoftmaxBackward0`` node); without
    ``dim`` a Tensor gets PyTorch's implicit choice (dim 0 for 0-, 1- and 3-d inputs,
    else 1, with its warning) and an array or traced value gets the last axis.
    """
    x, dim = _softmax_args("softmax", input, dim, dtype, axis, _stacklevel)
    if isinstance(x, TensorBase):
        return x.softmax(dim)
    e = ops.exp(x - _stable_max(x, dim))
    return e / A.sum(e, dim, keepdims=True)


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None, *, axis=None):
    """x - logsumexp(x) over ``dim`` (or ``axis``); arguments as ``softmax``."""
    x, dim = _softmax_args("log_softmax", input, dim, dtype, axis, _stacklevel)
    if isinstance(x, TensorBase):
        return x.log_softmax(dim)
    return _log_softmax(x, dim)


def _log_softmax(x, axis):
    """log_softmax written with ops (the body the loss composites record)."""
    return x - logsumexp(x, axis, keepdims=True)


def _softmax_args(fn: str, input, dim, dtype, axis, stacklevel: int):
    if dim is not None and axis is not None:
        raise TypeError(f"{fn}(): got both dim={dim} and axis={axis}; pass one of them")
    dim = axis if dim is None else dim
    if isinstance(input, TensorBase):
        x = input if dtype is None else input.to(dtype)
        if dim is None:
            warnings.warn(f"Implicit dimension choice for {fn} has been deprecated. Change the "
                          "call to include dim=X as an argument.", UserWarning,
                          stacklevel=stacklevel)
            dim = 0 if x.ndim in (0, 1, 3) else 1
        return x, dim
    x = _f(input) if dtype is None else A.astype(A.asarray(input), np.dtype(dtype))
    return x, -1 if dim is None else dim


# --- linear map and losses (PyTorch's torch.nn.functional) -----------------------------


_NOT_STRUCTURAL = object()


def _named(name: str, fn, *args, structure=_NOT_STRUCTURAL):
    """``fn(*args)``; with a Tensor argument, one autograd node called ``name``.

    ``structure``, if given, is everything besides the arguments' types that decides
    which ops ``fn`` binds: the operation is then replayed without the dispatch
    (``eager.replay``)."""
    if any(isinstance(a, TensorBase) for a in args):
        if structure is not _NOT_STRUCTURAL:
            return replay.run(name, structure, fn, *args)
        return operation(name, fn, *args)
    return fn(*args)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` with ``weight`` of shape (out_features, in_features)."""
    xs, ws = A.shape(input), A.shape(weight)
    if len(ws) != 2 or not xs or xs[-1] != ws[1]:
        raise ShapeError(f"linear: input of shape {xs} cannot be multiplied by weight.T: weight "
                         f"has shape {ws}, so the input's last dimension must be "
                         f"{ws[1] if len(ws) == 2 else '(weight must be 2-D)'}")

    def f(x, w, *b):
        y = A.matmul(x, ops.transpose(w, perm=(1, 0)))
        return y + b[0] if b else y

    name = ("AddmmBackward0" if bias is not None else "MmBackward0") if len(xs) == 2 else (
        "ViewBackward0")

    def composite(x, w, b=None):
        return _named(name, f, x, w, *(() if b is None else (b,)), structure="linear")

    if len(xs) >= 2 and concrete(input, weight, bias) and input._data.dtype.kind == "f" and (
            input._data.dtype == weight._data.dtype
            and (bias is None or bias._data.dtype == input._data.dtype)):
        return fused.LINEAR[name].apply(input, weight, bias, composite)
    return composite(input, weight, bias)


_REDUCTIONS = ("mean", "sum", "none")


def _reduce(v, reduction: str):
    if reduction == "mean":
        return A.mean(v)
    return A.sum(v) if reduction == "sum" else v


def _check_reduction(fn: str, reduction) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: {reduction!r} is not a valid value for reduction; use one of "
                         f"{', '.join(map(repr, _REDUCTIONS))}")


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean",
             weight=None):
    """The squared error ``(input - target) ** 2`` (times ``weight``, of the input's shape),
    averaged over the elements (default), summed or not reduced.

    As PyTorch, a target whose shape differs from the input's is broadcast
    with a UserWarning (usually a mistake, e.g. (N,) against (N, 1)).
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("mse_loss", reduction)
    if tuple(A.shape(input)) != tuple(A.shape(target)):
        warnings.warn(f"Using a target size ({list(A.shape(target))}) that is different to the "
                      f"input size ({list(A.shape(input))}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=2)

    check_weight(input, weight)

    def f(x, y, *w):
        d = x - y
        return _reduce(d * d * w[0] if w else d * d, reduction)

    return _named("MseLossBackward0", f, input, target, *(() if weight is None else (weight,)),
                  structure=("mse", reduction, weight is None))


def _class_dim(fn: str, shape) -> int:
    if not shape:
        raise ShapeError(f"{fn}: input must have a class dimension; got a 0-d input")
    return 0 if len(shape) == 1 else 1


def _concrete(x):
    if isinstance(x, TensorBase):
        x = x._data
    return x if isinstance(x, np.ndarray | np.generic | int) else None


def _check_targets(fn: str, target, n_classes: int, ignore_index: int) -> None:
    data = _concrete(target)
    if data is None:
        return
    data = np.asarray(data)
    bad = (data != ignore_index) & ((data < 0) | (data >= n_classes))
    if bad.any():
        raise IndexError(f"Target {data[bad].reshape(-1)[0]} is out of bounds ({fn}: class "
                         f"indices must lie in [0, {n_classes}) or equal ignore_index="
                         f"{ignore_index})")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean"):
    """The negative log-likelihood of integer class ``target`` under log-probabilities ``input``.

    ``input`` is (N, C, d1, ...) or (C,), ``target`` the same without the class
    dimension. ``loss_i = -weight[t_i] * input[i, t_i]``; targets equal to
    ``ignore_index`` contribute nothing; ``"mean"`` divides by the summed
    weights of the counted targets (PyTorch's weighted mean).
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    shape, tshape = tuple(A.shape(input)), tuple(A.shape(target))
    cdim = _class_dim("nll_loss", shape)
    expected = shape[:cdim] + shape[cdim + 1:]
    if tshape != expected:
        raise ShapeError(f"nll_loss: target of shape {tshape} does not fit input of shape "
                         f"{shape}: expected {expected} (the input without its class dimension "
                         f"{cdim})")
    if np.dtype(A.dtype(target)).kind not in "iu":
        raise TypeError(f"nll_loss: target must hold integer class indices (int64), got "
                        f"{np.dtype(A.dtype(target))}; for class probabilities pass a floating "
                        "target of the input's shape to cross_entropy")
    n_classes = shape[cdim]
    _check_targets("nll_loss", target, n_classes, ignore_index)
    onehot_shape = tuple(n_classes if i == cdim else 1 for i in range(len(shape)))

    def f(logp, t, *w):
        t = A.astype(t, np.int64)
        classes = A.reshape(ops.iota(n=n_classes, dtype="i64"), onehot_shape)
        onehot = ops.eq(A.reshape(t, expected[:cdim] + (1,) + expected[cdim:]), classes)
        picked = A.sum(ops.select(onehot, logp, 0), cdim)
        valid = ops.ne(t, ignore_index)
        if w:
            wi = A.sum(ops.select(onehot, A.reshape(w[0], onehot_shape), 0), cdim)
            wi = ops.select(valid, wi, 0)
        else:
            wi = A.astype(valid, A.dtype(logp))
        loss = ops.select(valid, -picked * wi, 0)
        if reduction == "mean":
            return A.sum(loss) / A.sum(wi)
        return A.sum(loss) if reduction == "sum" else loss

    def composite(logp):
        return _named("NllLossBackward0", f, logp, target,
                      *(() if weight is None else (weight,)),
                      structure=("nll", ignore_index, reduction))

    if (concrete(input, target, weight) and input._data.dtype.kind == "f"
            and not (weight is not None and weight.requires_grad)):
        return fused.NllLoss.apply(input, target, weight, cdim, int(ignore_index), reduction,
                                   composite)
    return composite(input)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0):
    """``nll_loss(log_softmax(input, class_dim), target)``, stable for any logits.

    ``target`` holds integer class indices (shape of the input without its
    class dimension 1), or class probabilities (a floating target of the
    input's shape; ``ignore_index`` does not apply), as in PyTorch.
    ``label_smoothing=e`` mixes the target with the uniform distribution:
    ``(1 - e) * loss + e * mean over classes of -log p`` (weighted as PyTorch).
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {eps}")
    shape, tshape = tuple(A.shape(input)), tuple(A.shape(target))
    cdim = _class_dim("cross_entropy", shape)
    if np.dtype(A.dtype(target)).kind == "f" and tshape == shape:
        if eps:
            target = target * (1.0 - eps) + eps / shape[cdim]
        return _soft_cross_entropy(input, target, weight, cdim, reduction)
    if concrete(input) and input._data.dtype.kind == "f":
        logp = input.log_softmax(cdim)
    else:
        logp = _named("LogSoftmaxBackward0", lambda x: _log_softmax(x, cdim), input,
                      structure=("log_softmax", cdim))
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not eps:
        return loss
    return loss * (1.0 - eps) + _smoothing(logp, target, weight, ignore_index, reduction,
                                           cdim) * eps


def _smoothing(logp, target, weight, ignore_index: int, reduction: str, cdim: int):
    """The uniform-target part of a label-smoothed cross-entropy over class indices."""
    shape = tuple(A.shape(logp))
    n = shape[cdim]
    wshape = tuple(n if i == cdim else 1 for i in range(len(shape)))
    w = None if weight is None else A.reshape(weight, wshape)
    valid = ops.ne(target, ignore_index)
    per = A.sum(logp if w is None else logp * w, cdim) * (-1.0 / n)
    per = ops.select(valid, per, 0)
    if reduction != "mean":
        return _reduce(per, reduction)
    if w is None:
        return A.sum(per) / A.sum(A.astype(valid, A.dtype(logp)))
    t = A.reshape(A.astype(target, np.int64), shape[:cdim] + (1,) + shape[cdim + 1:])
    onehot = ops.eq(t, A.reshape(ops.iota(n=n, dtype="i64"), wshape))
    wt = ops.select(valid, A.sum(ops.select(onehot, w, 0), cdim), 0)
    return A.sum(per) / A.sum(wt)


def _soft_cross_entropy(input, target, weight, cdim: int, reduction: str):
    wshape = tuple(A.shape(input)[cdim] if i == cdim else 1 for i in range(len(A.shape(input))))

    def f(x, t, *w):
        prod = _log_softmax(x, cdim) * t
        if w:
            prod = prod * A.reshape(w[0], wshape)
        return _reduce(-A.sum(prod, cdim), reduction)

    name = {"mean": "DivBackward0", "sum": "SumBackward0", "none": "NegBackward0"}[reduction]
    return _named(name, f, input, target, *(() if weight is None else (weight,)),
                  structure=("soft_cross_entropy", cdim, reduction))


from .attention import *  # noqa: E402,F403  (scaled_dot_product_attention)
from .attention import __all__ as _attention_all  # noqa: E402
from .functional_conv import *  # noqa: E402,F403  (conv1d/2d/3d, max/avg pooling)
from .functional_conv import __all__ as _conv_all  # noqa: E402
from .functional_loss import *  # noqa: E402,F403  (bce, l1, smooth l1, huber, kl_div)
from .functional_loss import __all__ as _loss_all  # noqa: E402
from .functional_norm import *  # noqa: E402,F403  (layer/batch norm, dropout, embedding)
from .functional_norm import __all__ as _norm_all  # noqa: E402

__all__ += [*_attention_all, *_conv_all, *_loss_all, *_norm_all]
