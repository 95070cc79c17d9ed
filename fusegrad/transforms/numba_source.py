"""Numba source of a fusegrad callable, for ``fusegrad eject``: the Numba module writer's
generated module (``codegen.module``) with one more function, ``exported``, that builds
the sizes table ``d`` from its arguments' shapes (``transforms.export_sizes``) and
calls ``entry`` (and ``entry_exact`` when a trig argument was huge). Its text is plain
Python, so ``eject`` copies it, and what it calls, into a standalone module that runs
for any extents of the example's ranks (unless the function's structure depends on
its sizes: then for the example's shapes only).

``.njit`` and ``.cfunc`` (``transforms.export``) call the lean code generator's machine
code instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .. import config
from ..codegen import compile as cg_compile
from ..ir.types import TensorType, dtype_name
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import trace_pytree
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from .export import _NUMBA_TYPE, ExportError
from .plan import _leaf

if TYPE_CHECKING:  # annotations only: export_sizes (and its fractions) load with an export
    from .export_sizes import SizeRule


class _SourceExport:
    """The traced function of one callable at one signature, and its loaded module."""

    def __init__(self, fun: Callable, args: tuple):
        from .export_sizes import fit

        leaves, self.tree = tree_flatten(tree_map(_leaf, args))
        self.avals = [TensorType(np.shape(x), np.asarray(x).dtype) for x in leaves]
        self.fun = fun
        self.free: tuple = ()
        self.out_types: tuple = ()
        source, self.rule = fit(self._build, [t.shape for t in self.avals])
        self.source = source
        self.rare = "def entry_exact" in source

    def _build(self, shapes):
        from ..codegen.module import generate

        avals = [TensorType(s, t.dtype) for s, t in zip(shapes, self.avals)]
        traced = trace_pytree(self.fun, tree_unflatten(self.tree, avals),
                              name=getattr(self.fun, "__name__", "f"))
        fn = traced.function
        if any(isinstance(v, TensorType) or not hasattr(v, "dtype") for v in traced.free):
            raise ExportError("export: the function closes over a value of an enclosing trace")
        if not self.out_types:  # the example's trace (the first one)
            self.free = tuple(np.asarray(v) for v in traced.free)
            self.out_types = fn.out_types
        return generate(fuse(simplify(fn)))

    def module_text(self) -> str:
        lines = [self.source, "", *_free_arrays(self.free), ""]
        lines += _wrapper(self.avals, len(self.free), self.rule, len(self.out_types), self.rare)
        return "\n".join(lines) + "\n"

    def numba_types(self):
        import numba

        return tuple(getattr(numba.types, _NUMBA_TYPE[dtype_name(t.dtype)]) if t.shape == ()
                     else numba.types.Array(getattr(numba.types, _NUMBA_TYPE[dtype_name(
                         t.dtype)]), len(t.shape), "C") for t in self.avals)


def _free_arrays(free) -> list[str]:
    """Module-level constants for arrays the function closes over (Numba freezes them)."""
    out = []
    for i, v in enumerate(free):
        v = np.ascontiguousarray(v)
        out.append(f"_free{i} = np.frombuffer(bytes.fromhex({v.tobytes().hex()!r}), "
                   f"np.dtype({v.dtype.str!r})).reshape({tuple(v.shape)!r}).copy()")
    return out


def _wrapper(avals, nfree: int, rule: SizeRule, nres: int, rare: bool) -> list[str]:
    params = [f"x{i}" for i in range(len(avals))]
    body = []
    for j, (a, ax) in enumerate(rule.classes):
        body.append(f"    c{j} = x{a}.shape[{ax}]")
    for a, ax, j in rule.tied:
        body.append(f"    if x{a}.shape[{ax}] != c{j}:")
        body.append(f"        raise ValueError(\"argument {a}: axis {ax} must equal the "
                    f"extent it had equal in the example\")")
    for a, ax, n in rule.fixed:
        body.append(f"    if x{a}.shape[{ax}] != {n}:")
        why = "as in the example" if rule.generic else "(exported for the example's shapes only)"
        body.append(f"        raise ValueError(\"argument {a}: axis {ax} must be {n} {why}\")")
    items = [f"np.int64({rule.expression(k, lambda j: f'c{j}')})"
             for k in range(len(rule.entries))]
    body.append(f"    d = ({', '.join(items)}{',' if len(items) == 1 else ''})")
    call_args = ", ".join(["d", *params, *(f"_free{i}" for i in range(nfree))])

    def result(r):
        parts = [f"{r}[{i}]" for i in range(nres)]
        return parts[0] if nres == 1 else "(" + ", ".join(parts) + ")"

    body.append(f"    r = entry({call_args})")
    if rare:
        body += ["    if r[-1]:", f"        e = entry_exact({call_args})",
                 f"        return {result('e')}"]
    body.append(f"    return {result('r')}")
    return ["@numba.njit(error_model=\"numpy\", cache=True)",
            f"def exported({', '.join(params)}):", *body]


@contextlib.contextmanager
def opt_level(level: int):
    """Numba compiles at LLVM optimisation ``level`` inside the block (Numba's level is
    process-wide, so the block holds Numba's compiler lock)."""
    from numba.core import config as numba_config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        old = numba_config.OPT
        numba_config.OPT = type(old)(level)
        try:
            yield
        finally:
            numba_config.OPT = old


def numba_dispatcher(fun: Callable, *example_args):
    """``exported``: a Numba dispatcher of ``fun``'s generated module, compiled for the
    ranks and dtypes of ``example_args`` (what ``eject`` copies)."""
    ex = _SourceExport(fun, example_args)
    source = ex.module_text()
    with opt_level(config.OPT):
        mod = cg_compile.load(source)
    disp = mod.exported
    with cg_compile.key_lock(cg_compile.module_key(source)), opt_level(config.OPT):
        disp.compile(ex.numba_types())
    return disp
