"""The lean code generator: fused IR -> LLVM IR with llvmlite -> machine code.

``compile(fused)`` lowers each loop kernel (``kernel.py``) to its own small LLVM
module named by the hash of its text, and the ops between them to an entry module
(``entry.py``) that CPython calls directly (``engine.builtin``). Modules are
optimised one at a time and their machine code is kept on disk by content
(``engine.py``): a kernel two functions share compiles once. Element rules are in
``scalar.py``. Ops it does not lower (``lowers``) run between compiled segments
with their NumPy implementations (``runtime.lean_exec``).

May import ``config``, ``ir`` and ``codegen``'s own modules; never ``runtime``.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict

import numpy as np

from ... import config
from ..._sources import sha256
from ...ir import Function
from ...ir.printer import print_function
from ...ir.stats import add_phase, count_module
from . import copies, engine, extents, mathcalls, mathlib_ir, parallel, smallmm, symbols
from . import scalar as sc
from .control import walk
from .entry import Entry, check, check_op
from .indexing import LOWERED
from .kernel import PLACEHOLDER, Unsupported, build, chunkable, chunking, is_flat, space_of

__all__ = ["Compiled", "Unsupported", "check", "chunked_kernels", "compile_function", "digest",
           "holds", "lowers", "source"]

_COMMENT = re.compile(r"\s*;.*$", re.MULTILINE)


class Compiled:
    """A fused Function's machine code: ``call(*params, *results, arena)``, or for a C
    entry (``compile_function(host=False)``) the entry's ``address``. A host entry's
    arena holds its size table ``sizes`` at ``table_offset`` (``sizes.fill`` writes it
    into a new arena)."""

    def __init__(self, call, arena_bytes: int, kernels: int, compiled: int,
                 address: int | None = None, sizes=None, table_offset: int = 0):
        self.call = call
        self.address = address
        self.arena_bytes = arena_bytes
        self.sizes = None if sizes is None else np.asarray(sizes, dtype=np.int64)
        self.table_offset = table_offset
        self.kernels, self.compiled = kernels, compiled


def holds(fn: Function) -> bool:
    """Whether an entry can take ``fn``'s parameters and return its results (their
    dtypes have a place in machine code)."""
    return all(sc.supported_dtype(v.type.dtype) for v in (*fn.params, *fn.results))


def lowers(op) -> bool:
    """Whether ``op`` (of a fused Function) is lowered by this generator."""
    try:
        check_op(op)
    except Unsupported:
        return False
    return True


def _named(text: str, placeholder: str, prefix: str) -> tuple[str, str]:
    """``text`` without comments, its placeholder symbol replaced by a content name."""
    bare = _COMMENT.sub("", text)
    name = prefix + engine.module_name(bare)[4:]
    return bare.replace(placeholder, name), name


def chunked_kernels(fused: Function) -> frozenset:
    """The kernels of ``fused`` (and of its control-flow regions) that run in chunks:
    those of at least ``config.PARALLEL_THRESHOLD`` iterations that can
    (``kernel.chunkable``)."""
    return frozenset(op for op in walk(fused) if op.name == "fused"
                     and math.prod(space_of(op)) >= config.PARALLEL_THRESHOLD
                     and chunkable(op))


#: kernels built in this process: ``kernel_key`` -> (annotated text, bare text, name)
_built: OrderedDict[tuple, tuple[str, str, str]] = OrderedDict()
_BUILT_SIZE = 4096


def _structure(t) -> tuple:
    """A type as a kernel's text sees it: its dtype and which of its axes are 1 (the
    other extents are read from the kernel's size table)."""
    return t.dtype.str, tuple(n == 1 for n in t.shape)


def kernel_key(op, chunked: bool) -> tuple:
    """What a kernel's IR is made of: its body's ops, attributes, types (their dtypes and
    size-1 axes: ``_structure``) and how they connect (not the values' names, the source
    locations nor the extents, which its text reads from its size table, but for the
    few it holds as constants: ``extents.fixed``), whether and how it runs in chunks,
    how it calls the math library and the optimisation level its
    name carries. Two kernels with the same key have the same IR but for comments."""
    body = op.regions[0]
    index = {v: i for i, v in enumerate(body.params)}
    ops = []
    for bop in body.ops:
        # a count's text is a read of the table, whatever array it counts
        attrs = {} if bop.name == "count" else bop.attrs
        ops.append((bop.name, tuple(sorted((k, repr(v)) for k, v in attrs.items())),
                    tuple(index[v] for v in bop.operands),
                    tuple(_structure(r.type) for r in bop.results)))
        for r in bop.results:
            index[r] = len(index)
    space = space_of(op)
    keep = extents.fixed(space, is_flat(op))  # these extents are constants of the text
    return (tuple(_structure(p.type) for p in body.params), tuple(ops),
            tuple(index[r] for r in body.results),
            tuple(_structure(v.type) for v in (*op.operands, *op.results)),
            tuple(space[a] for a in keep), chunking(op) if chunked else None,
            mathcalls.INLINE_CALLS, config.OPT, engine.salt())


#: a kernel of at most this many iterations is compiled as ``small``
SMALL_KERNEL = 128


def small(op) -> bool:
    """Whether kernel ``op`` is compiled as small (``engine.LEVELS``: the fast instruction
    selector), under a name of its own (``s_``, so the same kernel at more
    iterations compiles once more, in full); never in ``extents.all_read`` (the sizes
    are not known then)."""
    return not extents.reading_all() and math.prod(space_of(op)) <= SMALL_KERNEL


def _kernel(op, chunked: bool, fresh: bool = False) -> tuple[str, str, str]:
    """``(annotated text, bare text, name)`` of kernel ``op``: built, or the one built
    for an equal kernel before (a model's repeated layers, or a function at a new shape,
    emit each kernel once; its comments name the lines of the first). ``fresh``: built
    anew, its comments naming ``op``'s own lines (for ``source``). A ``small`` kernel's
    name starts ``s_``, another's ``k_``."""
    tiny = small(op)
    key = (kernel_key(op, chunked), tiny)
    hit = None if fresh else _built.get(key)
    if hit is None:
        text = mathcalls.prepare(build(op, chunked)[0])
        bare, name = _named(text, PLACEHOLDER, "s_" if tiny else "k_")
        hit = _built[key] = (text.replace(PLACEHOLDER, name), bare, name)
        if len(_built) > _BUILT_SIZE:
            _built.popitem(last=False)
    return hit


def _lowered(fused: Function, threads: bool = False, host: bool = True, fresh: bool = False,
             chunked: frozenset | None = None, narrow: bool = True):
    """The kernel modules (bare text, name), their annotated texts and the entry
    (``fresh``: see ``_kernel``; ``chunked``: the kernels run in chunks, by default
    ``chunked_kernels``; ``narrow``: narrow products by ``smallmm``, a choice made by
    their shapes)."""
    names, modules, texts = {}, [], []
    chunked = chunked_kernels(fused) if chunked is None else chunked
    for op in walk(fused):  # the kernels of control-flow regions too
        if op.name == "fused":
            text, bare, name = _kernel(op, op in chunked, fresh)
            names[op] = name
            modules.append((bare, name))
            texts.append(text)
    entry = Entry(fused, names, "__fusegrad_entry__", chunked, threads, host, narrow)
    modules += entry.helpers
    texts += [text for text, _ in entry.helpers]
    return modules, texts, entry


def _linker(text: str):
    """What links the math library into a module that calls it (else None)."""
    return mathlib_ir.link_into if "cfunc." in text else None


def source(fused: Function, threads: bool = False) -> str:
    """The annotated LLVM IR of ``fused``: the entry, then each kernel (each group of
    instructions after a comment naming its IR op and source line)."""
    check(fused)
    _, texts, entry = _lowered(fused, threads, fresh=True)
    _, symbol = _named(entry.text, "__fusegrad_entry__", "e_")
    loops = [smallmm.module_text(*b) for b in entry.narrow_loops.values()]
    return "\n".join([entry.text.replace("__fusegrad_entry__", symbol), *texts, *loops])


def digest(fused: Function) -> str | None:
    """The hash of ``fused``'s text (every op, attribute and constant, exactly, and the
    source locations of a program with indexing ops, whose index errors name them): what
    its compiled form is recorded under (``_manifest_key``). None if an attribute has no
    text. A caller that kept it (the pass cache) passes it to ``compile_function``."""
    try:
        text = print_function(fused, locs=any(op.name in LOWERED for op in walk(fused)))
    except TypeError:
        return None
    return sha256(text.encode()).hexdigest()


def _manifest_key(fused: Function, threads: bool, text_digest: str | None,
                  host: bool = True) -> str | None:
    """The name under which ``fused``'s compiled form is recorded: its text's
    ``digest``, the code generator's salt, the optimisation level, the threads
    setting, the kind of entry (``host``), which kernels run in chunks and how kernels
    call the math library (``mathcalls.INLINE_CALLS``). None without a digest."""
    if text_digest is None:
        return None
    chunked = chunked_kernels(fused)
    marks = [i for i, op in enumerate(walk(fused)) if op in chunked]
    kind = "" if host else " c"
    return engine.module_name(f"{threads} {marks} {mathcalls.INLINE_CALLS}{kind}\n{text_digest}")


def _loaded(symbol: str, label: str, host: bool) -> tuple:
    """``(call, address)`` of a loaded entry: a builtin for a host entry, else the
    address alone."""
    if host:
        return engine.builtin(symbol, label), None
    return None, engine.address(symbol)


def _from_manifest(fused: Function, key: str | None, host: bool = True):
    """``fused`` compiled before (in this process or another): its entry and kernels
    loaded by their recorded names, without emitting any IR. None if anything is
    missing (the caller compiles)."""
    manifest = engine.read_manifest(key) if key else None
    if manifest is None:
        return None
    symbols.provide(manifest["symbols"])
    # the runtime's modules by their recorded names, loaded in one batch with the
    # program's (naming them anew would need LLVM's target)
    copied, library = manifest["copies"], manifest["mathlib"]
    narrow = manifest.get("narrow", {})
    if not engine.load_objects([*([copied] if copied else []), *library.values(),
                                *narrow.values(), *manifest["modules"]]):
        return None
    if copied:
        copies.loaded(copied)
    smallmm.loaded(narrow)
    mathcalls.loaded(library)
    call, address = _loaded(manifest["symbol"], fused.name, host)
    return Compiled(call, manifest["arena"], manifest["kernels"], 0, address,
                    manifest.get("sizes"), manifest.get("table", 0))


def compile_function(fused: Function, threads: bool = False,
                     text_digest: str | None = None, host: bool = True) -> Compiled:
    """Compile ``fused`` (raises ``Unsupported`` before any work if an op is not lowered);
    ``threads``: its chunked kernels (``chunked_kernels``) run on Numba's threading
    layer, which the caller has started, else one chunk after another (the same bits).
    A function compiled before is loaded by its manifest (``_from_manifest``);
    ``text_digest``: its ``digest`` if the caller has it (else computed). ``host``
    False: a C entry for native callers (``Entry``; its ``Compiled.address``)."""
    check(fused)
    t0 = time.perf_counter()
    key = _manifest_key(fused, threads, text_digest or digest(fused), host)
    done = _from_manifest(fused, key, host)
    if done is not None:
        add_phase("cache load", time.perf_counter() - t0)
        count_module()
        return done
    modules, _, entry = _lowered(fused, threads, host)
    bare, symbol = _named(entry.text, "__fusegrad_entry__", "e_")
    add_phase("IR emission", time.perf_counter() - t0)
    if entry.uses_copies:
        copies.ensure()
    narrow = {sym: smallmm.ensure(b) for sym, b in entry.narrow_loops.items()}
    compiled = len(parallel.compile_modules(
        [(text, "m" + name, _linker(text), "small" if name.startswith("s_") else "kernel")
         for text, name in modules]
        + [(bare, "m" + symbol, _linker(bare), "entry")]) - {"m" + symbol})
    call, address = _loaded(symbol, fused.name, host)
    count_module()
    if key is not None:
        engine.write_manifest(key, {
            "symbol": symbol, "modules": ["m" + n for _, n in modules] + ["m" + symbol],
            "arena": entry.arena_bytes, "kernels": len(modules),
            "copies": copies.ensure() if entry.uses_copies else None,
            "narrow": narrow,
            "sizes": entry.size_values.tolist(),
            "table": entry.table_offset,
            "mathlib": mathcalls.modules(
                mathcalls.keys("\n".join(text for text, _ in [*modules, (bare, "")]))),
            "symbols": sorted({x for text, _ in [*modules, (bare, "")]
                               for x in symbols.host_symbols(text)})})
    # its annotated text comes from ``source``, when asked for (kernels from the memo
    # would show the lines of another function with the same kernel)
    return Compiled(call, entry.arena_bytes, len(modules), compiled, address,
                    entry.size_values, entry.table_offset)
