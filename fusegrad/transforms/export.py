"""fusegrad functions as Numba functions: ``.njit(*example)`` and ``fg.cfunc``.

``fg.grad(f).njit(x)`` (likewise on ``value_and_grad``, ``hvp`` and ``jit``
callables) returns a Numba dispatcher that ``@numba.njit`` code calls directly, in
``prange`` loops too. It calls the lean code generator's machine code by address: the
callable is traced at the arguments' shapes and compiled to a C entry
(``codegen.lean.compile_function(host=False)``, which touches no CPython state), and
the dispatcher allocates the results and the entry's scratch and calls it through
``native_call.call_entry``. The example's shapes are compiled at once and called
with no Python at all; other shapes of the same ranks and dtypes are traced and
compiled on their first call, and each call at them looks their entry up in Python
(``numba.objmode``: it takes the GIL for about a microsecond). A program whose ops the
code generator does not all lower (sorts, LAPACK, ...) runs its compiled segments
from Python the same way. Every call allocates its own results and scratch, so
concurrent calls share nothing. The machine code is cached on disk like every
compiled program, by content.

Calling convention: one positional argument per array leaf of the example
arguments (pytrees flattened), 0-d leaves as scalars; the result is the callable's
single result leaf, or a tuple of its result leaves.

``cfunc(f, *example)`` wraps the same function as a ``numba.cfunc`` (C signature in
its docstring).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from ..codegen import lean
from ..codegen.lean import decompositions, lapack, schur
from ..codegen.lean.sizes import ERROR_AT
from ..ir.errors import FusegradError
from ..ir.types import TensorType, dtype_name
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer import trace_pytree
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from .plan import _leaf


class ExportError(FusegradError, TypeError):
    """A function cannot be exported to Numba as asked (e.g. a dtype C cannot pass)."""


_NUMBA_TYPE = {"f64": "float64", "f32": "float32", "i64": "int64", "i32": "int32",
               "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "boolean",
               "c128": "complex128", "c64": "complex64"}
_C_TYPE = {"f64": "double", "f32": "float", "i64": "int64_t", "i32": "int32_t",
           "i16": "int16_t", "i8": "int8_t", "u8": "uint8_t", "bool": "bool",
           "c128": "double _Complex", "c64": "float _Complex"}


#: argument shapes (after the example's) a dispatcher finds without entering Python
SLOTS = 32


def trace_native(fun: Callable, tree, avals, name: str, error=ExportError,
                 what: str = "export"):
    """``fun`` traced at ``avals`` (arranged as ``tree``) for native code, which takes
    arrays only: ``error`` if it closes over a value of an enclosing trace, or turns a
    traced value into a Python value (its result would hold for one value only)."""
    traced = trace_pytree(fun, tree_unflatten(tree, avals), name=name)
    if any(isinstance(v, TensorType) or not hasattr(v, "dtype") for v in traced.free):
        raise error(f"{what}: the function closes over a value of an enclosing trace")
    if traced.guards:
        raise error(f"{what}: the function turns a traced value into a Python value (its "
                    "result would hold for one argument value only)")
    return traced


class _Native:
    """The callable compiled at one set of argument shapes: a C entry's ``address``
    (0 if the program is not lowered whole), its arena's bytes, the result shapes, the
    entry's size table ``sizes`` (int64, written into each arena at byte ``table``:
    ``codegen.lean.sizes``; shapes of one structure share the entry), and for a program
    that is not lowered whole its ``executable``."""

    def __init__(self, address: int, arena: int, shapes: tuple, executable=None,
                 sizes=None, table: int = 0):
        self.address, self.arena, self.shapes = address, arena, shapes
        self.executable = executable
        self.sizes = np.ascontiguousarray(sizes if sizes is not None else [], np.int64)
        self.table = table


class _Export:
    """One callable at one signature (ranks and dtypes), compiled per argument shapes."""

    def __init__(self, fun: Callable, args: tuple):
        leaves, self.tree = tree_flatten(tree_map(_leaf, args))
        self.avals = [TensorType(np.shape(x), np.asarray(x).dtype) for x in leaves]
        self.fun = fun
        self.name = getattr(fun, "__name__", "f")
        self.out_types: tuple = ()
        self.free: tuple = ()
        self._natives: dict[tuple, _Native] = {}
        self._lock = threading.Lock()
        self.example = self.native(tuple(t.shape for t in self.avals))
        # the shapes seen after the example's, for the dispatcher to find without Python:
        # ``SLOTS`` rows of (address, arena bytes, size table address, its offset in the
        # arena, its length, argument extents, result extents), filled once each, the
        # address last (a row with address 0 is empty)
        self.width = 5 + sum(len(t.shape) for t in self.avals) + sum(
            max(len(t.shape), 1) for t in self.out_types)
        self.table = np.zeros(SLOTS * self.width, np.int64)
        self._rows = 0

    def native(self, shapes: tuple) -> _Native:
        """The callable compiled for arguments of ``shapes`` (traced and compiled on
        the first call with them)."""
        hit = self._natives.get(shapes)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._natives.get(shapes)
            if hit is None:
                hit = self._natives[shapes] = self._compile(shapes)
        return hit

    def _compile(self, shapes: tuple) -> _Native:
        from ..runtime.compiled import executable

        avals = [TensorType(s, t.dtype) for s, t in zip(shapes, self.avals)]
        traced = trace_native(self.fun, self.tree, avals, self.name)
        fn = traced.function
        free = tuple(np.ascontiguousarray(v) for v in traced.free)
        if not self.out_types:  # the example's trace (the first one)
            self.out_types = fn.out_types
            self.free = free
        elif not _same_arrays(free, self.free):  # the dispatcher passes the example's
            raise ExportError(f"export: an array {self.name} closes over changes with the "
                              "argument shapes (such as np.eye(x.shape[0])); pass it as an "
                              "argument")
        elif [dtype_name(t.dtype) for t in fn.out_types] != [
                dtype_name(t.dtype) for t in self.out_types] or [
                len(t.shape) for t in fn.out_types] != [len(t.shape) for t in self.out_types]:
            raise ExportError("export: at these shapes the function returns results of "
                              "other ranks or dtypes than at the example's")
        out_shapes = tuple(t.shape for t in fn.out_types)
        fused = fuse(simplify(fn))
        try:
            code = lean.compile_function(fused, host=False)
        except lean.Unsupported:
            return _Native(0, 0, out_shapes, executable(fn, "export"))
        return _Native(code.address, max(code.arena_bytes, 1), out_shapes, None, code.sizes,
                       code.table_offset)

    def lookup(self, dims) -> np.ndarray:
        """``[address, arena bytes, size table address, its offset, its length, *result
        extents]`` for array arguments of extents ``dims`` (in order, for the dispatcher's
        object-mode block: ``_lookup_function``)."""
        dims = [int(d) for d in dims]
        it = iter(dims)
        n = self.native(tuple(tuple(next(it) for _ in t.shape) for t in self.avals))
        outs = tuple(s if s != () else (1,) for s in n.shapes)
        sizes = (n.sizes.ctypes.data, n.table, n.sizes.size)
        if n.address:
            self._remember(dims, n.arena, sizes, outs, n.address)
        elif self.example.address:  # (lowering is decided by ranks and dtypes alone)
            raise ExportError(f"export: {self.name} is not lowered whole at these shapes")
        return np.array([n.address, n.arena, *sizes, *(d for s in outs for d in s)], np.int64)

    def _remember(self, dims: list, arena: int, sizes: tuple, outs: tuple,
                  address: int) -> None:
        """Write a row of ``table`` for argument extents ``dims`` (unless full)."""
        with self._lock:
            if self._rows == SLOTS:
                return
            row = self.table[self._rows * self.width:(self._rows + 1) * self.width]
            row[1:] = [arena, *sizes, *dims, *(d for s in outs for d in s)]
            row[0] = address  # last: a reader sees a row whole or empty
            self._rows += 1

    def run_python(self, *args):
        """The results of a program not lowered whole, for the dispatcher's object-mode
        block (0-d results as 1-element arrays)."""
        shapes = tuple(np.shape(a) for a in args)
        out = self.native(shapes).executable(*args, *self.free)
        return tuple(np.ascontiguousarray(r).reshape(np.shape(r) or (1,)) for r in out)

    def numba_types(self):
        import numba

        return tuple(getattr(numba.types, _NUMBA_TYPE[dtype_name(t.dtype)]) if t.shape == ()
                     else numba.types.Array(getattr(numba.types, _NUMBA_TYPE[dtype_name(
                         t.dtype)]), len(t.shape), "C") for t in self.avals)


def _np_dtype(t: TensorType) -> str:
    """NumPy's name of ``t``'s dtype in the dispatcher's source."""
    return f"np.{_NUMBA_TYPE[dtype_name(t.dtype)].replace('boolean', 'bool_')}"


def _array_type(t: TensorType) -> str:
    """Numba's name of the C-contiguous array type of result ``t`` (0-d: 1 element)."""
    rank = max(len(t.shape), 1)
    return f"{_NUMBA_TYPE[dtype_name(t.dtype)]}[{', '.join([':'] * (rank - 1) + ['::1'])}]"


def _wrapper(ex: _Export) -> list[str]:
    """The dispatcher's source (see the module docstring)."""
    avals, outs, nfree = ex.avals, ex.out_types, len(ex.free)
    params = [f"x{i}" for i in range(len(avals))]
    arrays = [i for i, t in enumerate(avals) if t.shape != ()]
    body = []
    for i, t in enumerate(avals):
        dt = _np_dtype(t)
        if t.shape == ():
            body += [f"    a{i} = np.empty(1, {dt})", f"    a{i}[0] = x{i}"]
        else:
            body.append(f"    a{i} = np.ascontiguousarray(x{i})")
    first = ex.example
    test = " and ".join(f"x{i}.shape == {avals[i].shape!r}" for i in arrays) or "True"
    body.append(f"    if {test}:")
    body += [f"        addr = {first.address}", f"        nbytes = {first.arena}",
             f"        taddr = {first.sizes.ctypes.data}", f"        toff = {first.table}",
             f"        tlen = {first.sizes.size}"]
    body += [f"        s{k} = {s or (1,)!r}" for k, s in enumerate(first.shapes)]
    body.append("    else:")
    body += _table_search(ex, arrays)
    dims = [f"x{i}.shape[{a}]" for i in arrays for a in range(len(avals[i].shape))]
    body += ["        if addr == 0:  # a shape seen first: found (or compiled) in Python",
             f"            dims = np.empty({len(dims)}, np.int64)",
             *(f"            dims[{j}] = {d}" for j, d in enumerate(dims)),
             f"            row = _lookup({_registered(ex)}, dims)"]
    body += [f"            {v} = row[{j}]" for j, v in enumerate(
        ("addr", "nbytes", "taddr", "toff", "tlen"))]
    at = 5
    for k, t in enumerate(outs):
        rank = max(len(t.shape), 1)
        body.append(f"            s{k} = ({''.join(f'row[{at + j}], ' for j in range(rank))})")
        at += rank
    results = [f"o{k}" for k in range(len(outs))]
    lowered = ex.example.address != 0
    body += (["    if True:  # lowered whole, at every shape"] if lowered else [
        "    if addr == 0:  # not lowered whole: its segments run from Python",
        f"        {', '.join(results)}, = _python({', '.join(params)})", "    else:"])
    for k, t in enumerate(outs):
        dt = _np_dtype(t)
        body.append(f"        o{k} = np.empty(s{k}, {dt})")
    held = [f"a{i}" for i in range(len(avals))] + [f"_free{j}" for j in range(nfree)]
    held += [*results, "arena"]
    body += ["        arena = np.empty(nbytes, np.uint8)",
             "        if tlen:  # the entry's size table (codegen.lean.sizes)",
             "            numba.carray(as_pointer(arena.ctypes.data), (1,))[0] = toff",
             "            dst = numba.carray(as_pointer(arena.ctypes.data + toff), (tlen,))",
             "            src = numba.carray(as_pointer(taddr), (tlen,))",
             "            for j in range(tlen):  # a loop: slice assignment costs Numba seconds",
             "                dst[j] = src[j]",
             *call_lines(held, "call_entry(addr", ex.name, "        ")]
    ret = [f"o{k}[0]" if t.shape == () else f"o{k}" for k, t in enumerate(outs)]
    body.append(f"    return {ret[0] if len(ret) == 1 else '(' + ', '.join(ret) + ')'}")
    typed = ", ".join(f"o{k}=\"{_array_type(t)}\"" for k, t in enumerate(outs))
    # an object-mode block in a function of its own (Numba lowers them badly in branches)
    python = [] if lowered else [
        "@numba.njit", f"def _python({', '.join(params)}):",
        f"    with numba.objmode({typed}):",
        f"        {', '.join(results)}, = _export.run_python({', '.join(params)})",
        f"    return {', '.join(results)},", "", ""]
    return [*python, "@numba.njit(error_model=\"numpy\")",
            f"def exported({', '.join(params)}):", *body]


def _same_arrays(xs: tuple, ys: tuple) -> bool:
    return len(xs) == len(ys) and all(
        x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        for x, y in zip(xs, ys))


def call_lines(held: list[str], callee: str, name: str, indent: str,
               hint: str = " (call it outside Numba for the full message)") -> list[str]:
    """Lines calling a C entry on arrays ``held`` (its parameters, results and arena,
    last), raising what made it fail, which it wrote in the arena (``sizes.ERROR_AT``):
    NumPy's ``LinAlgError`` for a linear-algebra op (``lapack.ERRORS``), ``ValueError``
    for a matrix that is not finite (``schur.NOT_FINITE``; ``eig``'s is a
    ``LinAlgError``), else
    ``IndexError``, the message ending in ``hint``; ``callee``: ``call_entry(<address>``
    or ``call_symbol(<name literal>`` (``native_call``). Uses ``as_pointer``."""
    lines = [f"objs = np.zeros({3 * len(held)}, np.int64)",
             f"ptrs = np.empty({len(held)}, np.int64)"]
    lines += [f"objs[{3 * j + 2}] = {h}.ctypes.data" for j, h in enumerate(held)]
    lines += ["base = objs.ctypes.data", f"for j in range({len(held)}):",
              "    ptrs[j] = base + 24 * j",
              f"if {callee}, objs, ptrs, ({', '.join(held)},)) == 0:",
              f"    failed = numba.carray(as_pointer({held[-1]}.ctypes.data + {ERROR_AT}), "
              "(1,))[0]"]
    for code, _, message in (*lapack.ERRORS.values(), *decompositions.ERRORS.values()):
        lines += [f"    if failed == {code}:",
                  f"        raise np.linalg.LinAlgError(\"{message} in @{name}{hint}\")"]
    for error, (code, message) in (("ValueError", schur.NOT_FINITE),
                                   ("np.linalg.LinAlgError", decompositions.EIG_NOT_FINITE)):
        lines += [f"    if failed == {code}:",
                  f"        raise {error}(\"{message} in @{name}{hint}\")"]
    lines.append(f"    raise IndexError(\"an index is out of range in @{name}{hint}\")")
    return [indent + line for line in lines]


#: every export whose dispatcher was made, by index (``_lookup_function`` finds them)
_registry: list = []
_lookup_dispatcher: list = []


def _registered(ex: _Export) -> int:
    """``ex``'s index in ``_registry`` (added once)."""
    with _exports_lock:
        if getattr(ex, "index", None) is None:
            ex.index = len(_registry)
            _registry.append(ex)
        return ex.index


def _lookup_function():
    """One Numba function for every export: ``_lookup(k, dims)`` is export ``k``'s
    ``lookup(dims)``, in an object-mode block (compiled once per process, not per
    export)."""
    if not _lookup_dispatcher:
        import numba

        @numba.njit
        def _lookup(k, dims):
            with numba.objmode(row="int64[::1]"):
                row = _registry[k].lookup(dims)
            return row

        _lookup_dispatcher.append(_lookup)
    return _lookup_dispatcher[0]


def _table_search(ex: _Export, arrays: list[int]) -> list[str]:
    """Lines finding the argument shapes in ``ex.table`` (``addr`` 0 if not there)."""
    dims = [f"x{i}.shape[{a}]" for i in arrays for a in range(len(ex.avals[i].shape))]
    lines = ["        addr = 0", "        nbytes = 0", "        taddr = 0", "        toff = 0",
             "        tlen = 0"]
    lines += [f"        s{k} = ({'0, ' * max(len(t.shape), 1)})"
              for k, t in enumerate(ex.out_types)]
    lines += [f"        tab = numba.carray(as_pointer({ex.table.ctypes.data}), "
              f"({ex.table.size},))",
              f"        for row in range({SLOTS}):",
              f"            at = row * {ex.width}",
              "            if tab[at] == 0:",
              "                break"]
    test = " and ".join(f"tab[at + {5 + j}] == {d}" for j, d in enumerate(dims)) or "True"
    lines += [f"            if {test}:", "                nbytes = tab[at + 1]",
              "                taddr = tab[at + 2]", "                toff = tab[at + 3]",
              "                tlen = tab[at + 4]"]
    pos = 5 + len(dims)
    for k, t in enumerate(ex.out_types):
        rank = max(len(t.shape), 1)
        items = "".join(f"tab[at + {pos + j}], " for j in range(rank))
        lines.append(f"                s{k} = ({items})")
        pos += rank
    lines += ["                addr = tab[at]", "                break"]
    return lines


def _cfunc(avals, out_types) -> list[str]:

    for t in (*avals, *out_types):
        if dtype_name(t.dtype) not in _C_TYPE:
            raise ExportError(f"cfunc: {t} has no C type; use float, integer or bool dtypes")
    nt = {t: _NUMBA_TYPE[dtype_name(t.dtype)] for t in (*avals, *out_types)}
    if all(t.shape == () for t in avals) and len(out_types) == 1 and out_types[0].shape == ():
        sig = f"{nt[out_types[0]]}({', '.join(nt[t] for t in avals)})"
        params = [f"x{i}" for i in range(len(avals))]
        return [f"@numba.cfunc({sig!r}, error_model=\"numpy\")",
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
    # an error (an index out of range, a singular matrix) is status 1: C has no exception
    body += ["    try:", f"        r = exported({', '.join(args)})", "    except Exception:",
             "        return 1"]
    for k, t in enumerate(out_types):
        r = "r" if len(out_types) == 1 else f"r[{k}]"
        if t.shape == ():
            body.append(f"    out{k}[0] = {r}")
        else:
            body += [f"    o{k} = {r}.ravel()", f"    w{k} = numba.carray(out{k}, (o{k}.size,))",
                     f"    for j in range(o{k}.size):", f"        w{k}[j] = o{k}[j]"]
    sig = f"int32({', '.join(sig_args)})"
    return [f"@numba.cfunc({sig!r}, error_model=\"numpy\")",
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


def _load(ex: _Export, cfunc: bool) -> dict:
    """The dispatcher's (and the cfunc's) namespace, its source executed in it."""
    import linecache

    import numba

    from .native_call import as_pointer, call_entry

    lines = _wrapper(ex) + (["", ""] + _cfunc(ex.avals, ex.out_types) if cfunc else [])
    source = "\n".join(lines) + "\n"
    name = f"<fusegrad export of {ex.name} {id(ex):x}{' cfunc' if cfunc else ''}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    namespace = {"np": np, "numba": numba, "call_entry": call_entry, "_export": ex,
                 "as_pointer": as_pointer, "_lookup": _lookup_function(),
                 **{f"_free{j}": v for j, v in enumerate(ex.free)}}
    exec(compile(source, name, "exec"), namespace)  # our own generated text
    namespace["source"] = source
    return namespace


def export_njit(fun: Callable, *example_args):
    """A Numba dispatcher computing ``fun`` (a fusegrad callable or any traceable
    function) for arguments of the ranks and dtypes of ``example_args``, to call from
    ``@numba.njit`` code. See the module docstring for the calling convention."""
    ex = _export(fun, example_args)
    disp = _load(ex, cfunc=False)["exported"]
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
    return _load(ex, cfunc=True)["c_entry"]
