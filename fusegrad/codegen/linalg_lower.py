"""Driver statements of the linear-algebra ops (``fusegrad.ir.linalg_ops``).

Each operand is viewed as a 3-D stack ``(batch, M, N)``, one ``codegen.rt_linalg``
helper loops over the stack calling LAPACK, and each result is reshaped back to its
IR shape (a per-matrix scalar of an unbatched op becomes a scalar).
"""

from __future__ import annotations

import math

from ..ir import Op, Value
from ..ir.linalg_ops import LINALG_OPS
from .emit import _Writer

LOWERED = frozenset(LINALG_OPS)


def _stack(w: _Writer, x: str, v: Value) -> str:
    *batch, m, n = v.type.shape
    dims = f"({w.size(math.prod(batch))}, {w.size(m)}, {w.size(n)})"
    return f"rt.contiguous({x}).reshape({dims})"


def _attrs(op: Op) -> list[str]:
    if op.name == "triangular_solve":
        return [str(bool(op.attrs[k])) for k in ("lower", "trans", "unit_diagonal")]
    if op.name == "svd":
        return [str(bool(op.attrs["full_matrices"]))]
    if op.name == "qr":
        return [str(bool(op.attrs["complete"]))]
    return []


def linalg_lines(w: _Writer, op: Op, names) -> list[str]:
    """``tmp = rtl.<op>(stacks..., attrs...)`` and one reshape per result."""
    tmp = names[op.results[0]] + "_s"
    args = [_stack(w, names[v], v) for v in op.operands] + _attrs(op)
    outs = [f"{tmp}{i}" for i in range(len(op.results))]
    lines = [f"    {', '.join(outs)} = "
             f"rtl.{op.name}({', '.join(args)})"]
    for r, o in zip(op.results, outs):
        if r.type.shape == ():
            lines.append(f"    {names[r]} = {o}.ravel()[0]")
        else:
            lines.append(f"    {names[r]} = {o}.reshape({w.shape(r.type.shape)})")
    return lines
