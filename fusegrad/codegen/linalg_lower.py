"""Driver statements of the linear-algebra ops (``fusegrad.ir.linalg_ops``, ``eig_ops``).

Each operand is viewed as a 3-D stack ``(batch, M, N)``, one ``codegen.rt_linalg``
helper loops over the stack calling LAPACK, and each result is reshaped back to its
IR shape (a per-matrix scalar of an unbatched op becomes a scalar).

``eig``, ``sqrtm`` and ``sylvester`` (``HOST_OPS``), which Numba has no implementation of
(its ``eig`` of a real matrix cannot return complex eigenvalues), run their op-table
NumPy/SciPy implementation in a ``numba.objmode`` block (``rt_linalg.host_op``): the
same values as the interpreter's, with the GIL taken for the call.
"""

from __future__ import annotations

import math

from ..ir import Op, Value
from ..ir.eig_ops import EIG_OPS
from ..ir.linalg_ops import LINALG_OPS
from .emit import _Writer

HOST_OPS = frozenset(EIG_OPS)
LOWERED = frozenset(LINALG_OPS) | HOST_OPS


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


def _host_lines(op: Op, names) -> list[str]:
    """``with numba.objmode(...): results = rtl.host_op(name, operands...)``."""
    decl = ", ".join(
        f'{names[r]}="{r.type.dtype.name}[{", ".join([":"] * (r.type.ndim - 1) + ["::1"])}]"'
        for r in op.results)
    outs = "".join(f"{names[r]}, " for r in op.results)
    args = ", ".join(names[v] for v in op.operands)
    return [f"    with numba.objmode({decl}):",
            f"        {outs}= rtl.host_op({op.name!r}, {args})"]


def linalg_lines(w: _Writer, op: Op, names) -> list[str]:
    """``tmp = rtl.<op>(stacks..., attrs...)`` and one reshape per result."""
    if op.name in HOST_OPS:
        return _host_lines(op, names)
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
