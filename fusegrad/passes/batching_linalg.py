"""Batching rules of the linear-algebra ops (``fusegrad.ir.linalg_ops``, ``eig_ops``).

These ops already map over the leading axes of their operands, and a batched operand
carries the batch as its leading axis: the rule broadcasts the unbatched operands
along a new leading axis (two-operand ops need equal batch axes) and binds the op.
"""

from __future__ import annotations

from ..ir import bind
from ..ir.eig_ops import EIG_OPS
from ..ir.linalg_ops import LINALG_OPS
from .batching_rules import rule, with_batch


@rule(*LINALG_OPS, *EIG_OPS)
def linalg_batch(op, size, batched, *xs, **attrs):
    return bind(op, *(with_batch(x, b, size) for x, b in zip(xs, batched)), **attrs)
