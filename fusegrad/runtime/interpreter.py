"""The NumPy reference interpreter: runs any Function op by op.

It is the oracle of the test suite (compiled == interpreted == finite
differences) and the executor when ``FUSEGRAD_DISABLE_JIT=1``.
"""

from __future__ import annotations

import numpy as np

from ..ir import Function
from ..ir.bind import eval_numpy
from ..ir.errors import ShapeError
from ..ir.optable import OPS
from ..ir.types import TensorType


def run(fn: Function, *args) -> tuple[np.ndarray, ...]:
    """``fn(*args)`` on concrete arrays; a tuple of NumPy arrays, one per result."""
    if len(args) != len(fn.params):
        raise TypeError(f"@{fn.name} takes {len(fn.params)} arguments, got {len(args)}")
    env = {}
    for p, a in zip(fn.params, args):
        a = np.asarray(a)
        if TensorType(a.shape, a.dtype) != p.type:
            raise ShapeError(
                f"@{fn.name}: argument %{p.hint or '?'} must be {p.type}, "
                f"got {TensorType(a.shape, a.dtype)}"
            )
        env[p] = a
    for op in fn.ops:
        out = run_op(fn.name, op, [env[v] for v in op.operands])
        env.update(zip(op.results, out if len(op.results) > 1 else (out,)))
    return tuple(env[r] for r in fn.results)


def run_op(name: str, op, operands):
    """``op`` of Function ``@name`` on concrete operands; an index out of range is an
    ``IndexError`` naming the op, the Function and the user's line."""
    try:
        return eval_numpy(OPS[op.name], operands, op.attrs, op.regions)
    except IndexError as e:
        where = f", at {op.loc}" if op.loc else ""
        what = "" if str(e).startswith(f"{op.name}:") else f"{op.name} of "
        raise IndexError(f"{e} (in {what}@{name}{where})") from None
