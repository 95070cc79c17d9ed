"""fusegrad's math library (``codegen.mathlib``) as LLVM bitcode, built once per machine.

The library's functions are written for Numba; here each (function, dtype, variant)
is compiled by Numba once, and the LLVM IR of its C-ABI wrapper
(``double f(double)``, marked ``alwaysinline``) with everything it calls is linked
into one module, kept as ``<cache>/lean/mathlib-<salt>.bc`` with a table of symbol
names. Later processes read the bitcode and never import Numba. A kernel that
calls the library gets a copy linked in before LLVM optimises it, so the functions
are inlined into its loop and vectorised with it; the copy is made internal, so
kernels never share (or clash on) its symbols.
"""

from __future__ import annotations

import contextlib
import json
import os
import re

import numpy as np

from .. import compile as cg_compile
from . import engine

#: variants: ``fast`` (vectorisable), ``full`` (right for every input), ``rare``
VARIANTS = ("fast", "full", "rare")
#: the library's functions by IR op name (``mathlib.UNARY`` and ``BINARY`` but the pair
#: ``sincos``), and those whose fast variant misses rare inputs (``mathlib.RARE``)
OPS = frozenset({
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "tanh",
    "logistic", "softplus", "erf", "sqrt", "cbrt", "arctan", "arcsin", "arccos", "sinh",
    "cosh", "arcsinh", "arccosh", "arctanh", "pow", "atan2"})
RARE_OPS = frozenset({"sin", "cos", "tan"})
_state: dict[str, object] = {}
_TARGET_ATTRS = re.compile(r'"target-(?:cpu|features)"="[^"]*"')
_NOINLINE = re.compile(r"^(attributes #\d+ = \{[^}\n]*)\bnoinline\b", re.MULTILINE)


def _paths() -> tuple[str, str]:
    folder = os.path.join(cg_compile._directory(), "lean")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    stem = os.path.join(folder, f"mathlib-{cg_compile.salt()[:24]}")
    return stem + ".bc", stem + ".json"


def _key(name: str, dtype, variant: str) -> str:
    return f"{name}/{np.dtype(dtype).name}/{variant}"


def _build() -> tuple[bytes, dict]:
    """Compile every function with Numba and link their modules into one bitcode."""
    import numba

    from .. import mathlib as ml

    llvm = engine._llvm()
    lib = None
    table = {}
    done = set()
    for (name, dtype), mf in sorted(ml.FUNCTIONS.items(), key=lambda kv: (kv[0][0],
                                                                          str(kv[0][1]))):
        scalar = numba.float64 if dtype == np.float64 else numba.float32
        sig = (scalar,) * mf.nargs
        for variant in VARIANTS:
            disp = getattr(mf, variant)
            if disp is None:
                continue
            disp.compile(sig)
            cres = disp.overloads[sig]
            symbol = "cfunc." + cres.fndesc.llvm_func_name
            table[_key(name, dtype, variant)] = [symbol, mf.nout]
            if symbol in done:
                continue
            done.add(symbol)
            # without per-function CPU attributes (the target machine supplies them): LLVM
            # inlines only into callers whose attributes include the callee's
            # nor the ``noinline`` Numba puts on its wrappers' calls
            text = _TARGET_ATTRS.sub("", str(cres.library._get_module_for_linking()))
            text = _NOINLINE.sub(r"\1nounwind", text)
            mod = llvm.parse_assembly(text)
            for fn in mod.functions:  # kept by the linker even when nothing calls them yet
                if not fn.is_declaration:
                    fn.linkage = "weak_odr"
            if lib is None:
                lib = mod
            else:
                lib.link_in(mod)
    for fn in lib.functions:  # everything inlines into the calling loop (not the wrappers
        # for calls from Python, which no kernel calls)
        attrs = b" ".join(fn.attributes)
        if not (fn.is_declaration or fn.name.startswith("_ZN7cpython")
                or b"inline" in attrs):
            fn.add_function_attribute("alwaysinline")
    return lib.as_bitcode(), table


def library():
    """(bitcode, table: key -> [symbol, number of results]), built on first use."""
    lib = _state.get("lib")
    if lib is None:
        bc_path, table_path = _paths()
        try:
            with open(bc_path, "rb") as f:
                bitcode = f.read()
            with open(table_path) as f:
                table = json.load(f)
        except (OSError, ValueError):
            bitcode, table = _build()
            with contextlib.suppress(OSError):
                cg_compile.write_atomic(bc_path, bitcode)
                cg_compile.write_atomic(table_path, json.dumps(table))
        lib = _state["lib"] = (bitcode, table)
    return lib


def symbol(name: str, dtype, variant: str = "fast") -> str | None:
    """The C symbol of the math library's ``name`` at ``dtype`` (None: not in it)."""
    if name not in OPS or np.dtype(dtype) not in (np.float64, np.float32):
        return None
    entry = library()[1].get(_key(name, dtype, variant))
    return None if entry is None else entry[0]


def link_into(mod) -> None:
    """Link a private copy of the library into ``mod`` (a parsed kernel module)."""
    llvm = engine._llvm()
    own = {fn.name for fn in mod.functions if not fn.is_declaration}
    lib = llvm.parse_bitcode(library()[0])
    for fn in lib.functions:  # linked only where called
        if not fn.is_declaration:
            fn.linkage = "linkonce_odr"
    mod.link_in(lib)
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in own:
            fn.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration:
            g.linkage = "internal"
