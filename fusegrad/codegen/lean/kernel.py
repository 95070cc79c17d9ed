"""A ``fused`` op -> one small LLVM module holding its loop kernel, named by its content.

The kernel is a function ``void(i64* sizes, i8* in..., <scalar> in..., i8* out...,
<elem>* red...)``: its extents are read from the table ``sizes`` (``extents``), so
its text holds its structure only. Array inputs are read with broadcasting strides (a size-1
axis against a longer one reads index 0), elementwise results are stored per
element, full reductions accumulate into one scalar, partial reductions into
their output array indexed by the kept axes, in the order of the iteration space
(as the reference interpreter's loops: the same bits on every call). When every
array input has the full iteration shape and no reduction is partial, the nest
is one flat loop, which LLVM vectorises. A large kernel runs in fixed chunks of one
axis (``chunking``), so its results do not depend on how many threads run them.

Two kernels with the same text (the same body and structure, whatever their
extents) are one module: a model's repeated layers, two functions sharing a loop,
or one function called at new shapes compile it once.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from ...ir.printer import format_op_header, value_names
from . import complexes, engine
from . import extents as ex
from . import scalar as sc
from .mathlib_ir import RARE_OPS
from .scalar import I8

_HOISTED = ("constant", "count")
PLACEHOLDER = "__fusegrad_kernel__"
I64 = ir.IntType(64)
PTR = I8.as_pointer()


class Unsupported(Exception):
    """An op or a kernel form the lean code generator does not lower (yet)."""


def annotation(op: Op, names) -> str:
    """The comment before an op's instructions: its IR and the user's line (comments
    are not part of a module's content hash)."""
    text = format_op_header(op, names)
    return text + (f"  @ {op.loc}" if op.loc is not None else "")


def space_of(op: Op) -> tuple[int, ...]:
    body = op.regions[0]
    for bop in body.ops:
        if bop.name not in _HOISTED:
            return (bop.operands[0].type.shape if bop.name.startswith("reduce_")
                    else bop.results[0].type.shape)
    raise Unsupported("a kernel without loop ops")


def kinds(op: Op) -> list[str]:
    """For each body result: 'array', 'partial' or 'full'."""
    body = op.regions[0]
    producer = {r: o for o in body.ops for r in o.results}
    out = []
    for r in body.results:
        p = producer.get(r)
        if p is not None and p.name.startswith("reduce_"):
            out.append("full" if r.type.shape == () else "partial")
        elif p is None or p.name in _HOISTED:
            raise Unsupported("a kernel result that is not computed in its loop")
        else:
            out.append("array")
    return out


def check(op: Op) -> None:
    """Raise ``Unsupported`` unless this kernel can be lowered here."""
    body = op.regions[0]
    space = space_of(op)
    reduced = set()
    for bop in body.ops:
        if bop.name in _HOISTED:
            if bop.name == "constant" and np.ndim(bop.attrs["value"]) != 0:
                raise Unsupported("an array constant inside a kernel")
            continue
        if any(v in reduced for v in bop.operands):
            raise Unsupported("a reduction's result used inside its kernel")
        if bop.name in ("reduce_sum", "reduce_max", "reduce_min"):
            if bop.operands[0].type.shape != space:
                raise Unsupported("a reduction over less than the iteration space")
            dtype = bop.results[0].type.dtype
            if not sc.supported_dtype(dtype) or (dtype.kind == "c" and bop.name != "reduce_sum"):
                raise Unsupported(f"{bop.name} of dtype {bop.results[0].type.dtype}")
            reduced.add(bop.results[0])
        elif not sc.supports(bop):
            raise Unsupported(f"op {bop.name!r} on {[str(v.type) for v in bop.operands]}")
    for r, kind in zip(body.results, kinds(op)):
        if kind == "array" and r.type.shape != space:
            raise Unsupported("a kernel result smaller than its iteration space")
    for p in body.params:
        if not sc.supported_dtype(p.type.dtype):
            raise Unsupported(f"dtype {p.type.dtype}")
        if len(p.type.shape) > len(space):
            raise Unsupported("an input larger than the iteration space")


def _strides(shape, space) -> list[int]:
    """Element strides of a C-contiguous ``shape`` read over ``space`` (0: broadcast)."""
    lead = len(space) - len(shape)
    out = [0] * len(space)
    step = 1
    for j in range(len(shape) - 1, -1, -1):
        if not (shape[j] == 1 and space[lead + j] != 1):
            out[lead + j] = step
        step *= shape[j]
    return out


def _reduce(b, name, acc, x, t):
    if name == "reduce_sum":
        # reassociable: LLVM sums in vector lanes (the same order on every call)
        if complexes.is_complex_type(x.type):
            return complexes.accumulate(b, acc, x)
        return b.fadd(acc, x, flags=("reassoc",)) if sc._is_float(x) else b.add(acc, x)
    fake = _FakeOp(t)
    return (sc.maximum if name == "reduce_max" else sc.minimum)(b, fake, [acc, x])


class _FakeOp:
    """Just enough of an Op for the element rules that look at operand dtypes."""

    def __init__(self, t):
        self.operands = [type("V", (), {"type": t})()]


def reduce_init(name: str, t) -> ir.Constant:
    if name == "reduce_sum":
        return sc.constant(0, t)
    if t.dtype.kind == "f":
        return sc.constant(-np.inf if name == "reduce_max" else np.inf, t)
    if t.dtype == np.bool_:
        return sc.constant(name == "reduce_min", t)
    info = np.iinfo(t.dtype)
    return sc.constant(info.min if name == "reduce_max" else info.max, t)


#: elements per chunk of a kernel run on several threads: a chunk is the fewest
#: iterations of its chunk axis covering at least this many elements of the loops inside
CHUNK = 512
#: the same for a kernel with split reductions (``chunking``), whose every chunk keeps a
#: partial result of each: fewer, larger chunks
SPLIT_CHUNK = 1 << 16
#: split reductions' partial results may take at most this part of the iteration space
_SPLIT_SHARE = 8


def chunking(op: Op) -> tuple[int, tuple[bool, ...]] | None:
    """How the kernel runs in chunks: the axis of its iteration space (of the flat loop,
    if ``is_flat``) whose range is split into chunks, its other loops running whole in each,
    and per result whether it is *split*. Elementwise results are stored per element;
    each full reduction reduces into the chunk's own slot; a partial reduction keeping
    the chunk axis (row sums, middle-axis sums) computes each of its elements inside one
    chunk, in the order of the one-thread loop; a split one (reducing the chunk axis, as
    column sums over chunks of rows) into the chunk's own partial result, which the
    caller reduces in chunk order. The chunk axis is the outermost of more than one
    iteration, so chunks read memory in order; where split results would take more than
    1/``_SPLIT_SHARE`` of the space (``x.sum(0)`` of (2, N)), the first axis every
    partial reduction keeps (columns), else None: the kernel runs on one thread
    (``x.sum(0)`` and ``x.sum(1)`` of (2, N) in one kernel)."""
    kind = kinds(op)
    if is_flat(op):
        return 0, (False,) * len(kind)
    space = space_of(op)
    body = op.regions[0]
    producer = {r: o for o in body.ops for r in o.results}
    reduced = [set(producer[r].attrs["axes"]) if k == "partial" else set()
               for r, k in zip(body.results, kind)]
    outer = next((ax for ax, n in enumerate(space) if n > 1), 0)
    split = tuple(outer in axes for axes in reduced)
    if not any(split):
        return outer, split
    count = _geometry(space, outer, SPLIT_CHUNK)[2]
    parts = count * sum(math.prod(r.type.shape) for r, s in zip(body.results, split) if s)
    if parts * _SPLIT_SHARE <= math.prod(space):
        return outer, split
    kept = set(range(len(space))).difference(*reduced)
    axis = next((ax for ax in sorted(kept) if space[ax] > 1), None)
    return None if axis is None else (axis, (False,) * len(kind))


def chunkable(op: Op) -> bool:
    """Whether the kernel can run in chunks on several threads (``chunking``)."""
    return chunking(op) is not None


def arg_types(op: Op) -> list[ir.Type]:
    """The kernel's arguments: its size table (``extents.table``), inputs (arrays by
    pointer, scalars by value), then one pointer per result (for a full reduction, to
    its one element)."""
    body = op.regions[0]
    out = [ex.TABLE, *(PTR if p.type.shape else sc.reg_type(p.type) for p in body.params)]
    return out + [PTR if k != "full" else sc.mem_type(r.type).as_pointer()
                  for r, k in zip(body.results, kinds(op))]


def chunks(op: Op) -> tuple[int, int, int]:
    """(iterations of the chunk axis, iterations per chunk, chunks) of a kernel run in
    chunks: fixed by the shapes alone, never by the number of threads."""
    space = space_of(op)
    if is_flat(op):
        return _geometry((math.prod(space),), 0, CHUNK)
    axis, split = chunking(op)
    return _geometry(space, axis, SPLIT_CHUNK if any(split) else CHUNK)


def table(op: Op, chunked: bool) -> list[int]:
    """The values of kernel ``op``'s size table (its first argument)."""
    return ex.table(op, space_of(op), chunks(op)[:2] if chunked else None)


def _geometry(space, axis: int, target: int) -> tuple[int, int, int]:
    """``chunks`` of ``space`` split on ``axis``, a chunk covering ``target`` elements."""
    extent, inner = space[axis], math.prod(space[axis + 1:])
    width = max(1, min(extent, -(-target // max(inner, 1))))
    return extent, width, -(-extent // width)


def is_flat(op: Op) -> bool:
    body, space = op.regions[0], space_of(op)
    return (all(p.type.shape in ((), space) for p in body.params)
            and "partial" not in kinds(op))


def build(op: Op, chunked: bool = False) -> tuple[str, list[str]]:
    """The kernel module's IR text (function named ``PLACEHOLDER``) and, per result, its
    kind. ``chunked``: the function takes the range ``[lo, hi)`` of its chunk axis
    (``chunking``) first, and the module has ``PLACEHOLDER + "_chunks"``, the form
    Numba's threading layer calls (``parallel_for``): it runs chunks (``chunks``), each
    full or split reduction into its own slot of that result's array of partials, each
    other partial reduction into the output elements of its chunk."""
    check(op)
    body = op.regions[0]
    space = space_of(op)
    kind = kinds(op)
    mod = ir.Module(name="kernel")
    mod.triple, mod.data_layout = engine.triple_and_layout()
    types = arg_types(op)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I64, I64] * chunked + types),
                     PLACEHOLDER)
    fn.linkage = "external"
    for a in fn.args:
        if isinstance(a.type, ir.PointerType):
            a.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    names = value_names(body)
    local: dict = {}
    nparams = len(body.params)
    args = fn.args[2:] if chunked else fn.args
    bounds = (fn.args[0], fn.args[1]) if chunked else None
    axis, split = chunking(op) if chunked else (0, (False,) * len(kind))
    sizes = ex.Extents(b, args[0], op, space, is_flat(op))
    args = args[1:]
    for p, a in zip(body.params, args[:nparams]):
        local[p] = a
    outs = args[nparams:]
    count = iter(range(len(ex.counts(op))))
    for bop in body.ops:  # constants before the loops
        res = bop.results[0] if bop.results else None
        if bop.name == "count":  # a mean's divisor, from the table
            local[res] = b.uitofp(sizes.count(next(count)), sc.reg_type(res.type))
        elif bop.name in _HOISTED:
            local[res] = sc.constant(bop.attrs["value"], res.type)
    producer = {r: o for o in body.ops for r in o.results}
    accs = {}
    for r, k in zip(body.results, kind):
        if k == "full":
            accs[r] = b.alloca(sc.reg_type(r.type))
    _reset(b, body, kind, outs, accs, sizes, bounds, axis, split)
    flat = is_flat(op)
    loop_space = (sizes.total(),) if flat else sizes.dims
    # strides: of each array input over the space, of the space, of each partial result
    in_st = [([1] if flat else sizes.strides(p.type.shape)) if p.type.shape else None
             for p in body.params]
    out_st = [1] if flat else sizes.c_strides(range(len(space)))
    kept = {r: [ax for ax in range(len(space)) if ax not in producer[r].attrs["axes"]]
            for r, k in zip(body.results, kind) if k == "partial"}
    kept_st = {r: sizes.c_strides(axes) for r, axes in kept.items()}
    typed = [b.bitcast(a, sc.mem_type(p.type).as_pointer())
             if p.type.shape else None for p, a in zip(body.params, args[:nparams])]
    typed_out = [b.bitcast(o, sc.mem_type(r.type).as_pointer()) if k != "full" else None
                 for r, k, o in zip(body.results, kind, outs)]

    rare_ops = [bop for bop in body.ops if bop.name in RARE_OPS
                and bop.results[0].type.dtype.kind == "f"]
    flag = b.alloca(ir.IntType(1)) if rare_ops else None
    if flag is not None:
        b.store(ir.Constant(ir.IntType(1), 0), flag)

    def point(b, idx, variant="full", outline=False):
        vals = dict(local)
        for j, p in enumerate(body.params):
            if p.type.shape:
                vals[p] = sc.load(b, b.gep(typed[j], [_offset(b, idx, in_st[j])]), p.type)
        for bop in body.ops:
            if bop.name in _HOISTED:
                continue
            res = bop.results[0]
            b.comment(annotation(bop, names))
            if bop.name.startswith("reduce_"):
                continue
            args = [vals[v] for v in bop.operands]
            vals[res] = sc.emit(b, bop, args, variant, outline)
            if variant == "fast" and bop in rare_ops:
                rare = sc.library_call(b, bop.name, args, "rare")
                if rare is not None:
                    b.store(b.or_(b.load(flag), rare), flag)
        for j, (r, k) in enumerate(zip(body.results, kind)):
            p = producer[r]
            if k == "array":
                sc.store(b, vals[r], b.gep(typed_out[j], [_offset(b, idx, out_st)]), r.type)
            elif k == "full":
                x = vals[p.operands[0]]
                b.store(_reduce(b, p.name, b.load(accs[r]), x, r.type), accs[r])
            else:
                ptr = b.gep(typed_out[j], [_offset(b, [idx[ax] for ax in kept[r]],
                                                   kept_st[r])])
                x = vals[p.operands[0]]
                sc.store(b, _reduce(b, p.name, sc.load(b, ptr, r.type), x, r.type), ptr,
                         r.type)

    if flag is None:
        b = loop_nest(b, fn, loop_space, point, bounds, axis)
    else:  # the vector path, and only if it met rare inputs, the whole loop again exactly
        b = loop_nest(b, fn, loop_space, lambda b, idx: point(b, idx, "fast"), bounds,
                      axis)
        again = fn.append_basic_block("rare")
        done = fn.append_basic_block("exact_done")
        b.cbranch(b.load(flag), again, done)
        b.position_at_end(again)
        _reset(b, body, kind, outs, accs, sizes, bounds, axis, split)
        # rare inputs only: the math library called, not inlined (each function of it
        # compiled once in the module, not once per call)
        b = loop_nest(b, fn, loop_space, lambda b, idx: point(b, idx, "full", True),
                      bounds, axis)
        b.branch(done)
        b.position_at_end(done)
    for r, k, out in zip(body.results, kind, outs):
        if k == "full":
            sc.store(b, b.load(accs[r]), out, r.type)
    b.ret_void()
    if chunked:
        _chunk_runner(mod, fn, op, types)
    return str(mod), kind


def _chunk_runner(mod, kernel, op: Op, types) -> None:
    """``void <kernel>_chunks(i8** args, i64* dims, i64* steps, i8* data)``: runs chunks
    ``[args[0], args[0] + dims[0])`` (the caller passes a null base and a step of one,
    so the first chunk arrives as a pointer's value); ``data`` holds the kernel's
    arguments, a full or split reduction's pointer being its array of per-chunk
    partials."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR.as_pointer(), I64.as_pointer(),
                                                          I64.as_pointer(), PTR]),
                     PLACEHOLDER + "_chunks")
    fn.linkage = "external"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    first = b.ptrtoint(b.load(fn.args[0]), I64)
    count = b.load(fn.args[1])
    data = b.bitcast(fn.args[3], ir.LiteralStructType(types).as_pointer())
    fields = [b.load(b.gep(data, [ir.Constant(ir.IntType(32), 0),
                                  ir.Constant(ir.IntType(32), j)]))
              for j in range(len(types))]
    body = op.regions[0]
    split = chunking(op)[1]
    space = space_of(op)
    sizes = ex.Extents(b, fields[0], op, space, is_flat(op))
    extent, width = sizes.chunk()
    # a slot's bytes (1: an element pointer's step; 0: no slots)
    step = [1 if k == "full" else ex.value(ex.mul(b, sizes.size(
        [ax for ax in range(len(space)) if ax not in _producer(body, r).attrs["axes"]]),
        r.type.dtype.itemsize)) if s else 0 for r, k, s in zip(body.results, kinds(op), split)]
    nparams = len(body.params) + 1  # the table, then the inputs

    def one(b, idx):
        c = b.add(first, idx[0])
        lo = b.mul(c, width)
        end = b.add(lo, width)
        hi = b.select(b.icmp_signed("<", end, extent), end, extent)
        call_args = list(fields[:nparams])
        for v, n in zip(fields[nparams:], step):
            call_args.append(b.gep(v, [c if isinstance(n, int) else b.mul(c, n)])
                             if not (isinstance(n, int) and n == 0) else v)
        b.call(kernel, [lo, hi, *call_args])
    b = loop_nest(b, fn, (count,), one)
    b.ret_void()


def _producer(body, r) -> Op:
    return next(o for o in body.ops if r in o.results)


def _reset(b, body, kind, outs, accs, sizes, bounds, axis, split) -> None:
    """Reductions back to their initial values; in a chunk (``bounds`` on ``axis`` of
    the space), a partial reduction's output elements of that chunk only, unless it is
    ``split`` (its output is then the chunk's own)."""
    producer = {r: o for o in body.ops for r in o.results}
    for r, k, out, own in zip(body.results, kind, outs, split):
        if k == "array":
            continue
        init = reduce_init(producer[r].name, r.type)
        if k == "full":
            b.store(init, accs[r])
            continue
        keep = [ax for ax in range(len(sizes.space)) if ax not in producer[r].attrs["axes"]]
        if bounds is None or own:
            _fill(b, out, r.type, init, [sizes.size(keep)], [1])
        else:
            _fill(b, out, r.type, init, [sizes.dims[ax] for ax in keep], sizes.c_strides(keep),
                  bounds, keep.index(axis))


def _offset(b, idx, strides):
    """The element offset of indices ``idx``; a stride is an int (0: the axis is not
    read) or an LLVM value."""
    off = ir.Constant(I64, 0)
    for i, s in zip(idx, strides):
        if isinstance(s, int) and s == 0:
            continue
        off = b.add(off, i if isinstance(s, int) and s == 1 else b.mul(i, ex.value(s)))
    return off


def _fill(b, ptr, t, value, shape, st, bounds=None, axis=0) -> None:
    """``value`` into the C-ordered array ``ptr`` of ``shape`` with element strides
    ``st`` (``bounds``: only the range ``[lo, hi)`` of ``axis``)."""
    typed = b.bitcast(ptr, sc.mem_type(t).as_pointer())

    def body(b, idx):
        sc.store(b, value, b.gep(typed, [_offset(b, idx, st)]), t)
    loop_nest(b, b.function, shape, body, bounds, axis)  # the builder continues after it


def loop_nest(b: ir.IRBuilder, fn, shape, body, bounds=None, axis=0) -> ir.IRBuilder:
    """Loops over ``shape`` (outermost first; an extent may be an LLVM value) calling
    ``body(builder, indices)`` in the innermost; ``bounds``: the loop of ``axis`` runs
    over ``[lo, hi)`` only. Returns a builder positioned after the loops."""
    idx = []
    exits = []
    for d, n in enumerate(shape):
        head = fn.append_basic_block("loop")
        inner = fn.append_basic_block("body")
        done = fn.append_basic_block("done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        lo, hi = bounds if d == axis and bounds is not None else (ir.Constant(I64, 0), n)
        i.add_incoming(lo, pre)
        stop = ir.Constant(I64, hi) if isinstance(hi, int) else hi
        b.cbranch(b.icmp_signed("<", i, stop), inner, done)
        b.position_at_end(inner)
        idx.append(i)
        exits.append((head, i, done))
    body(b, idx)
    for head, i, done in reversed(exits):
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(done)
    return b
