"""fusegrad functions as Numba functions: ``.njit(*example)`` and ``fg.cfunc``.

``fg.grad(f).njit(x)`` (likewise on ``value_and_grad``, ``hvp`` and ``jit``
callables) traces the callable at the example's ranks and dtypes and returns a Numba
dispatcher that ``@numba.njit`` code calls directly, in ``prange`` loops too: no
Python in the call path. Its module is the generated module of the traced
Function plus one function, ``exported``, that builds the sizes table ``d`` from its
arguments' shapes (``transforms.export_sizes``) and calls ``entry`` (and
``entry_exact`` when a trig argument was huge). Every call allocates its own outputs
and scratch, so concurrent calls share nothing. The module is cached on disk like
every generated module (``codegen.compile``), and ``exported`` is compiled for the
example's types at once, under the module's lock.

Calling convention: one positional argument per array leaf of the example
arguments (pytrees flattened), 0-d leaves as scalars; the result is the callable's
single result leaf, or a tuple of its result leaves.

``cfunc(f, *example)`` wraps the same function as a ``numba.cfunc`` (C signature in
its docstring).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .. import config
from ..codegen import compile as cg_compile
from ..ir.errors import FusegradError
from ..ir.types import TensorType, dtype_name
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import trace_pytree
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from .plan import _leaf

if TYPE_CHECKING:  # annotations only: export_sizes (and its fractions) load with an export
    from .export_sizes import SizeRule


class ExportError(FusegradError, TypeError):
    """A function cannot be exported to Numba as asked (e.g. a dtype C cannot pass)."""


_NUMBA_TYPE = {"f64": "float64", "f32": "float32", "i64": "int64", "i32": "int32",
               "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "boolean"}
_C_TYPE = {"f64": "double", "f32": "float", "i64": "int64_t", "i32": "int32_t",
           "i16": "int16_t", "i8": "int8_t", "u8": "uint8_t", "bool": "bool"}



class _Export:
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

    def module_text(self, cfunc: bool) -> str:
        lines = [self.source, "", *_free_arrays(self.free), ""]
        lines += _wrapper(self.avals, len(self.free), self.rule, len(self.out_types), self.rare)
        if cfunc:
            lines += ["", ""] + _cfunc(self.avals, self.out_types)
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


def _cfunc(avals, out_types) -> list[str]:
    for t in (*avals, *out_types):
        if dtype_name(t.dtype) not in _C_TYPE:
            raise ExportError(f"cfunc: {t} has no C type; use float, integer or bool dtypes")
    nt = {t: _NUMBA_TYPE[dtype_name(t.dtype)] for t in (*avals, *out_types)}
    if all(t.shape == () for t in avals) and len(out_types) == 1 and out_types[0].shape == ():
        sig = f"{nt[out_types[0]]}({', '.join(nt[t] for t in avals)})"
        params = [f"x{i}" for i in range(len(avals))]
        return [f"@numba.cfunc({sig!r}, error_model=\"numpy\", cache=True)",
                f"def c_entry({', '.join(params)}):", f"    return exported({', '.join(params)})"]
    sig_args, params, body, args = [], [], [], []
    for i, t in enumerate(avals):
        if t.shape == ():
            sig_args.append(nt[t])
            params.append(f"x{i}")
            args.append(f"x{i}")
            continue
        sig_args += [f"CPointer({nt[t]})"] + ["int64"] * len(t.shape)
        dims = [f"x{i}_n{k}" for k in range(len(t.shape))]
        params += [f"x{i}_p", *dims]
        body.append(f"    x{i} = numba.carray(x{i}_p, ({', '.join(dims)},))")
        args.append(f"x{i}")
    outs = [f"out{k}" for k in range(len(out_types))]
    sig_args += [f"CPointer({nt[t]})" for t in out_types]
    params += outs
    body.append(f"    r = exported({', '.join(args)})")
    for k, t in enumerate(out_types):
        r = "r" if len(out_types) == 1 else f"r[{k}]"
        if t.shape == ():
            body.append(f"    out{k}[0] = {r}")
        else:
            body += [f"    o{k} = {r}.ravel()", f"    w{k} = numba.carray(out{k}, (o{k}.size,))",
                     f"    w{k}[:] = o{k}"]
    sig = f"int32({', '.join(sig_args)})"
    return [f"@numba.cfunc({sig!r}, error_model=\"numpy\", cache=True)",
            f"def c_entry({', '.join(params)}):", *body, "    return 0"]


_exports: dict = {}
_exports_lock = threading.Lock()


def _export(fun: Callable, args: tuple) -> _Export:
    leaves, td = tree_flatten(tree_map(_leaf, args))
    key = (id(fun), td, tuple((np.shape(x), np.asarray(x).dtype.str) for x in leaves))
    with _exports_lock:
        hit = _exports.get(key)
        if hit is not None and hit[0] is fun:
            return hit[1]
    ex = _Export(fun, args)
    with _exports_lock:
        _exports[key] = (fun, ex)
    return ex


def _load(ex: _Export, cfunc: bool):
    from ..runtime.compiled import opt_level

    source = ex.module_text(cfunc)
    with opt_level(config.OPT):  # a cfunc compiles while its module is executed
        mod = cg_compile.load(source)
    return mod, source


def export_njit(fun: Callable, *example_args):
    """A Numba dispatcher computing ``fun`` (a fusegrad callable or any traceable
    function) for arguments of the ranks and dtypes of ``example_args``, to call from
    ``@numba.njit`` code. See the module docstring for the calling convention."""
    ex = _export(fun, example_args)
    mod, source = _load(ex, cfunc=False)
    disp = mod.exported
    from ..runtime.compiled import opt_level

    with cg_compile.key_lock(cg_compile.module_key(source)), opt_level(config.OPT):
        disp.compile(ex.numba_types())
    return disp


def cfunc(fun: Callable, *example_args):
    """``fun`` at the ranks and dtypes of ``example_args`` as a ``numba.cfunc`` (use its
    ``.address``, ``.ctypes`` or ``scipy.LowLevelCallable(c.ctypes)``).

    C signature: scalars only in and one scalar out: ``T f(T a0, ...)``; otherwise
    ``int32_t f(...)`` returning 0, taking per array argument ``const T* data`` and one
    ``int64_t`` per axis, per scalar argument its value, then per result a ``T* out``
    with room for it.
    """
    ex = _export(fun, example_args)
    return _load(ex, cfunc=True)[0].c_entry



def attach(obj) -> None:
    """Give ``obj`` (a fusegrad callable) its ``.njit(*example)`` and ``.cfunc(*example)``."""
    obj.njit = lambda *example_args: export_njit(obj, *example_args)
    obj.cfunc = lambda *example_args: cfunc(obj, *example_args)
