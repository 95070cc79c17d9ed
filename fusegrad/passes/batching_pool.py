"""The batching rules of the pooling ops: they pool the trailing axes only, so the
batch (leading axis of every batched operand) is one more independent plane; an
unbatched operand next to a batched one is broadcast."""

from __future__ import annotations

from ..ir import bind
from .batching_rules import rule, with_batch


@rule("max_pool", "max_pool_argmax", "sum_pool", "sum_pool_transpose", "max_pool_grad",
      "max_pool_take")
def pool_batch(op, n, batched, *operands, **attrs):
    args = [with_batch(v, b, n) for v, b in zip(operands, batched)]
    return bind(op, *args, **attrs)
