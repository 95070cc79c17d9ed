"""How a kernel calls the math library: inlined into its loop, or through shared vector
variants compiled once per machine.

Kernels are emitted calling each library function by a readable name,
``fgm.<function>.<dtype>.<variant>`` (``fgm.sin.float64.fast``), declared free of
side effects. Before a kernel is named and compiled, ``prepare`` picks one of two
forms for its text:

- **inlined** (a kernel with at most ``INLINE_CALLS`` calls of the vectorised
  variants): the calls are renamed to the library's own symbols, whose bitcode is
  linked into the module (``mathlib_ir.link_into``), inlined and vectorised with the
  loop. Fastest code, but LLVM optimises one copy of the function per call site:
  a 300-op chain of transcendental functions is ~440 inlined copies, most of a big
  program's compile.
- **vector calls** (more calls than that): the calls stay calls, and each declaration
  maps the loop vectoriser to vector forms of the function
  (``vector-function-abi-variant``, LLVM's vector function ABI:
  ``_ZGV_LLVM_N4v_<scalar>(<vector>)``). The vectoriser then calls
  ``fgv4.sin.float64.fast`` on four lanes at once; the remainder loop calls the
  scalar ``fgm.`` symbol. The kernel's IR stays the size of its own arithmetic.

Both forms compute every lane with the same instructions (the vector variant is the
scalar function inlined into a loop over the lanes, vectorised), so they give the
same bits. The shared functions of one library function live in a runtime module
(``rt_...``) made once per machine and kept beside the library's bitcode, like the
strided copies: ``fgm.<key>`` (the scalar function, also what the exact loop of a
kernel with trigonometry calls out of line) and ``fgv<W>.<key>`` for each vector
width ``W`` the vectoriser may pick. A module calling them needs them added to the
engine first (``ensure``), including when its machine code is loaded from a manifest.
"""

from __future__ import annotations

import re

import numpy as np

from . import engine, mathlib_ir

PREFIX = "fgm."
#: at most this many calls of vectorised library variants in a kernel: inlined. Over
#: it, vector calls. One or two inlined calls run up to twice as fast as calls (the
#: loop interleaves them); from four on, the two forms ran at the same speed in a
#: 1e6-element loop, and the calls compiled 4x (4 calls) to 19x (40 calls) faster.
INLINE_CALLS = 8
#: vector widths compiled per element type (lanes of 128, 256 and 512 bits)
WIDTHS = {"float64": (2, 4, 8), "float32": (4, 8, 16)}
_CALL = re.compile(r'call \w+ @"fgm\.([\w.]+)"\(')
_DECLARE = re.compile(r'^(declare \w+ @"fgm\.([\w.]+)"\([^)]*\))', re.MULTILINE)
_USED = re.compile(r'@"fgm\.([\w.]+)"')
_LLVM = {"float64": "double", "float32": "float"}
#: library functions added to the engine -> the name of the runtime module holding them
_added: dict[str, str] = {}


def key(name: str, dtype, variant: str) -> str:
    return f"{name}.{np.dtype(dtype).name}.{variant}"


def symbol(name: str, dtype, variant: str) -> str | None:
    """The shared scalar symbol of the library's ``name`` at ``dtype`` (None: the library
    has no such function); its runtime module is added to the engine first."""
    k = key(name, dtype, variant)
    if k not in _added and not ensure([k]):
        return None
    return PREFIX + k


def keys(text: str) -> list[str]:
    """The library functions module ``text`` calls through ``fgm.`` names."""
    return sorted(set(_USED.findall(text)))


def ensure(needed: list[str]) -> bool:
    """Add the runtime modules of library functions ``needed`` (keys) to the engine:
    loaded once per machine from their machine code, else built. False if one is not
    in the library."""
    for k in needed:
        if k in _added:
            continue
        name, dtype, variant = k.split(".")
        nargs = 2 if name in ("pow", "atan2") else 1
        # the symbol named in the kept bitcode's file: if the module made of it is cached,
        # loaded as it is (the bitcode is needed, and parsed, only to compile it)
        kept = mathlib_ir.kept_symbol(name, dtype, variant)
        if kept is not None:
            text = _runtime_text(k, kept, nargs)
            if engine.load_objects([rt := "rt_" + engine.module_name(text)[4:]]):
                _added[k] = rt
                continue
        sym = mathlib_ir.symbol(name, dtype, variant)
        if sym is None:
            return False
        text = _runtime_text(k, sym, nargs)
        engine.add(text, rt := "rt_" + engine.module_name(text)[4:], mathlib_ir.link_into,
                   kind="runtime")
        _added[k] = rt
    return True


def modules(needed: list[str]) -> dict[str, str]:
    """The runtime module of each of library functions ``needed`` (added before)."""
    return {k: _added[k] for k in needed}


def loaded(names: dict[str, str]) -> None:
    """Note that runtime modules ``names`` (as ``modules`` gives them) were loaded."""
    _added.update(names)


def _runtime_text(k: str, sym: str, nargs: int) -> str:
    """The runtime module of one library function: ``fgm.<k>`` and, for a fast variant,
    ``fgv<W>.<k>`` per width ``W``."""
    _, dtype, variant = k.split(".")
    ty = _LLVM[dtype]
    ret = "i1" if variant == "rare" else ty
    params = ", ".join(f"{ty} %a{i}" for i in range(nargs))
    triple, layout = engine.triple_and_layout()
    out = [f'target triple = "{triple}"', f'target datalayout = "{layout}"',
           f'declare {ret} @"{sym}"({", ".join([ty] * nargs)})', "",
           f'define {ret} @"{PREFIX}{k}"({params}) #0 {{',
           f'  %r = call {ret} @"{sym}"({params})', f"  ret {ret} %r", "}"]
    if variant == "fast":
        narrow, base, wide = WIDTHS[dtype]
        out += _lane_loop(k, sym, nargs, ty, base)
        out += _resized(k, nargs, ty, base, narrow) + _resized(k, nargs, ty, base, wide)
        out += ['!0 = distinct !{!0, !1, !2, !3}',
                '!1 = !{!"llvm.loop.vectorize.enable", i1 true}',
                '!2 = !{!"llvm.loop.unroll.disable"}',
                f'!3 = !{{!"llvm.loop.vectorize.width", i32 {base}}}']
    return "\n".join([*out, "attributes #0 = { nounwind }", ""])


def _lane_loop(k: str, sym: str, nargs: int, ty: str, w: int) -> list[str]:
    """``fgv<w>.<k>``: the scalar function over ``w`` lanes, as a loop the vectoriser
    turns into straight-line vector code (the loop metadata ``!0`` forces width ``w``,
    the 256-bit one: at 128 bits LLVM peels such a short loop first and gives up)."""
    vty = f"<{w} x {ty}>"
    params = ", ".join(f"{vty} %v{i}" for i in range(nargs))
    lines = ["", f'define {vty} @"fgv{w}.{k}"({params}) #0 {{', "entry:"]
    for i in range(nargs):
        lines += [f"  %in{i} = alloca [{w} x {ty}]", f"  store {vty} %v{i}, ptr %in{i}"]
    lines += [f"  %out = alloca [{w} x {ty}]", "  br label %head", "head:",
              "  %i = phi i64 [0, %entry], [%next, %body]",
              f"  %more = icmp slt i64 %i, {w}", "  br i1 %more, label %body, label %done",
              "body:"]
    for i in range(nargs):
        lines += [f"  %p{i} = getelementptr [{w} x {ty}], ptr %in{i}, i64 0, i64 %i",
                  f"  %x{i} = load {ty}, ptr %p{i}"]
    xs = ", ".join(f"{ty} %x{i}" for i in range(nargs))
    return lines + [f'  %y = call {ty} @"{sym}"({xs})',
                    f"  %q = getelementptr [{w} x {ty}], ptr %out, i64 0, i64 %i",
                    f"  store {ty} %y, ptr %q", "  %next = add i64 %i, 1",
                    "  br label %head, !llvm.loop !0", "done:",
                    f"  %all = load {vty}, ptr %out", f"  ret {vty} %all", "}"]


def _resized(k: str, nargs: int, ty: str, base: int, w: int) -> list[str]:
    """``fgv<w>.<k>`` from ``fgv<base>.<k>``: a narrower width pads its lanes with zeros
    and calls it once, a wider one calls it on each half; every lane gets the same
    instructions, so the same bits, at any width."""
    vty, bty = f"<{w} x {ty}>", f"<{base} x {ty}>"
    ret = ty
    params = ", ".join(f"{vty} %v{i}" for i in range(nargs))
    lines = ["", f'define <{w} x {ret}> @"fgv{w}.{k}"({params}) #0 {{']
    call = f'call <{base} x {ret}> @"fgv{base}.{k}"'
    if w < base:
        widen = _mask(list(range(w)) + [w] * (base - w))
        for i in range(nargs):
            lines.append(f"  %w{i} = shufflevector {vty} %v{i}, {vty} zeroinitializer, "
                         f"{widen}")
        lines.append(f"  %y = {call}({', '.join(f'{bty} %w{i}' for i in range(nargs))})")
        lines += [f"  %r = shufflevector <{base} x {ret}> %y, <{base} x {ret}> poison, "
                  f"{_mask(range(w))}", f"  ret <{w} x {ret}> %r", "}"]
        return lines
    for half, lanes in (("lo", range(base)), ("hi", range(base, w))):
        for i in range(nargs):
            lines.append(f"  %{half}{i} = shufflevector {vty} %v{i}, {vty} poison, "
                         f"{_mask(lanes)}")
        lines.append(f"  %{half} = {call}"
                     f"({', '.join(f'{bty} %{half}{i}' for i in range(nargs))})")
    lines += [f"  %r = shufflevector <{base} x {ret}> %lo, <{base} x {ret}> %hi, "
              f"{_mask(range(w))}", f"  ret <{w} x {ret}> %r", "}"]
    return lines


def _mask(lanes) -> str:
    lanes = list(lanes)
    return f"<{len(lanes)} x i32> <{', '.join(f'i32 {i}' for i in lanes)}>"


def prepare(text: str) -> str:
    """Kernel ``text`` with its library calls in their compiled form: renamed to the
    library's symbols (to be linked in and inlined) if it makes at most
    ``INLINE_CALLS`` calls of fast variants. Else the fast variants are mapped to the
    shared vector variants, the small checks for rare inputs inlined, and the exact
    variants (called out of line in any case) left calling the shared ``fgm.``
    functions."""
    calls = _CALL.findall(text)
    fast = sorted({k for k in calls if k.endswith(".fast")})
    if sum(k.endswith(".fast") for k in calls) <= INLINE_CALLS:
        fast = []
    if not fast:
        return _inlined(text, sorted(set(calls)))
    text = _inlined(text, sorted({k for k in calls if k.endswith(".rare")}))
    vectors = []

    def declare(m):
        k, nargs = m.group(2), m.group(1).count(",") + 1
        if k not in fast:
            return m.group(1)
        dtype = k.split(".")[1]
        forms = ",".join(f"_ZGV_LLVM_N{w}{'v' * nargs}_{PREFIX}{k}(fgv{w}.{k})"
                         for w in WIDTHS[dtype])
        vectors.extend(f'declare <{w} x {_LLVM[dtype]}> @"fgv{w}.{k}"'
                       f'({", ".join([f"<{w} x {_LLVM[dtype]}>"] * nargs)}) nounwind memory(none)'
                       for w in WIDTHS[dtype])
        return f'{m.group(1)} "vector-function-abi-variant"="{forms}"'

    text = _DECLARE.sub(declare, text)
    used = [f'ptr @"fgv{w}.{k}"' for k in fast for w in WIDTHS[k.split(".")[1]]]
    # kept in the module until the vectoriser runs (LLVM drops unused declarations)
    return "\n".join([text, *vectors, f"@llvm.compiler.used = appending global "
                      f'[{len(used)} x ptr] [{", ".join(used)}], section "llvm.metadata"', ""])


def _inlined(text: str, called: list[str]) -> str:
    """``text`` calling the library's own symbols for keys ``called`` (linked in and
    inlined later: ``mathlib_ir.link_into``)."""
    for k in called:
        name, dtype, variant = k.split(".")
        text = text.replace(f'@"{PREFIX}{k}"', f'@"{mathlib_ir.symbol(name, dtype, variant)}"')
    seen: set[str] = set()  # two keys may share one function (sin's and cos's rare)
    return "\n".join(line for line in text.split("\n") if not line.startswith("declare ")
                     or not (line in seen or seen.add(line)))
