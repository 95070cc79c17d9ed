"""fusegrad's math library (``codegen.mathlib``) as LLVM bitcode, built once per machine.

The library's functions are written for Numba; here each (function, dtype, variant)
is compiled by Numba once, the first time a kernel calls it, and the LLVM IR of its
C-ABI wrapper (``double f(double)``, marked ``alwaysinline``) with everything it
calls is kept as ``mathlib-<salt>-<name>-<dtype>-<variant>.bc`` (the symbol's name,
then the bitcode) beside Numba's own cache of the library, once per machine: a
program using ``exp`` waits for ``exp`` alone, and later processes read the bitcode
and never import Numba. A kernel that calls the library gets a copy linked in
before LLVM optimises it, so the functions are inlined into its loop and
vectorised with it; the copy is made internal, so kernels never share (or clash
on) its symbols.
"""

from __future__ import annotations

import contextlib
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
_state: dict[str, str | None] = {}  # key -> symbol
_bitcode: dict[str, bytes] = {}  # symbol -> bitcode of its module
_TARGET_ATTRS = re.compile(r'"target-(?:cpu|features)"="[^"]*"')
_NOINLINE = re.compile(r"^(attributes #\d+ = \{[^}\n]*)\bnoinline\b", re.MULTILINE)


def _path(key: str) -> str:
    folder = engine.machine_folder()
    return os.path.join(folder, f"mathlib-{cg_compile.salt()[:24]}-{key.replace('/', '-')}.bc")


def _key(name: str, dtype, variant: str) -> str:
    return f"{name}/{np.dtype(dtype).name}/{variant}"


def _build(name: str, dtype, variant: str) -> tuple[str, bytes] | None:
    """Compile one function with Numba: its C symbol and the bitcode of its module."""
    import numba

    from .. import mathlib as ml

    mf = ml.FUNCTIONS.get((name, np.dtype(dtype)))
    disp = None if mf is None else getattr(mf, variant)
    if disp is None:
        return None
    scalar = numba.float64 if np.dtype(dtype) == np.float64 else numba.float32
    sig = (scalar,) * mf.nargs
    disp.compile(sig)
    cres = disp.overloads[sig]
    # without per-function CPU attributes (the target machine supplies them: LLVM inlines
    # only into callers whose attributes include the callee's), nor the ``noinline``
    # Numba puts on its wrappers' calls
    text = _TARGET_ATTRS.sub("", str(cres.library._get_module_for_linking()))
    mod = engine._llvm().parse_assembly(_NOINLINE.sub(r"\1nounwind", text))
    for fn in mod.functions:  # everything inlines into the calling loop (not the wrappers
        # for calls from Python, which no kernel calls)
        attrs = b" ".join(fn.attributes)
        if not (fn.is_declaration or fn.name.startswith("_ZN7cpython")
                or b"inline" in attrs):
            fn.add_function_attribute("alwaysinline")
    return "cfunc." + cres.fndesc.llvm_func_name, mod.as_bitcode()


def _function(name: str, dtype, variant: str) -> str | None:
    """The symbol of one library function, its bitcode read from the cache or built (and
    kept in memory for ``link_into``)."""
    key = _key(name, dtype, variant)
    if key in _state:
        return _state[key]
    path = _path(key)
    try:
        with open(path, "rb") as f:
            head, bitcode = f.read().split(b"\n", 1)
        sym = head.decode()
        engine._llvm().parse_bitcode(bitcode)  # a damaged file is built again
    except (OSError, ValueError, RuntimeError):
        built = _build(name, dtype, variant)
        if built is None:
            _state[key] = None
            return None
        sym, bitcode = built
        with contextlib.suppress(OSError):
            cg_compile.write_atomic(path, sym.encode() + b"\n" + bitcode)
    _bitcode[sym] = bitcode
    _state[key] = sym
    return sym


def kept_symbol(name: str, dtype, variant: str = "fast") -> str | None:
    """The symbol the kept bitcode of ``name`` at ``dtype`` names (its file's first line,
    the bitcode neither read nor checked), or None."""
    if name not in OPS or np.dtype(dtype) not in (np.float64, np.float32):
        return None
    key = _key(name, dtype, variant)
    if key in _state:
        return _state[key]
    try:
        with open(_path(key), "rb") as f:
            head = f.readline()
    except OSError:
        return None
    return head[:-1].decode(errors="replace") if head.startswith(b"cfunc.") else None


def symbol(name: str, dtype, variant: str = "fast") -> str | None:
    """The C symbol of the math library's ``name`` at ``dtype`` (None: not in it); the
    function is compiled (once per machine) the first time a kernel calls it."""
    if name not in OPS or np.dtype(dtype) not in (np.float64, np.float32):
        return None
    return _function(name, dtype, variant)


def link_into(mod) -> None:
    """Link private copies of the library functions ``mod`` (a parsed kernel module)
    calls into it."""
    llvm = engine._llvm()
    own = {fn.name for fn in mod.functions if not fn.is_declaration}
    called = [fn.name for fn in mod.functions
              if fn.is_declaration and fn.name.startswith("cfunc.")]
    for sym in called:
        lib = llvm.parse_bitcode(_bitcode[sym])
        for fn in lib.functions:  # linked only where called
            if not fn.is_declaration:
                fn.linkage = "linkonce_odr"
        mod.link_in(lib)
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in own:
            fn.linkage = "internal"
    for g in mod.global_variables:
        if not (g.is_declaration or g.name.startswith("llvm.")):  # not LLVM's own lists
            g.linkage = "internal"
