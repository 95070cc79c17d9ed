"""A fused Function -> its entry module: the ops between loop kernels, as LLVM IR.

The entry is a CPython ``METH_FASTCALL`` function over concrete shapes, called as
``entry(*params, *results, arena)`` with C-contiguous NumPy arrays of the right
types (the caller checks): it reads each array's data pointer from the array
object, runs the Function's ops in order and writes the results into the result
arrays. Scalar values live in registers; every other array value has its own
place in the arena (or, for a result, in its result array), laid out here, so a
call allocates nothing but its results and one arena. Kernels (``kernel.py``) are
separate modules the entry calls by name; control-flow ops whose regions are lowered
too run as native branches and loops (``control.py``), gathers and scatters as loops
that check their indices (``indexing.py``: an index out of range makes the entry
return NULL with an ``IndexError`` set). Around work of at least ``GIL_FREE_ELEMENTS``
elements the entry releases the GIL.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Function, Op, Value
from ...ir.count_op import count_n
from . import (
    control,
    copies,
    decompositions,
    engine,
    indexing,
    lapack,
    products,
    scans,
    schur,
    windows,
)
from . import fourier as spectral
from . import kernel as kn
from . import scalar as sc
from .kernel import I64, PTR, Unsupported, loop_nest
from .sizes import SizeTable

#: elements of loop work from which a call releases the GIL while it computes
GIL_FREE_ELEMENTS = 1 << 14
#: where NumPy keeps an array's data pointer in its object (``PyArrayObject_fields.data``)
_DATA_OFFSET = 16
_VIEW_OPS = ("reshape", "stop_gradient")
_COPY_OPS = ("slice", "transpose", "broadcast_to", "update_slice", "concatenate", "iota")


def check(fn: Function) -> None:
    """Raise ``Unsupported`` naming the first op the lean path cannot lower."""
    for v in (*fn.params, *fn.results):
        if not sc.supported_dtype(v.type.dtype):
            raise Unsupported(f"dtype {v.type.dtype}")
    for op in fn.ops:
        check_op(op)


def check_op(op: Op) -> None:
    """Raise ``Unsupported`` unless ``op`` (of a fused Function) is lowered here."""
    for v in (*op.operands, *op.results):
        if not sc.supported_dtype(v.type.dtype):
            raise Unsupported(f"dtype {v.type.dtype} in {op.name}")
    if op.name == "fused":
        kn.check(op)
    elif op.name in control.LOWERED:
        for region in op.regions:
            check(region)
    elif op.name != "constant" and not _driver_op(op):
        raise Unsupported(f"op {op.name!r}")


#: the families of ops the entry runs as loop functions of their own: each module's
#: ``LOWERED``, ``lowered(op)`` and ``work(op)``, and the ``Entry`` method running one
#: of its ops (None: ``_<op name>``)
_FAMILIES = {scans: None, lapack: "_linalg", decompositions: "_decomposition",
             windows: "_window", spectral: None, schur: None}
_FAMILY = {name: (module, method) for module, method in _FAMILIES.items()
           for name in module.LOWERED}


def _driver_op(op: Op) -> bool:
    """Whether ``op``, outside kernels, is lowered here."""
    if op.name in ("count", *_VIEW_OPS, *_COPY_OPS, *indexing.LOWERED):
        return True
    family = _FAMILY.get(op.name)
    if family is not None:
        return family[0].lowered(op)
    if op.name == "matmul":
        return products.lowered(op)
    if op.name.startswith("reduce_"):
        return op.operands[0].type.shape == ()
    return bool(op.results) and op.results[0].type.shape == () and sc.supports(op)


class Entry(control.Regions, products.Products, indexing.Indexing, scans.Scans,
            lapack.Lapack, decompositions.Decompositions, windows.Windows, spectral.Fourier,
            schur.Schur, SizeTable):
    """The entry module of one fused Function: its IR text (with the kernel names it
    calls still to be linked), its arena size, and its kernels."""

    def __init__(self, fn: Function, kernel_names: dict[Op, str], symbol: str,
                 chunked: frozenset = frozenset(), threads: bool = False,
                 host: bool = True, narrow: bool = True):
        # ``fn`` has passed ``check`` (its caller's). ``host``: called from CPython
        # holding the GIL (released around long work, an index error raised as
        # ``IndexError``); else a plain C function that touches no CPython state (a C
        # entry): an index error only makes it return NULL
        self.host = host
        self.narrow = narrow  # narrow products by ``smallmm`` (else all by BLAS)
        self.fn = fn
        # kernels run in chunks (``kernel.build(op, chunked=True)``), on Numba's
        # threading layer if ``threads``, else the chunks one after another
        self.chunked, self.threads = chunked, threads
        self.symbol = symbol
        # sizes are read from the arena's table (``sizes``)
        self._start_sizes()
        self.tables: dict = {}
        mod = ir.Module(name="entry")
        mod.triple, mod.data_layout = engine.triple_and_layout()
        self.mod = mod
        fnty = ir.FunctionType(PTR, [PTR, PTR.as_pointer(), I64])
        f = ir.Function(mod, fnty, symbol)
        self.f = f
        b = ir.IRBuilder(f.append_basic_block("entry"))
        self.b = b
        self.kernel_names = kernel_names
        gil = None
        if host and control.work(fn, _work) >= GIL_FREE_ELEMENTS:
            gil = b.call(self._declare("PyEval_SaveThread", PTR, []), [])
        args = f.args[1]
        datas = []
        nparams = len(fn.params) + len(fn.results)
        for i in range(nparams + 1):
            obj = b.load(b.gep(args, [ir.Constant(I64, i)]))
            slot = b.bitcast(b.gep(obj, [ir.Constant(I64, _DATA_OFFSET)]), PTR.as_pointer())
            datas.append(b.load(slot))
        self.arena = datas[-1]
        self._open_table()
        #: loops between kernels (copies, iota), each its own module like a kernel's:
        #: ``(text, name)``; the entry itself is straight-line code
        self.helpers: list[tuple[str, str]] = []
        self.uses_copies = False  # whether it calls ``copies``' strided copy
        self.narrow_loops: dict = {}  # ``smallmm``'s loops it calls: symbol -> blocking
        self.region_fns: dict[Function, ir.Function] = {}  # control-flow regions
        self.folded = frozenset().union(*map(products.folded_transposes,
                                             control.functions(fn)))
        self._errors(gil)
        self._body(fn, datas[:len(fn.params)], datas[len(fn.params):-1])
        b = self.b
        if gil is not None:
            b.call(self._declare("PyEval_RestoreThread", ir.VoidType(), [PTR]), [gil])
        if host:
            b.call(self._declare("Py_IncRef", ir.VoidType(), [PTR]), [f.args[0]])
        b.ret(f.args[0])
        self._finish_sizes()
        self.text = str(mod)

    def _declare(self, name, ret, args):
        g = self.mod.globals.get(name)
        return g or ir.Function(self.mod, ir.FunctionType(ret, args), name)

    def _place(self, v: Value) -> ir.Value:
        """Memory for array value ``v``: its result array, or a new place in the arena."""
        home = self.home.get(v)
        if home is not None:
            return home
        return self._scratch(math.prod(v.type.shape) * v.type.dtype.itemsize)

    def _typed(self, ptr, t):
        return self.b.bitcast(ptr, sc.mem_type(t).as_pointer())

    def _op(self, op: Op) -> None:
        b, vals = self.b, self.vals
        out = op.results[0] if op.results else None
        if op.name in control.LOWERED:
            self._enter(op)
            return getattr(self, "_" + op.name)(op)
        if op.name in indexing.LOWERED:
            return self._indexing(op)
        family = _FAMILY.get(op.name)
        if family is not None:
            return getattr(self, family[1] or "_" + op.name)(op)
        if op.name == "fused":
            return self._kernel(op)
        if op.name == "constant":
            return self._constant(op)
        if op.name == "count":
            n = count_n(op.attrs["shape"], op.attrs["axes"])
            vals[out] = b.uitofp(self._size(n), sc.reg_type(out.type))
            return None
        x = op.operands[0] if op.operands else None
        if op.name.startswith("reduce_") or (out.type.shape == () and x is not None
                                              and x.type.shape == () and op.name in _VIEW_OPS):
            vals[out] = vals[x]
            return None
        if out.type.shape == () and op.name not in _COPY_OPS and op.name not in _VIEW_OPS:
            vals[out] = sc.emit(b, op, [vals[v] for v in op.operands])
            return None
        if op.name in _VIEW_OPS:
            return self._view(op)
        return getattr(self, "_" + op.name)(op)

    def _view(self, op: Op) -> None:
        out, x = op.results[0], op.operands[0]
        if out.type.shape == ():  # one element read out
            self.vals[out] = sc.load(self.b, self._typed(self.vals[x], x.type), x.type)
        elif x.type.shape == ():  # one element put in memory
            dst = self._place(out)
            sc.store(self.b, self.vals[x], self._typed(dst, out.type), out.type)
            self.vals[out] = dst
        elif out in self.home:
            self._memcpy(self.home[out], self.vals[x], out.type)
            self.vals[out] = self.home[out]
        else:
            self.vals[out] = self.vals[x]

    def _constant(self, op: Op) -> None:
        out = op.results[0]
        value = np.asarray(op.attrs["value"])
        if out.type.shape == () and value.ndim == 0:
            self.vals[out] = sc.constant(value[()], out.type)
            return
        data = np.broadcast_to(value.astype(out.type.dtype), out.type.shape).ravel()
        ety = sc.mem_type(out.type)
        arr = ir.ArrayType(ety, data.size)
        g = ir.GlobalVariable(self.mod, arr, f"const{len(self.mod.globals)}")
        g.global_constant = True
        g.linkage = "internal"
        g.initializer = ir.Constant(arr, [
            int(v) if isinstance(ety, ir.IntType) else sc.constant(v, out.type)
            for v in data])
        src = self.b.bitcast(g, PTR)
        dst = self._place(out)
        self._memcpy(dst, src, out.type)
        self.vals[out] = dst

    def _chunks(self, op: Op) -> None:
        """A kernel run in chunks (``kernel.chunking``): its arguments in a struct, each
        full or split reduction into an array of per-chunk partials that are then reduced
        here, in chunk order (the same bits on any number of threads); each element of
        another array result is computed inside one chunk."""
        b = self.b
        kind = kn.kinds(op)
        types = kn.arg_types(op)
        n = kn.chunks(op)[2]
        split = kn.chunking(op)[1]
        struct_t = ir.LiteralStructType(types)
        data = b.alloca(struct_t)
        fields = [self._table(kn.table(op, True)), *(self.vals[v] for v in op.operands)]
        outs, reds, splits = [], [], []
        for r, k, own, br in zip(op.results, kind, split, op.regions[0].results):
            if k == "full":
                part = self._typed(self._scratch(n * r.type.dtype.itemsize), r.type)
                reds.append((r, part))
                fields.append(part)
            elif own:
                part = self._scratch(n * math.prod(r.type.shape) * r.type.dtype.itemsize)
                splits.append((r, br, part))
                fields.append(part)
            else:
                ptr = self._place(r)
                outs.append((r, ptr))
                fields.append(ptr)
        i32 = ir.IntType(32)
        for j, v in enumerate(fields):
            b.store(v, b.gep(data, [ir.Constant(i32, 0), ir.Constant(i32, j)]))
        runner = self._declare(self.kernel_names[op] + "_chunks", ir.VoidType(),
                               [PTR.as_pointer(), I64.as_pointer(), I64.as_pointer(), PTR])
        base, dims, steps = b.alloca(PTR), b.alloca(I64), b.alloca(I64)
        b.store(ir.Constant(PTR, None), base)
        b.store(self._size(n), dims)
        b.store(ir.Constant(I64, 1), steps)
        raw = b.bitcast(data, PTR)
        if self.threads:
            threads = b.call(self._declare("get_num_threads", I64, []), [])
            pfor = self._declare("numba_parallel_for", ir.VoidType(), [PTR] * 5 + [I64] * 3)
            b.call(pfor, [b.bitcast(runner, PTR), b.bitcast(base, PTR), b.bitcast(dims, PTR),
                          b.bitcast(steps, PTR), raw, ir.Constant(I64, 0),
                          ir.Constant(I64, 1), threads])
        else:
            b.call(runner, [base, dims, steps, raw])
        for r, ptr in outs:
            self.vals[r] = ptr
        producer = {x: o for o in op.regions[0].ops for x in o.results}
        for r, br, part in splits:
            self._combine(r, producer[br].name, part, n)
        for (r, part), br in zip(reds, [x for x, k in zip(op.regions[0].results, kind)
                                        if k == "full"]):
            name = producer[br].name
            acc = b.alloca(sc.reg_type(r.type))
            b.store(kn.reduce_init(name, r.type), acc)

            def body(b, idx, acc=acc, part=part, name=name, t=r.type):
                x = sc.load(b, b.gep(part, [idx[0]]), t)
                b.store(kn._reduce(b, name, b.load(acc), x, t), acc)
            self.b = b = loop_nest(b, self.f, (self._size(n),), body)
            self.vals[r] = b.load(acc)

    def _combine(self, r: Value, name: str, part, n: int) -> None:
        """Result ``r`` of reduction ``name`` from its ``n`` chunks' partial results at
        ``part``, reduced in chunk order."""
        dst = self._place(r)
        t, m = r.type, math.prod(r.type.shape)
        init = kn.reduce_init(name, t)

        def body(b, idx, f):
            c, k = idx
            src, out = (b.bitcast(a, sc.mem_type(t).as_pointer()) for a in f.args[:2])
            at = b.gep(out, [k])
            acc = b.select(b.icmp_signed("==", c, ir.Constant(I64, 0)), init,
                           sc.load(b, at, t))
            row = c if m == 1 else b.mul(c, f.args[-1])  # m: the loop's last extent
            x = sc.load(b, b.gep(src, [b.add(row, k)]), t)
            sc.store(b, kn._reduce(b, name, acc, x, t), at, t)
        self._loop([part, dst], (n, m), body)
        self.vals[r] = dst

    def _kernel(self, op: Op) -> None:
        if op in self.chunked:
            return self._chunks(op)
        b = self.b
        kind = kn.kinds(op)
        args, reds = [self._table(kn.table(op, False))], []
        for v in op.operands:
            args.append(self.vals[v])
        outs = []
        for r, k in zip(op.results, kind):
            if k == "full":
                slot = b.alloca(sc.mem_type(r.type))
                reds.append((r, slot))
                args.append(slot)
            else:
                ptr = self._place(r)
                outs.append((r, ptr))
                args.append(ptr)
        name = self.kernel_names[op]
        callee = self._declare(name, ir.VoidType(), [a.type for a in args])
        b.call(callee, args)
        for r, ptr in outs:
            self.vals[r] = ptr
        for r, slot in reds:
            self.vals[r] = sc.load(b, slot, r.type)

    def _memcpy(self, dst, src, t) -> None:
        n = math.prod(t.shape) * t.dtype.itemsize
        b = self.b
        fn = self._declare("llvm.memcpy.p0i8.p0i8.i64", ir.VoidType(),
                           [PTR, PTR, I64, ir.IntType(1)])
        b.call(fn, [dst, src, self._size(n), ir.Constant(ir.IntType(1), 0)])

    def _copy(self, dst, dst_off, dst_strides, src, src_off, src_strides, shape, t,
              scalar=None) -> None:
        """``dst[dst_off + i . dst_strides] = src[src_off + i . src_strides]`` over
        ``shape`` (element strides; ``scalar``: a register value instead of ``src``), by
        the shared strided copy (``copies``)."""
        b = self.b
        if scalar is not None:  # a one-element source read with zero strides
            slot = b.alloca(sc.mem_type(t))
            sc.store(b, scalar, slot, t)
            src, src_off, src_strides = b.bitcast(slot, PTR), 0, [0] * len(shape)
        dims, dst_st, src_st = copies.plan(shape, dst_strides, src_strides)
        ety = ir.IntType(8 * t.dtype.itemsize)
        ends = [b.gep(b.bitcast(p, ety.as_pointer()), [self._size(off) if off else
                                                        ir.Constant(I64, 0)])
                for p, off in ((dst, dst_off), (src, src_off))]
        tables = [self._table(v) for v in (dims, dst_st, src_st)]
        fn = self._declare(copies.symbol(t.dtype.itemsize), ir.VoidType(),
                           [ety.as_pointer()] * 2 + [I64] + [I64.as_pointer()] * 3)
        b.call(fn, [*ends, ir.Constant(I64, len(dims)), *tables])
        self.uses_copies = True

    def _loop(self, args, shape, body) -> None:
        """Call a loop over ``shape`` (``_helper``): ``body(builder, indices, function)``
        reads its operands from the function's arguments ``args``. The extents other
        than 1 are the function's last arguments, so one helper serves every size."""
        sized = [n for n in shape if n != 1]

        def build(f):
            extents = iter(f.args[len(args):])
            b = ir.IRBuilder(f.append_basic_block("entry"))
            dims = [1 if n == 1 else next(extents) for n in shape]
            loop_nest(b, f, dims, lambda b, idx: body(b, idx, f)).ret_void()
        self._helper([*args, *(self._size(n) for n in sized)], build)

    def _helper(self, args, build, ret=None) -> ir.Value:
        """Call a function of ``args`` returning ``ret`` (default void), built in a module
        of its own (named by the hash of its text, so every program doing the same shares
        it): ``build(function)`` emits its body."""
        ret = ret or ir.VoidType()
        mod = ir.Module(name="loop")
        mod.triple, mod.data_layout = engine.triple_and_layout()
        f = ir.Function(mod, ir.FunctionType(ret, [a.type for a in args]), kn.PLACEHOLDER)
        build(f)
        text = str(mod)
        name = "k_" + engine.module_name(text)[4:]
        if all(name != n for _, n in self.helpers):
            self.helpers.append((text.replace(kn.PLACEHOLDER, name), name))
        return self.b.call(self._declare(name, ret, [a.type for a in args]), args)

    def _source(self, v: Value):
        """(pointer, register value) of an operand: arrays by pointer, scalars by value."""
        return (None, self.vals[v]) if v.type.shape == () else (self.vals[v], None)

    def _slice(self, op: Op) -> None:
        out, x = op.results[0], op.operands[0]
        st = _c_strides(x.type.shape)
        starts, steps = op.attrs["starts"], op.attrs["steps"]
        dst = self._place(out)
        self._copy(dst, 0, _c_strides(out.type.shape), self.vals[x],
                   sum(a * s for a, s in zip(starts, st)),
                   [c * s for c, s in zip(steps, st)], out.type.shape, out.type)
        self.vals[out] = dst

    def _transpose(self, op: Op) -> None:
        out, x = op.results[0], op.operands[0]
        if out in self.folded:  # read transposed by the products that use it
            self.vals[out] = self.vals[x]
            return
        st = _c_strides(x.type.shape)
        dst = self._place(out)
        self._copy(dst, 0, _c_strides(out.type.shape), self.vals[x], 0,
                   [st[p] for p in op.attrs["perm"]], out.type.shape, out.type)
        self.vals[out] = dst

    def _broadcast_to(self, op: Op) -> None:
        out, x = op.results[0], op.operands[0]
        dst = self._place(out)
        src, value = self._source(x)
        self._copy(dst, 0, _c_strides(out.type.shape), src, 0,
                   kn._strides(x.type.shape, out.type.shape) if src is not None else None,
                   out.type.shape, out.type, scalar=value)
        self.vals[out] = dst

    def _update_slice(self, op: Op) -> None:
        out, x, y = op.results[0], op.operands[0], op.operands[1]
        dst = self._place(out)
        self._memcpy(dst, self.vals[x], out.type)
        st = _c_strides(out.type.shape)
        starts, steps, stops = op.attrs["starts"], op.attrs["steps"], op.attrs["stops"]
        shape = y.type.shape if y.type.shape else tuple(
            len(range(a, b if b >= 0 else (n if c > 0 else -1), c))
            for a, b, c, n in zip(starts, stops, steps, out.type.shape))
        src, value = self._source(y)
        self._copy(dst, sum(a * s for a, s in zip(starts, st)),
                   [c * s for c, s in zip(steps, st)], src, 0,
                   kn._strides(y.type.shape, shape) if src is not None else None,
                   shape, out.type, scalar=value)
        self.vals[out] = dst

    def _concatenate(self, op: Op) -> None:
        out = op.results[0]
        axis = op.attrs["axis"] % len(out.type.shape)
        dst = self._place(out)
        st = _c_strides(out.type.shape)
        at = 0
        for x in op.operands:
            self._copy(dst, at * st[axis], st, self.vals[x], 0, _c_strides(x.type.shape),
                       x.type.shape, out.type)
            at += x.type.shape[axis]
        self.vals[out] = dst

    def _iota(self, op: Op) -> None:
        out = op.results[0]
        dst = self._place(out)
        t = out.type

        def body(b, idx, f):
            i = idx[0]
            v = (b.sitofp(i, sc.reg_type(t)) if t.dtype.kind == "f" else
                 b.trunc(i, sc.reg_type(t)) if sc.reg_type(t).width < 64 else i)
            sc.store(b, v, b.gep(f.args[0], [i]), t)
        self._loop([self._typed(dst, t)], out.type.shape, body)
        self.vals[out] = dst


def _work(op: Op) -> int:
    """Elements of loop work of ``op`` (one that is not control flow)."""
    if op.name == "fused":
        return math.prod(kn.space_of(op))
    if op.name in _COPY_OPS:
        return math.prod(op.results[0].type.shape)
    if op.name == "matmul":
        return products.work(op)
    if op.name in indexing.LOWERED:
        return indexing.work(op)
    family = _FAMILY.get(op.name)
    return family[0].work(op) if family is not None else 0


def _c_strides(shape) -> list[int]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return out[::-1]
