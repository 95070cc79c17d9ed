"""``fusegrad eject``: a standalone module of ``@numba.njit`` functions that runs without
fusegrad.

Each function is the lean code generator's C entry of a fusegrad callable
(``codegen.lean.standalone``: the same kernels and driver code a compiled call runs,
built so that one text serves every size), written into the module as LLVM IR with
what it calls from the math library linked in. At import the module compiles that IR
with llvmlite for the CPU it runs on (``codegen.lean.loader``, whose source is copied
in) and defines one Numba function per callable that computes the entry's size table
from its arguments' shapes (``export_sizes.fit``: the table is fitted over traces at
several sizes, each arena place by its byte count, the places then laid out as the
code generator lays them out), allocates the results and the arena, and calls the
entry by name (``native_call.call_symbol``, also copied in: the function holds no
address, so Numba caches it). Machine code is kept beside the module's file
(``__pycache__``, per module, CPU and llvmlite version), so a second import compiles
nothing. The module imports NumPy, Numba, llvmlite and the standard library; SciPy's
BLAS or special functions when the program calls them.

A callable whose structure depends on its sizes (the gradient of a real FFT, whose
Nyquist term depends on the length's parity), or whose sizes the rule cannot fit (the
bytes of an ``(N, C, H, W)`` array are of degree 4 in the extents; a convolution's
output extents floors of several), is ejected for the example's shapes only; one
with an op the lean generator does not lower (``sqrtm``) cannot be ejected
(``EjectError`` names it): ``.njit``/``.cfunc`` run those from Numba code.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

import numpy as np

from ..codegen.lean import loader
from ..codegen.lean.sizes import ALIGN, HEADER, STAGGER
from ..ir.errors import FusegradError
from ..ir.types import TensorType
from ..passes.fusion import fuse
from ..passes.simplify import simplify
from ..tracer.pytree import tree_flatten, tree_map
from . import native_call
from .export import _np_dtype, call_lines, trace_native
from .plan import _leaf


class EjectError(FusegradError, RuntimeError):
    """A function cannot be written into a standalone module."""


class _Program:
    """One callable at the example's ranks and dtypes: its standalone IR and the rule
    giving its entry's size table (and its results' extents) from argument shapes."""

    def __init__(self, name: str, fun: Callable, examples: tuple):
        from .export_sizes import fit

        leaves, self.tree = tree_flatten(tree_map(_leaf, examples))
        self.avals = [TensorType(np.shape(x), np.asarray(x).dtype) for x in leaves]
        self.name, self.fun = name, fun
        self.code = None
        _, self.rule = fit(self._build, [t.shape for t in self.avals])

    def _build(self, shapes):
        from ..codegen.lean import Unsupported
        from ..codegen.lean.standalone import standalone

        avals = [TensorType(s, t.dtype) for s, t in zip(shapes, self.avals)]
        traced = trace_native(self.fun, self.tree, avals, self.name, EjectError, "eject")
        fn = traced.function
        try:
            code = standalone(fuse(simplify(fn), tile=False))
        except Unsupported as e:
            raise EjectError(f"eject: {self.name} uses {e}, which compiled code runs with "
                             "NumPy, not natively; call it from Numba with "
                             "`.njit(*example)` instead") from None
        if self.code is None:  # the example's (the first trace)
            self.code, self.out_types = code, fn.out_types
            self.free = tuple(np.ascontiguousarray(v) for v in traced.free)
        # the arrays it closes over are the example's in the written module: one that
        # changes with the shapes (``np.eye(x.shape[0])``) makes it the example's only
        free = tuple((v.shape, v.dtype.str, np.ascontiguousarray(v).tobytes())
                     for v in map(np.asarray, traced.free))
        structure = (code.entry, tuple(n for n, _, _ in code.modules), code.places,
                     tuple(t.dtype.str for t in fn.out_types), free)
        return structure, [*code.sizes, *(n for t in fn.out_types for n in t.shape)]

    def lines(self) -> list[str]:
        """The module's lines for this function: its constants and its Numba function."""
        name, code, rule = self.name, self.code, self.rule
        params = [f"x{i}" for i in range(len(self.avals))]
        out = [f"{name}_free{j} = {_array_literal(v)}" for j, v in enumerate(self.free)]
        out.append(f"{name}_places = np.array({list(code.places)!r}, np.int64)")
        out += ["", "", "@numba.njit(error_model=\"numpy\", cache=_CACHE is not None)",
                f"def {name}({', '.join(params)}):"]
        body = [f"c{j} = x{a}.shape[{ax}]" for j, (a, ax) in enumerate(rule.classes)]
        for a, ax, j in rule.tied:
            body += [f"if x{a}.shape[{ax}] != c{j}:",
                     f"    raise ValueError(\"{name}: argument {a}'s axis {ax} must equal the "
                     "extent it had equal in the example\")"]
        for a, ax, n in rule.fixed:
            why = "as in the example" if rule.generic else "(ejected for these shapes only)"
            body += [f"if x{a}.shape[{ax}] != {n}:",
                     f"    raise ValueError(\"{name}: argument {a}'s axis {ax} must be {n} "
                     f"{why}\")"]
        ntab = len(code.sizes)
        body.append(f"v = np.empty({max(len(rule.entries), 1)}, np.int64)")
        body += [f"v[{k}] = {rule.expression(k, lambda j: f'c{j}')}"
                 for k in range(len(rule.entries))]
        # the arena: a header, the places (each aligned, staggered), then the size table
        a = ALIGN
        body += [f"off = {HEADER}", f"for s in {name}_places:", "    n = max(v[s], 1)",
                 "    v[s] = off", f"    off += (n + {a - 1}) // {a} * {a} + {STAGGER}",
                 f"toff = (off + {a - 1}) // {a} * {a}",
                 f"arena = np.empty(toff + {8 * max(ntab, 1)}, np.uint8)",
                 "numba.carray(as_pointer(arena.ctypes.data), (1,))[0] = toff"]
        if ntab:  # a loop: a slice assignment costs Numba seconds to compile
            body += [f"tab = numba.carray(as_pointer(arena.ctypes.data + toff), ({ntab},))",
                     f"for j in range({ntab}):", "    tab[j] = v[j]"]
        for i, t in enumerate(self.avals):
            body += ([f"a{i} = np.empty(1, {_np_dtype(t)})", f"a{i}[0] = x{i}"]
                     if t.shape == () else [f"a{i} = np.ascontiguousarray(x{i})"])
        at = ntab
        for k, t in enumerate(self.out_types):
            dims = [f"v[{at + j}]" for j in range(len(t.shape))] or ["1"]
            at += len(t.shape)
            body.append(f"o{k} = np.empty(({', '.join(dims)},), {_np_dtype(t)})")
        held = [f"a{i}" for i in range(len(self.avals))]
        held += [f"{name}_free{j}" for j in range(len(self.free))]
        held += [f"o{k}" for k in range(len(self.out_types))] + ["arena"]
        body += call_lines(held, f"call_symbol({code.entry!r}", name, "", hint="")
        ret = [f"o{k}[0]" if t.shape == () else f"o{k}" for k, t in enumerate(self.out_types)]
        body.append(f"return {ret[0] if len(ret) == 1 else '(' + ', '.join(ret) + ')'}")
        return out + ["    " + line for line in body]


def _array_literal(v: np.ndarray) -> str:
    return (f"np.frombuffer(bytes.fromhex({v.tobytes().hex()!r}), "
            f"np.dtype({v.dtype.str!r})).reshape({tuple(v.shape)!r}).copy()")


def _ir_literal(text: str) -> str:
    """``text`` as a Python string literal, raw and triple-quoted where it can be."""
    if "'''" not in text and not text.endswith("\\"):
        return "r'''" + text + "'''"
    return repr(text)


def _source_of(module) -> str:
    """A module's source without its docstring and ``__future__`` import."""
    text = inspect.getsource(module)
    text = re.sub(r'\A""".*?"""\n', "", text, flags=re.DOTALL)
    return text.replace("from __future__ import annotations\n", "").strip("\n")


def eject(functions: dict[str, tuple[Callable, tuple]], doc: str) -> str:
    """The text of a standalone module defining ``functions`` (name -> (fusegrad
    callable or traceable function, example arguments)); ``doc`` is its docstring."""
    programs = [_Program(name, fun, examples) for name, (fun, examples) in functions.items()]
    modules: dict[str, tuple[str, str]] = {}
    symbols: set[str] = set()
    for p in programs:
        for name, kind, text in p.code.modules:
            modules.setdefault(name, (kind, text))
        symbols.update(p.code.symbols)
    parts = [f'"""{doc}"""', "import numba", "import numpy as np", "",
             _source_of(loader), "", _source_of(native_call), "", "",
             "#: the program's LLVM IR: (name, kind, text), in the order to load them",
             "_MODULES = ("]
    parts += [f"    ({name!r}, {kind!r}, {_ir_literal(text)}),"
              for name, (kind, text) in modules.items()]
    parts += [")", "# machine code is kept beside this file (none for a module without one)",
              "_CACHE = (os.path.join(os.path.dirname(os.path.abspath(__file__)), "
              "\"__pycache__\")", "          if \"__file__\" in globals() else None)",
              f"_ENGINE = load(_MODULES, {sorted(symbols)!r}, _CACHE)"]
    for p in programs:
        parts += ["", "", *p.lines()]
    return "\n".join(parts) + "\n"
