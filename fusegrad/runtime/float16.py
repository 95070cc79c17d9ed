"""Float16 in a program to compile: refused with what to do instead (compiled loops have
no float16 arithmetic)."""

from __future__ import annotations

import numpy as np

from ..ir import Function
from ..ir.errors import FusegradError


class Float16Error(FusegradError, TypeError):
    """A float16 value in a Function to compile: compiled loops have no float16 arithmetic."""


_F16 = np.dtype(np.float16)


def _is_f16(dtype) -> bool:
    # (a dtype compared with the scalar type np.float16 converts it every time; "e" is
    # the type character of half precision alone)
    return dtype is _F16 or dtype.char == "e"


def _refuse_float16(fn: Function) -> None:
    """Raise ``Float16Error`` naming the first float16 argument, or else the first op
    making a float16 value, of ``fn`` (regions included), and saying what to do."""
    what = next((f"argument {p.hint or i} ({p.type})" for i, p in enumerate(fn.params)
                 if _is_f16(p.type.dtype)), None)
    pending = [fn]
    while what is None and pending:
        for op in pending.pop().ops:  # (a loop, not any(): a generator per op is most of it)
            for r in op.results:
                if _is_f16(r.type.dtype):
                    break
            else:
                if op.regions:
                    pending.extend(op.regions)
                continue
            what = f"`{op.name}` making {op.results[0].type}" + (
                f" at {op.loc}" if op.loc else "")
            break
    if what is not None:
        raise Float16Error(
            f"@{fn.name}: {what} is float16, which compiled code does not support (no "
            "float16 arithmetic in its loops). Compute in float32 (x.astype(np.float32), and "
            "cast the results back with .astype(np.float16) if you need them), or run "
            "float16 with FUSEGRAD_DISABLE_JIT=1 (the NumPy interpreter) or with eager "
            "Tensors, which compute it.")
