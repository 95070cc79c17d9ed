"""Inspection: make_ir, stages and dump (the IR after each stage of the pipeline)."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence

from ..ir import Function
from ..ir.printer import print_function
from ..passes.autodiff import vjp as _vjp_pass
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import trace_pytree
from ..tracer.pytree import tree_map
from .jit_api import _split_static
from .plan import _leaf


def make_ir(f: Callable, static_argnums: int | Sequence[int] = ()):
    """``make_ir(f)(*args)`` returns the traced ``Function`` (print it to read the IR)."""

    @functools.wraps(f)
    def ir_of(*args):
        fun, dyn = _split_static(f, args, static_argnums, "make_ir")
        return trace_pytree(fun, dyn, name=getattr(f, "__name__", "f")).function

    return ir_of


def stages(f: Callable, *args, grad: bool = True) -> list[tuple[str, float, object]]:
    """``(stage, seconds, result)`` after each stage of the pipeline, in order.

    ``traced`` (the user's function), ``grad`` (reverse mode w.r.t. every float
    argument, if ``grad``), ``simplified``, ``fused`` (loop kernels as ``fused``
    ops) and ``source`` (the generated LLVM IR, annotated, as text).
    """
    args = tree_map(_leaf, args)
    out: list[tuple[str, float, object]] = []

    def stage(name, fn, *a):
        t0 = time.perf_counter()
        res = fn(*a)
        out.append((name, time.perf_counter() - t0, res))
        return res

    traced = trace_pytree(f, args, name=getattr(f, "__name__", "f"))
    cur = stage("traced", lambda: traced.function)
    if grad:
        n_explicit = len(cur.params) - len(traced.free)
        wrt = [i for i, p in enumerate(cur.params[:n_explicit]) if p.type.is_inexact]
        cur = stage("grad", _vjp_pass, cur, wrt, None, f"{cur.name}_grad")
    cur = stage("simplified", simplify, cur)
    cur = stage("fused", fuse, cur)
    stage("source", _source, cur)
    return out


STAGES = ("traced", "grad", "simplified", "fused", "source")


def dump(f: Callable, *args, stage: str = "all", grad: bool = False, file=None,
         locs: bool = False) -> None:
    """Print ``f``'s IR for ``args`` after ``stage`` (one of ``STAGES``, or ``all``).

    ``grad=True`` (implied by ``stage="grad"``) differentiates first; ``locs=True``
    ends each op with its source location (adjoint ops: the primal op's).
    """
    if stage not in (*STAGES, "all"):
        raise ValueError(f"dump: unknown stage {stage!r}; choose one of {', '.join(STAGES)}, all")
    file = file or sys.stdout
    for name, secs, fn in stages(f, *args, grad=grad or stage == "grad"):
        if stage in ("all", name):
            print(f"// ---- stage: {name} ({secs * 1e3:.2f} ms) ----", file=file)
            print(print_function(fn, locs=True) if locs and isinstance(fn, Function) else fn,
                  file=file)


def _source(fn: Function) -> str:
    """The generated code: the LLVM IR of the lean generator's entries and kernels (the
    code generator loads here)."""
    from ..runtime import lean_exec

    return lean_exec.source(fn)
