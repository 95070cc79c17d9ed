"""``torch.topk`` and ``torch.multinomial`` (and their Tensor methods).

``topk`` is the ``argsort`` primitive (descending when ``largest``) cut to
``k`` along ``dim``, the values gathered through those indices
(``sorting._take_along``), so the gradient scatters back to the chosen
elements (``TopkBackward0``); ties keep their order, the result is always
sorted (``sorted=False`` allows any order in PyTorch).

``multinomial`` draws category indices from the rows of non-negative weights.
On concrete data it draws from the generator's NumPy stream (``fg.manual_seed``):
with replacement, each sample is the category whose cumulative-weight interval
holds a uniform number; without replacement, the ``num_samples`` smallest of
``E / w`` with ``E`` exponential (an exponential race: the same law as drawing
one at a time and renormalising). Under ``fg.jit`` the same two methods run on
IR ops, with the uniform numbers hashed (``threefry2x32``) from a key the
generator keeps in a Tensor and advances in place, so every compiled call
draws new samples.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..ir import ops
from . import dtypes as D
from .creation import Generator, default_generator, from_numpy
from .names import NAMES
from .out_arg import write_out
from .sorting import _dim, argsort
from .tensor import Tensor
from .tensor_math import op

NAMES.setdefault("topk", "TopkBackward0")

topk_result = namedtuple("topk", ["values", "indices"])


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True, *,
         out=None):
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim``, as
    ``(values, indices)``; differentiable in ``values``."""
    k = int(k)
    if input.ndim == 0:
        if k not in (0, 1):
            raise RuntimeError("selected index k out of range")
        res = topk_result(input.clone(), from_numpy(np.zeros((), np.int64)))
        return res if out is None else write_out("topk", out, res)
    d = _dim(dim, input.ndim)
    n = input.shape[d]
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    indices = argsort(input, d, descending=largest).narrow(d, 0, k).contiguous()
    res = topk_result(op("topk", lambda: input.gather(d, indices)), indices)
    return res if out is None else write_out("topk", out, res)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None,
                out=None):
    """``num_samples`` category indices (int64) per row of the weights ``input`` (1-D or
    2-D, non-negative, finite, a positive sum per row)."""
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.is_floating_point():
        raise RuntimeError("multinomial only supports floating-point dtypes for input")
    n, m = input.shape[-1], int(num_samples)
    if m <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and m > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    gen = generator or default_generator
    w = input.detach()
    rows = w if w.ndim == 2 else w.unsqueeze(0)
    if isinstance(rows._data, np.ndarray):
        res = from_numpy(_draw_numpy(rows.numpy().astype(np.float64), m, replacement, gen))
    else:
        res = _draw_traced(rows, m, replacement, gen)
    res = res if input.ndim == 2 else res.squeeze(0)
    return res if out is None else write_out("multinomial", out, res)


def _check_weights(w: np.ndarray, m: int, replacement: bool) -> None:
    if not np.isfinite(w).all() or (w < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (w.sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and ((w > 0).sum(-1) < m).any():
        raise RuntimeError("invalid multinomial distribution (with replacement=False, not "
                           "enough non-negative category to sample)")


def _draw_numpy(w: np.ndarray, m: int, replacement: bool, gen: Generator) -> np.ndarray:
    _check_weights(w, m, replacement)
    with gen._lock:
        u = gen._rng.random((w.shape[0], m) if replacement else w.shape)
    if not replacement:
        with np.errstate(divide="ignore"):
            race = -np.log1p(-u) / w  # exponential / weight; inf where the weight is 0
        return np.argsort(race, axis=-1, kind="stable")[:, :m].astype(np.int64)
    cdf = np.cumsum(w, axis=-1)
    last = np.max(np.where(w > 0, np.arange(w.shape[1]), 0), axis=-1, keepdims=True)
    picks = (cdf[:, None, :] <= (u * cdf[:, -1:])[:, :, None]).sum(-1)
    return np.minimum(picks, last).astype(np.int64)


def _draw_traced(rows, m: int, replacement: bool, gen: Generator):
    """``_draw_numpy`` with Tensor operations on traced weights (no value checks)."""
    r, n = rows.shape
    u = _hashed_uniform(gen, (r, m) if replacement else (r, n))
    w = rows.to(D.float64)
    if not replacement:
        return argsort(-(-u).log1p() / w, -1)[:, :m]
    cdf = w.cumsum(-1)
    last = ((w > 0).to(D.int64) * from_numpy(np.arange(n))).amax(-1, keepdim=True)
    picks = (cdf.unsqueeze(1) <= (u * cdf[:, -1:]).unsqueeze(2)).sum(-1)
    return picks.minimum(last)


def _hashed_uniform(gen: Generator, shape: tuple):
    """Uniform numbers in [0, 1) hashed from the generator's key, which then advances in
    place (state of a jitted step, so each compiled call draws anew)."""
    key = gen._key
    k0, k1 = key[0], key[1]
    idx = from_numpy(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape))
    bits = ops.threefry2x32(k0, k1, idx, np.int64(0), word=0)
    nxt = ops.threefry2x32(k0, k1, np.array([0, 1], np.int64), np.int64(1), word=0)
    key.copy_(nxt)
    return bits.to(D.float64) * 2.0 ** -32


default_generator._key  # noqa: B018  (made at import, before any jitted step can trace)
Tensor.topk = topk
Tensor.multinomial = multinomial
__all__ = ["multinomial", "topk"]
