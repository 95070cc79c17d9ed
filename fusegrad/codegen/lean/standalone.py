"""A fused Function as self-contained LLVM IR, for a module that runs without fusegrad
(``fusegrad eject``: ``transforms.eject``).

``standalone(fused)`` lowers ``fused`` to a C entry (``Entry(host=False)``) as
``compile_function`` does, with two differences that make its text the same at every
size of one structure: no kernel holds an extent as a constant (``extents.all_read``)
and none runs in chunks. It returns every module the entry needs, each with what it
calls from the math library linked in (and nothing else of the library: dead
definitions and declarations are dropped), the host symbols they call (libm's and
libc's, SciPy's BLAS and special functions) and the entry's size table with each
arena place given by its byte count: the caller lays the arena out for any sizes as
``sizes`` does (places aligned to ``ALIGN`` and ``STAGGER`` apart from ``HEADER``, then
the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...ir import Function
from . import copies, engine, extents, mathcalls, mathlib_ir

_DEFINE = re.compile(r'^define [^@]*@"?([\w.$-]+)"?\(', re.MULTILINE)
_DECLARE = re.compile(r'^declare [^@]*@"?([\w.$-]+)"?\(', re.MULTILINE)


@dataclass(frozen=True)
class Standalone:
    """``modules``: ``(name, kind, IR text)`` in the order to add them (``kind`` as in
    ``engine.LEVELS``); ``entry``: the C entry's symbol; ``sizes``: its size table, the
    slots ``places`` holding the bytes of their place instead of its offset;
    ``symbols``: what the modules call that none defines (``_host``)."""

    entry: str
    modules: tuple[tuple[str, str, str], ...]
    sizes: tuple[int, ...]
    places: tuple[int, ...]
    symbols: tuple[str, ...]


def _host(symbol: str) -> str:
    """How a module's external ``symbol`` is found: ``blas:<routine>``,
    ``lapack:<routine>``, ``lapack64:<routine>``, ``cblas64:<name>``, ``special:<cname>``,
    ``ufunc:<name>``, ``pocketfft:<loop>``, ``numba:<name>`` (as ``symbols.provide`` names
    them) or the C function."""
    if symbol.startswith("fusegrad_cs_"):
        return "special:" + symbol[len("fusegrad_cs_"):]
    if symbol.startswith("fusegrad_ufdata_"):  # (a ufunc's loop's data)
        return "ufunc:" + symbol[len("fusegrad_ufdata_"):]
    if symbol.startswith("fusegrad_pocketfft_"):
        return "pocketfft:" + symbol[len("fusegrad_pocketfft_"):]
    for kind in ("lapack64", "lapack", "cblas64", "ufunc", "numba"):
        if symbol.startswith(f"fusegrad_{kind}_"):
            return f"{kind}:" + symbol[len(f"fusegrad_{kind}_"):]
    if symbol.startswith("fusegrad_"):
        return "blas:" + symbol[len("fusegrad_"):]
    return symbol


def _pruned(text: str, link: bool) -> str:
    """``text`` with the library linked in (if ``link``), without what nothing uses."""
    llvm = engine._llvm()
    mod = llvm.parse_assembly(text)
    if link:
        mathlib_ir.link_into(mod)
    pb = llvm.create_pass_builder(engine.target_machine(),
                                  llvm.create_pipeline_tuning_options(speed_level=0))
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.add_strip_dead_prototype_pass()
    mpm.run(mod, pb)
    return str(mod)


def _runtime(key: str) -> tuple[str, str, str]:
    """The runtime module of library function ``key`` (``mathcalls``)."""
    name, dtype, variant = key.split(".")
    sym = mathlib_ir.symbol(name, dtype, variant)
    if sym is None:
        raise ValueError(f"the math library has no {key}")
    text = mathcalls._runtime_text(key, sym, 2 if name in ("pow", "atan2") else 1)
    return "rt_" + engine.module_name(text)[4:], "runtime", _pruned(text, True)


def standalone(fused: Function) -> Standalone:
    """``fused`` as modules of IR (raises ``Unsupported`` if an op is not lowered)."""
    from . import _linker, _lowered, _named, check

    check(fused)
    with extents.all_read():
        modules, _, entry = _lowered(fused, host=False, chunked=frozenset(), narrow=False)
    bare, symbol = _named(entry.text, "__fusegrad_entry__", "e_")
    out = [(name, "kernel", _pruned(text, _linker(text) is not None))
           for text, name in modules]
    out.append((symbol, "entry", _pruned(bare, _linker(bare) is not None)))
    runtime = [_runtime(k) for k in mathcalls.keys("\n".join(t for _, _, t in out))]
    if entry.uses_copies:
        runtime.append((copies.name(), "runtime", copies.module_text()))
    out = runtime + out
    texts = "\n".join(t for _, _, t in out)
    defined = set(_DEFINE.findall(texts))
    symbols = sorted({_host(s) for s in _DECLARE.findall(texts)
                      if s not in defined and not s.startswith("llvm.")})
    sizes = [int(v) for v in entry.size_values]
    for slot, nbytes in entry.places:
        sizes[slot] = nbytes
    return Standalone(symbol, tuple(out), tuple(sizes),
                      tuple(slot for slot, _ in entry.places),
                      tuple(symbols))
