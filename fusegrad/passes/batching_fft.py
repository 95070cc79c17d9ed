"""Batching rule of the ``fft`` op: the batch axis 0 leads, the transform axes shift by one."""

from __future__ import annotations

from ..ir import bind
from .batching_rules import BATCH_RULES


def fft_batch(op, size, batched, x, *, kind, axes, last, norm):
    return bind(op, x, kind=kind, axes=tuple(a + 1 for a in axes), last=last, norm=norm)


BATCH_RULES["fft"] = fft_batch
