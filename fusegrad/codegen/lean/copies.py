"""One strided copy for every program: ``fusegrad_copy<bits>``, compiled once per machine.

The ops between kernels that move data (``slice``, ``transpose``, ``broadcast_to``,
``update_slice``, ``concatenate``) are all one loop: ``dst[i . dst_strides] =
src[i . src_strides]`` over a shape. Rather than a loop nest specialised to each op's
shape (a module for LLVM to optimise in every new program), an entry calls this
function with the shape and strides as data, coalesced first (``plan``) so that the
innermost run is as long as it can be; a run contiguous on both sides is one
``memcpy``. A scalar broadcast is the same copy from a one-element source with zero
strides. The module's text never changes, so its machine code is made once per
machine (kept beside the math library's bitcode) and loaded after that.

    void fusegrad_copy<bits>(iN* dst, iN* src, i64 ndim, i64* shape,
                             i64* dst_strides, i64* src_strides)

``ndim >= 1``; strides count elements; elements are copied as ``bits``-wide integers.
"""

from __future__ import annotations

from llvmlite import ir

from . import engine

I64 = ir.IntType(64)
#: element widths there is a copy for (bool and int8 up to int64, float64 and complex128)
BITS = (8, 16, 32, 64, 128)


def symbol(itemsize: int) -> str:
    return f"fusegrad_copy{itemsize * 8}"


def plan(shape, dst_strides, src_strides) -> tuple[list[int], list[int], list[int]]:
    """``shape`` and strides without extent-1 axes, each axis merged into the next
    where both sides step over it as over one longer axis; at least one axis."""
    axes = [(n, d, s) for n, d, s in zip(shape, dst_strides, src_strides) if n != 1]
    out: list[list[int]] = []
    for n, d, s in axes:
        if out and out[-1][1] == d * n and out[-1][2] == s * n:
            out[-1] = [out[-1][0] * n, d, s]
        else:
            out.append([n, d, s])
    if not out:
        out = [[1, 1, 1]]
    return [a[0] for a in out], [a[1] for a in out], [a[2] for a in out]


def _function(mod: ir.Module, bits: int) -> None:
    ety = ir.IntType(bits)
    eptr = ety.as_pointer()
    iptr = I64.as_pointer()
    f = ir.Function(mod, ir.FunctionType(ir.VoidType(), [eptr, eptr, I64, iptr, iptr, iptr]),
                    f"fusegrad_copy{bits}")
    dst, src, ndim, shape, dstr, sstr = f.args
    for a in (dst, src):
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    zero, one = ir.Constant(I64, 0), ir.Constant(I64, 1)
    last = b.sub(ndim, one)
    inner = b.load(b.gep(shape, [last]))
    di, si = b.load(b.gep(dstr, [last])), b.load(b.gep(sstr, [last]))
    contiguous = b.and_(b.icmp_signed("==", di, one), b.icmp_signed("==", si, one))
    idx = b.alloca(I64, last)  # the odometer over the outer axes
    outer_n, doff, soff, step = (b.alloca(I64) for _ in range(4))
    b.store(one, outer_n)
    # zero the odometer and count the outer iterations
    with _counted(b, f, last) as d:
        b.store(zero, b.gep(idx, [d]))
        b.store(b.mul(b.load(outer_n), b.load(b.gep(shape, [d]))), outer_n)
    total = b.load(outer_n)
    memcpy = mod.declare_intrinsic("llvm.memcpy", [ir.IntType(8).as_pointer(),
                                                   ir.IntType(8).as_pointer(), I64])
    with _counted(b, f, total):
        b.store(zero, doff)
        b.store(zero, soff)
        with _counted(b, f, last) as d:
            i = b.load(b.gep(idx, [d]))
            b.store(b.add(b.load(doff), b.mul(i, b.load(b.gep(dstr, [d])))), doff)
            b.store(b.add(b.load(soff), b.mul(i, b.load(b.gep(sstr, [d])))), soff)
        d0, s0 = b.gep(dst, [b.load(doff)]), b.gep(src, [b.load(soff)])
        with b.if_else(contiguous) as (run, strided):
            with run:
                i8p = ir.IntType(8).as_pointer()
                b.call(memcpy, [b.bitcast(d0, i8p), b.bitcast(s0, i8p),
                                b.mul(inner, ir.Constant(I64, bits // 8)),
                                ir.Constant(ir.IntType(1), 0)])
            with strided, _counted(b, f, inner) as j:
                v = b.load(b.gep(s0, [b.mul(j, si)]))
                b.store(v, b.gep(d0, [b.mul(j, di)]))
        # advance the odometer: the last outer axis fastest
        b.store(b.sub(last, one), step)
        head, body, done = (f.append_basic_block(n) for n in ("carry", "carry.body", "carry.done"))
        b.branch(head)
        b.position_at_end(head)
        d = b.load(step)
        b.cbranch(b.icmp_signed(">=", d, zero), body, done)
        b.position_at_end(body)
        slot = b.gep(idx, [d])
        nxt = b.add(b.load(slot), one)
        wrap = b.icmp_signed(">=", nxt, b.load(b.gep(shape, [d])))
        b.store(b.select(wrap, zero, nxt), slot)
        b.store(b.select(wrap, b.sub(d, one), ir.Constant(I64, -1)), step)
        b.branch(head)
        b.position_at_end(done)
    b.ret_void()


class _counted:
    """``with _counted(b, f, n) as i:`` emits the body for ``i`` in ``[0, n)``."""

    def __init__(self, b: ir.IRBuilder, f: ir.Function, n):
        self.b, self.f, self.n = b, f, n

    def __enter__(self):
        b, f = self.b, self.f
        self.head = f.append_basic_block("for")
        self.body = f.append_basic_block("for.body")
        self.done = f.append_basic_block("for.done")
        pre = b.block
        b.branch(self.head)
        b.position_at_end(self.head)
        self.i = b.phi(I64)
        self.i.add_incoming(ir.Constant(I64, 0), pre)
        b.cbranch(b.icmp_signed("<", self.i, self.n), self.body, self.done)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc):
        if exc[0] is None:
            b = self.b
            self.i.add_incoming(b.add(self.i, ir.Constant(I64, 1)), b.block)
            b.branch(self.head)
            b.position_at_end(self.done)
        return False


def module_text() -> str:
    mod = ir.Module(name="copies")
    mod.triple, mod.data_layout = engine.triple_and_layout()
    for bits in BITS:
        _function(mod, bits)
    return str(mod)


def name() -> str:
    """The module's name: ``rt_`` (kept once per machine) and a hash of what its text is
    made from: the code generator's salt (this file's source and llvmlite's version among
    it), the optimisation level and the target. Building the text only to hash it cost a
    warm start 10 ms; the text itself is built only to compile the module."""
    triple, layout = engine.triple_and_layout()
    return "rt_" + engine.module_name(f"; copies {BITS} for {triple} {layout}")[4:]


def ensure() -> str:
    """Add the copies to the engine (compiled once per machine, then loaded); their
    module's name."""
    if not _added:
        rt = name()
        if not engine.load_objects([rt]):
            engine.add(module_text(), rt, kind="runtime")
        _added.append(rt)
    return _added[0]


def loaded(rt: str) -> None:
    """Note that the copies were loaded as module ``rt`` (``ensure``'s name)."""
    if not _added:
        _added.append(rt)


_added: list[str] = []
