"""Simplification passes over the IR. Dead-code elimination."""

from __future__ import annotations

from ..ir import Function


def dce(fn: Function) -> Function:
    """Drop ops none of whose results reach the Function's results (ops are pure)."""
    live = set(fn.results)
    kept = []
    for op in reversed(fn.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    if len(kept) == len(fn.ops):
        return fn
    return fn.replace(ops=tuple(reversed(kept)))
