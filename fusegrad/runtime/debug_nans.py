"""NaN/inf debugging for compiled calls (``FUSEGRAD_DEBUG_NANS=1`` or ``fg.debug_nans()``).

When a call returns a floating-point result that is not finite, the same Function
is run again op by op with the NumPy interpreter, and the first op whose result
holds a NaN or an infinity while its operands were finite is reported in a
``FloatingPointError``: the op in IR text, whether it belongs to the forward or the
reverse-mode (adjoint) part, and the user's source line it comes from (adjoint
ops carry the location of the primal op they differentiate). An argument that is
already non-finite is reported as such. For a control-flow op (``cond``, ``scan``,
``while_loop``...) the first op inside its body that made a NaN/inf is reported too.

The check costs one sum over each floating-point result per call;
with the mode off it costs one flag test.
"""

from __future__ import annotations

import linecache
import math

import numpy as np

from .. import config
from ..ir import Function
from ..ir.bind import eval_numpy
from ..ir.control_ops import WATCH
from ..ir.optable import OPS
from ..ir.printer import format_op_header, value_names


def _bad(a) -> str | None:
    """``"nan"``, ``"inf"`` or ``"nan and inf"`` if float array ``a`` is not finite."""
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.inexact) or a.size == 0:
        return None
    if np.isfinite(a).all():
        return None
    nan = bool(np.isnan(a).any())
    inf = bool(np.isinf(a).any())
    return "nan and inf" if nan and inf else ("nan" if nan else "inf")


def _finite(o) -> bool:
    """Quick test: a float sum is finite only if every element is (NaN and inf propagate;
    an overflowing sum is rechecked exactly)."""
    if type(o) is not np.ndarray:
        o = np.asarray(o)
    if o.dtype.kind != "f":
        return o.dtype.kind != "c" or bool(np.isfinite(o).all())
    return math.isfinite(np.add.reduce(o, axis=None)) or bool(np.isfinite(o).all())


def check(fn: Function, args, outs) -> None:
    """Raise ``FloatingPointError`` naming the op of ``fn`` that first made a result of
    ``outs`` (``fn`` applied to ``args``) non-finite; nothing if they are all finite."""
    for o in outs:
        if not _finite(o):
            break
    else:
        return
    bad = [(i, kind) for i, o in enumerate(outs) if (kind := _bad(o)) is not None]
    if not bad:
        return
    i, kind = bad[0]
    head = (f"FUSEGRAD_DEBUG_NANS: @{fn.name} returned {kind} in result {i} "
            f"({fn.results[i].type})")
    raise FloatingPointError(head + "\n" + _first_bad(fn, args))


def _first_bad(fn: Function, args) -> str:
    names = value_names(fn)
    env = {}
    for p, a in zip(fn.params, args):
        a = np.asarray(a)
        kind = _bad(a)
        if kind is not None:
            return (f"argument {names[p]} ({p.type}) already holds {kind}; "
                    "the function did not produce it")
        env[p] = a
    adjoint = {p for p in fn.params if p.hint == "ct"}
    inner: list = []  # the first op inside a control-flow region making a NaN/inf

    def watch(region, rop, outs):
        if not inner:
            kind = next((k for o in outs if (k := _bad(o)) is not None), None)
            if kind is not None:
                inner.append((region, rop, kind))

    prev, WATCH.fn = WATCH.fn, watch
    try:
        for op in fn.ops:
            inner.clear()
            out = eval_numpy(OPS[op.name], [env[v] for v in op.operands], op.attrs,
                             op.regions)
            out = out if len(op.results) > 1 else (out,)
            env.update(zip(op.results, out))
            if any(v in adjoint for v in op.operands):
                adjoint.update(op.results)
            for r, o in zip(op.results, out):
                kind = _bad(o)
                if kind is not None:
                    text = _describe(op, names, kind, r in adjoint)
                    if inner:
                        region, rop, rkind = inner[0]
                        text += "\ninside it, " + _describe(rop, value_names(region), rkind,
                                                            r in adjoint)
                    return text
    finally:
        WATCH.fn = prev
    return ("the NumPy interpreter computes only finite values for these arguments: the "
            "compiled code differs from it here; please report this with the IR "
            "(fg.dump(f, *args, stage='fused'))")


def _describe(op, names, kind: str, adjoint: bool) -> str:
    part = ("the reverse-mode (adjoint) computation" if adjoint
            else "the forward computation")
    lines = [f"the first op producing {kind} is in {part}:",
             f"    {format_op_header(op, names)}"]
    if op.loc:
        fname, _, line = op.loc.rpartition(":")
        code = linecache.getline(fname, int(line)).strip() if line.isdigit() else ""
        what = "derived from the op at" if adjoint else "at"
        lines.append(f"{what} {op.loc}" + (f":  {code}" if code else ""))
    else:
        lines.append("(the op has no source location: fusegrad made it)")
    return "\n".join(lines)


class debug_nans:
    """``fg.debug_nans(True)`` turns the NaN/inf check of compiled calls on (``False``:
    off) now; as ``with fg.debug_nans():`` only for the block. Starts as
    ``FUSEGRAD_DEBUG_NANS`` says."""

    def __init__(self, enabled: bool = True):
        self.prev = config.DEBUG_NANS
        config.DEBUG_NANS = bool(enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        config.DEBUG_NANS = self.prev


def run_checked(fn: Function, *args) -> tuple:
    """``fn`` run by the NumPy interpreter (``FUSEGRAD_DISABLE_JIT``), checked as a
    compiled call is."""
    from .interpreter import run

    out = run(fn, *args)
    if config.DEBUG_NANS:
        check(fn, args, out)
    return out
