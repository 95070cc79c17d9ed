"""Run a Function op by op through ``bind``.

On arrays this is the NumPy reference interpreter; on tracers it inlines the
Function into the current trace (how a transformed function is applied inside
another transform); on eager Tensors it records autograd nodes.
"""

from __future__ import annotations

from .bind import aval, bind
from .core import Function
from .errors import ShapeError
from .location import at


def evaluate(fn: Function, *args):
    """``fn(*args)``: returns a tuple of results, one per ``fn.results``."""
    if len(args) != len(fn.params):
        raise TypeError(f"@{fn.name} takes {len(fn.params)} arguments, got {len(args)}")
    env = {}
    for p, a in zip(fn.params, args):
        got = aval(a)
        if got != p.type:
            raise ShapeError(f"@{fn.name}: argument {p.hint or ''} must be {p.type}, got {got}")
        env[p] = a
    for op in fn.ops:
        if op.loc is None:
            out = bind(op.name, *(env[v] for v in op.operands), regions=op.regions, **op.attrs)
        else:  # inlined into a trace: the op keeps the line it came from
            with at(op.loc):
                out = bind(op.name, *(env[v] for v in op.operands), regions=op.regions,
                           **op.attrs)
        if len(op.results) == 1:
            out = (out,)
        env.update(zip(op.results, out))
    return tuple(env[r] for r in fn.results)
