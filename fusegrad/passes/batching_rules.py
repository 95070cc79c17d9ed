"""Batching rules: how each op of the table runs over a batch dimension.

A rule is called as ``rule(op, size, batched, *operands, **attrs)``: ``op`` is
the op's name (ops of one kind share a rule), ``size`` the batch size,
``batched`` one flag per operand, and every batched operand carries the batch
as its leading axis. The rule returns the op's result(s), each batched along
axis 0, built from the op table's own ops, so a batched Function is plain IR.
The engine (``passes.batching``) calls a rule only when some operand is batched.
The region ops' rules (control flow, ``custom_vjp_call``, ``fused``) batch their
regions with the pass itself, so they live above it, in ``batching_control``.
"""

from __future__ import annotations

import math

from ..ir import bind, ops
from ..ir.bind import aval
from ..ir.optable import OPS
from ..ir.shapes import norm_axis
from ..ir.types import dtype_name

#: op name -> batching rule.
BATCH_RULES: dict = {}

#: Ops without operands (constants, iota): nothing to batch, replayed as they are.
NO_OPERANDS = frozenset(name for name, d in OPS.items() if d.arity == 0)


def rule(*names):
    def deco(f):
        for n in names:
            BATCH_RULES[n] = f
        return f

    return deco


# --- helpers ------------------------------------------------------------------------


def shape(x) -> tuple[int, ...]:
    return aval(x).shape


def reshape(x, new_shape):
    return x if shape(x) == tuple(new_shape) else ops.reshape(x, shape=tuple(new_shape))


def transpose(x, perm):
    return x if tuple(perm) == tuple(range(len(perm))) else ops.transpose(x, perm=tuple(perm))


def moveaxis(x, src: int, dst: int):
    perm = [i for i in range(len(shape(x))) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def with_batch(x, batched: bool, size: int):
    """``x`` batched along axis 0: unbatched operands are broadcast (every row the same)."""
    return x if batched else ops.broadcast_to(x, shape=(size, *shape(x)))


def lift(x, rank: int):
    """Batched ``x`` of shape ``(B, *s)`` as ``(B, 1, ..., 1, *s)`` with ``rank`` non-batch
    axes, so NumPy broadcasting lines ``s`` up with the trailing axes of the others."""
    s = shape(x)
    return reshape(x, (s[0], *(1,) * (rank - len(s) + 1), *s[1:]))


def _flat_index(idx, n: int, size: int):
    """Per-row indices ``idx`` (``(B, *i)``) into axis 0 of a ``(B * n, ...)`` array.

    An index outside ``-n..n-1`` becomes ``B * n``, out of bounds of the merged axis
    too, so the gather or scatter still raises instead of reaching another row."""
    valid = ops.logical_and(ops.ge(idx, -n), ops.lt(idx, n))
    offsets = ops.mul(ops.iota(n=size, dtype=dtype_name(aval(idx).dtype)), n)
    flat = ops.select(ops.lt(idx, 0), idx + n, idx) + lift(offsets, len(shape(idx)) - 1)
    return ops.select(valid, flat, size * n)


def _rows_first(x, axis: int, size: int):
    """Batched ``x`` with the indexed ``axis`` (of the unbatched shape) merged into the batch:
    shape ``(B * n, *pre, *post)``."""
    moved = moveaxis(x, axis + 1, 1)
    s = shape(moved)
    return reshape(moved, (size * s[1], *s[2:]))


# --- elementwise --------------------------------------------------------------------


@rule(*(n for n, d in OPS.items() if d.kind == "elementwise" and d.arity))
def elementwise_batch(op, size, batched, *xs, **attrs):
    """Batched operands get size-1 axes after the batch so the others broadcast against
    their trailing axes, as they did unbatched."""
    rank = max(len(shape(x)) - b for x, b in zip(xs, batched))
    return bind(op, *(lift(x, rank) if b else x for x, b in zip(xs, batched)), **attrs)


# --- reductions and scans -----------------------------------------------------------


@rule("reduce_sum", "reduce_max", "reduce_min")
def reduce_batch(op, size, batched, x, *, axes):
    return bind(op, x, axes=tuple(a + 1 for a in axes))


@rule("argmax", "argmin")
def arg_reduce_batch(op, size, batched, x, *, axis):
    rank = len(shape(x)) - 1
    if rank == 0:  # the index of the one element of a 0-d array
        return ops.broadcast_to(ops.constant(value=0, dtype="i64"), shape=(size,))
    return bind(op, x, axis=norm_axis(op, axis, rank) + 1)


@rule("argsort")
def argsort_batch(op, size, batched, x, *, axis):
    return ops.argsort(x, axis=norm_axis(op, axis, len(shape(x)) - 1) + 1)


@rule("cumsum")
def cumsum_batch(op, size, batched, x, *, axis):
    return ops.cumsum(x, axis=norm_axis(op, axis, len(shape(x)) - 1) + 1)


# --- shape ops ----------------------------------------------------------------------


@rule("reshape")
def reshape_batch(op, size, batched, x, *, shape):
    return ops.reshape(x, shape=(size, *shape))


@rule("transpose")
def transpose_batch(op, size, batched, x, *, perm):
    return ops.transpose(x, perm=(0, *(p + 1 for p in perm)))


@rule("broadcast_to")
def broadcast_to_batch(op, size, batched, x, *, shape):
    return ops.broadcast_to(lift(x, len(shape)), shape=(size, *shape))


@rule("slice")
def slice_batch(op, size, batched, x, *, starts, stops, steps):
    return ops.slice(x, starts=(0, *starts), stops=(size, *stops), steps=(1, *steps))


@rule("update_slice")
def update_slice_batch(op, size, batched, x, v, *, starts, stops, steps):
    x, v = (with_batch(a, b, size) for a, b in zip((x, v), batched))
    return ops.update_slice(x, v, starts=(0, *starts), stops=(size, *stops), steps=(1, *steps))


@rule("concatenate")
def concatenate_batch(op, size, batched, *xs, axis):
    axis = norm_axis(op, axis, len(shape(xs[0])) - batched[0])
    xs = (with_batch(x, b, size) for x, b in zip(xs, batched))
    return ops.concatenate(*xs, axis=axis + 1)


# --- gather and scatter along one axis ----------------------------------------------


@rule("take")
def take_batch(op, size, batched, x, idx, *, axis):
    bx, bi = batched
    rank = len(shape(x)) - bx
    axis = norm_axis(op, axis, rank)
    if not bi:
        return ops.take(x, idx, axis=axis + 1)
    if not bx:  # the batch axis of idx lands at ``axis`` of the result
        return moveaxis(ops.take(x, idx, axis=axis), axis, 0)
    # Both batched: gather rows of x merged with its batch, then put the index axes back.
    ni = len(shape(idx)) - 1
    out = ops.take(_rows_first(x, axis, size), _flat_index(idx, shape(x)[axis + 1], size),
                   axis=0)
    # out: (B, *i, *pre, *post) -> (B, *pre, *i, *post)
    perm = [0, *range(1 + ni, 1 + ni + axis), *range(1, 1 + ni),
            *range(1 + ni + axis, len(shape(out)))]
    return transpose(out, perm)


@rule("index_add", "index_set")
def index_update_batch(op, size, batched, x, idx, v, *, axis):
    bx, bi, bv = batched
    rank = len(shape(x)) - bx
    axis = norm_axis(op, axis, rank)
    x, v = with_batch(x, bx, size), with_batch(v, bv, size)
    if not bi:
        return bind(op, x, idx, v, axis=axis + 1)
    # Batched indices: scatter into x with its indexed axis merged into the batch.
    n = shape(x)[axis + 1]
    ni = len(shape(idx)) - 1
    # v: (B, *pre, *i, *post) -> (B, *i, *pre, *post)
    perm = [0, *range(1 + axis, 1 + axis + ni), *range(1, 1 + axis),
            *range(1 + axis + ni, len(shape(v)))]
    rows = bind(op, _rows_first(x, axis, size), _flat_index(idx, n, size), transpose(v, perm),
                axis=0)
    s = shape(x)
    moved = reshape(rows, (size, n, *s[1:axis + 1], *s[axis + 2:]))
    return moveaxis(moved, 1, axis + 1)


# --- contraction --------------------------------------------------------------------


@rule("matmul")
def matmul_batch(op, size, batched, a, b):
    """One 2-D product when only ``a`` is batched against a matrix (the common case: a
    batch of rows times weights); otherwise the batch becomes a matmul batch axis."""
    ba, bb = batched
    sa, sb = shape(a), shape(b)
    if ba and not bb and len(sb) == 2:
        rows = math.prod(sa[:-1])
        out = ops.matmul(reshape(a, (rows, sa[-1])), b)
        return reshape(out, (*sa[:-1], sb[-1]))
    if bb and not ba and len(sa) == 2 and len(sb) == 3:
        k, n = sb[1:]
        cols = reshape(transpose(b, (1, 0, 2)), (k, size * n))
        out = reshape(ops.matmul(a, cols), (sa[0], size, n))
        return transpose(out, (1, 0, 2))
    rank = max(len(sa) - ba, len(sb) - bb)
    a, b = lift(a, rank) if ba else a, lift(b, rank) if bb else b
    if ba and bb and 1 in (sa[-2], sa[-1], sb[-1]):
        return _vector_products(a, b)
    return ops.matmul(a, b)


def _vector_products(a, b):
    """A batch of outer products or matrix-vector products (an extent of 1) as an
    elementwise product and a sum, which fuse into one loop, instead of one BLAS call
    per example: ``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]``."""
    sa, sb = shape(a), shape(b)
    prod = ops.mul(reshape(a, (*sa, 1)), reshape(b, (*sb[:-2], 1, *sb[-2:])))
    s = shape(prod)
    if sa[-1] == 1:
        return reshape(prod, (*s[:-3], s[-3], s[-1]))
    return ops.reduce_sum(prod, axes=(len(s) - 2,))
