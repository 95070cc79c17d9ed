"""Batching (vectorising map) as an IR -> IR pass.

``batch(fn, in_axes, axis_size, out_axes)`` returns a Function computing ``fn``
for every index of a batch dimension at once: parameter ``i`` gains an axis of
length ``axis_size`` at ``in_axes[i]`` (``None``: the parameter is shared by
the whole batch), result ``j`` has the batch at ``out_axes[j]``. The pass
replays ``fn`` into a new trace with the batch moved to axis 0, calling each
op's batching rule (``batching_rules.BATCH_RULES``) where an operand is
batched and the op itself where none is, so the result is plain IR that
``vjp``, simplification and fusion take like any other.

>>> import numpy as np
>>> from fusegrad.ir import TensorType, ops
>>> from fusegrad.tracer import trace
>>> f = trace(lambda x, w: ops.reduce_sum(x * w, axes=(0,)),
...           TensorType((3,), np.float64), TensorType((3,), np.float64))
>>> print(batch(f, (0, None), 5))
func @f_batched(%x: f64[5,3], %w: f64[3]) -> f64[5] {
  %0 = mul %x, %w : f64[5,3]
  %1 = reduce_sum %0 {axes=[1]} : f64[5]
  return %1
}
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir import Function, TensorType, bind
from ..ir.errors import FusegradError
from ..ir.location import at
from ..ir.stats import timed
from ..tracer import Trace
from .batching_rules import BATCH_RULES, moveaxis, with_batch
from .simplify import dce


class BatchingError(FusegradError, ValueError):
    """A batch request that does not fit the Function (axes out of range, ...)."""


Axes = int | None | Sequence[int | None]


def _per_item(axes: Axes, n: int, what: str, of: str) -> tuple[int | None, ...]:
    if axes is None or isinstance(axes, int):
        return (axes,) * n
    axes = tuple(axes)
    if len(axes) != n:
        raise BatchingError(f"batch: {what} has {len(axes)} entries for {n} {of}")
    return axes


def _norm(axis: int | None, rank: int, what: str) -> int | None:
    """``axis`` of an array of ``rank`` batched dimensions (the batch included)."""
    if axis is None:
        return None
    if not -rank <= axis < rank:
        raise BatchingError(f"batch: {what} axis {axis} is out of range for a batched array "
                            f"of rank {rank} (valid: {-rank} to {rank - 1})")
    return axis % rank


def batched_type(t: TensorType, axis: int | None, size: int) -> TensorType:
    if axis is None:
        return t
    return TensorType((*t.shape[:axis], size, *t.shape[axis:]), t.dtype)


@timed("passes")
def batch(fn: Function, in_axes: Axes, axis_size: int, out_axes: Axes = 0,
          name: str | None = None) -> Function:
    """``fn`` over a batch of ``axis_size``: see the module docstring.

    ``in_axes``/``out_axes``: one entry per parameter/result, or one for all;
    negative axes count from the end of the batched array. A result with
    ``out_axes`` None must not depend on a batched parameter.
    """
    in_axes = _per_item(in_axes, len(fn.params), "in_axes", "parameters")
    out_axes = _per_item(out_axes, len(fn.results), "out_axes", "results")
    in_axes = tuple(_norm(a, p.type.ndim + 1, f"parameter {i} in_axes")
                    for i, (p, a) in enumerate(zip(fn.params, in_axes)))
    with Trace(name or f"{fn.name}_batched") as t:
        args, batched = [], []
        for p, a in zip(fn.params, in_axes):
            x = t.new_arg(batched_type(p.type, a, axis_size), p.hint)
            args.append(x if a in (None, 0) else moveaxis(x, a, 0))
            batched.append(a is not None)
        outs, out_batched = replay(fn, axis_size, args, batched)
        results = []
        for j, (r, b, a) in enumerate(zip(outs, out_batched, out_axes)):
            if a is None:
                if b:
                    raise BatchingError(
                        f"batch: result {j} of @{fn.name} ({fn.results[j].type}) depends on a "
                        "batched input, so it differs across the batch and cannot be returned "
                        "with out_axes None; give it an output axis")
                results.append(t.wrap(r))
                continue
            r = with_batch(r, b, axis_size)
            results.append(t.wrap(moveaxis(r, 0, _norm(a, fn.results[j].type.ndim + 1,
                                                         f"result {j} out_axes"))))
        out_fn = t.builder.build([t.to_value(x) for x in results])
    if t.free:
        raise RuntimeError(
            f"internal error: a batching rule used a concrete array while batching @{fn.name}; "
            "rules must build arrays with ops (iota, broadcast_to)")
    return dce(out_fn)


def replay(fn: Function, size: int, args: Sequence, batched: Sequence[bool]):
    """Run ``fn``'s ops on ``args`` (batched ones with the batch at axis 0) in the current
    trace; returns the results and which of them are batched."""
    env = dict(zip(fn.params, args))
    is_batched = {p for p, b in zip(fn.params, batched) if b}
    for op in fn.ops:
        xs = [env[v] for v in op.operands]
        flags = tuple(v in is_batched for v in op.operands)
        if any(flags):
            rule = BATCH_RULES.get(op.name)
            if rule is None:
                where = f" (at {op.loc})" if op.loc else ""
                raise BatchingError(f"op {op.name!r}{where} has no batching rule yet, so it "
                                    "cannot be applied to batched operands")
            kwargs = dict(op.attrs, regions=op.regions) if op.regions else op.attrs
            with at(op.loc):  # batched ops point at the op's source line
                out = rule(op.name, size, flags, *xs, **kwargs)
            is_batched.update(op.results)
        else:
            with at(op.loc):
                out = bind(op.name, *xs, regions=op.regions, **op.attrs)
        env.update(zip(op.results, out if len(op.results) > 1 else (out,)))
    return [env[r] for r in fn.results], [r in is_batched for r in fn.results]

