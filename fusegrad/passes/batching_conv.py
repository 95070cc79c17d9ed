"""The batching rule of ``conv``: a batch becomes more images or more groups.

A batched input against a shared weight folds the batch into the image axis
``N``; a batched weight makes ``B`` times as many groups, with the batched
input's (or the broadcast input's) channels laid side by side to match.
"""

from __future__ import annotations

from ..ir import ops
from .batching_rules import rule, shape, transpose, with_batch


@rule("conv")
def conv_batch(op, size, batched, x, w, *, groups, **attrs):
    bx, bw = batched
    xs = shape(x)
    if not bw:
        out = ops.conv(ops.reshape(x, shape=(size * xs[1], *xs[2:])), w, groups=groups, **attrs)
        return ops.reshape(out, shape=(size, xs[1], *shape(out)[1:]))
    x = with_batch(x, bx, size)
    xs, ws = shape(x), shape(w)
    nsp = len(xs) - 3
    xt = transpose(x, (1, 0, *range(2, 3 + nsp)))  # (N, B, C, *S)
    xt = ops.reshape(xt, shape=(xs[1], size * xs[2], *xs[3:]))
    wt = ops.reshape(w, shape=(size * ws[1], *ws[2:]))
    out = ops.conv(xt, wt, groups=groups * size, **attrs)  # (N, B * O, *Q)
    os_ = shape(out)
    out = ops.reshape(out, shape=(os_[0], size, ws[1], *os_[2:]))
    return transpose(out, (1, 0, *range(2, 3 + nsp)))
