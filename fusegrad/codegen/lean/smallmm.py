"""Products with a narrow result, ``C[m, n] = A[m, k] @ B[k, n]`` for ``n`` up to
``NARROW`` (and a ``B`` small enough to stay in cache), by a register-blocked loop of
our own instead of BLAS.

For such shapes BLAS spends much of its time on what is around the arithmetic: a call
through its dispatch, packing both operands into its own layout, clearing ``C`` before
it adds to it. Here a block of ``MR`` rows by ``NV`` vectors of ``C`` lives in
registers while ``k`` runs: per ``k`` the block loads ``NV`` vectors of a row of ``B``
(in cache) and one element of each of its ``MR`` rows of ``A`` (read in place, with
any strides, so ``A`` may be the transpose of a stored matrix: ``a^T @ b``, the weight
gradient of a layer), and does ``MR * NV`` vector fused multiply-adds. Blocks one
vector wide, then single elements, finish the columns; a row at a time the rows.

Vectors are the machine's widest (``engine.vector_bytes``: 64 bytes with AVX-512, else
32); the block's accumulators fill three quarters of the vector registers (24 of 32
with AVX-512, 12 of 16 else), leaving room for the row of ``B`` and a broadcast so
nothing spills. Each element of ``C`` is one chain of fused multiply-adds over ``k`` in
order, so its bits do not depend on the block it falls in. Shapes are arguments (read
from the entry's size table), so one function serves every product of its dtype and
blocking: ``fusegrad_narrow_<dtype>_<lanes>x<vectors>x<rows>``, in a module of the
runtime's own (``rt_``, as ``copies``) compiled once per machine and kept beside the
math library, so a new program's compile does not pay for it.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...ir import Op
from ...ir.types import dtype_name
from . import engine
from . import scalar as sc
from .kernel import I64, loop_nest

#: the widest result (columns) a product may have to be computed here
NARROW = 64
#: the most elements of ``B`` (it is read once per block of rows: it stays in L2)
B_ELEMENTS = 1 << 15
#: rows of ``A`` below which BLAS is as good (the block loop's set-up dominates both)
_MIN_ROWS = 4


def used(op: Op, tx: bool, ty: bool) -> bool:
    """Whether product ``op`` (one matrix; ``tx``/``ty``: an operand read transposed
    from its stored form) is computed here rather than by BLAS."""
    (x, y), out = op.operands, op.results[0]
    if out.type.dtype not in (np.dtype(np.float64), np.dtype(np.float32)) or ty:
        return False
    if out.type.ndim != 2 or x.type.ndim != 2 or y.type.ndim != 2:
        return False
    m, n = out.type.shape
    k = x.type.shape[-1]
    # (one column: a matrix-vector product, BLAS's gemv as NumPy calls it, NumPy's bits)
    return 2 <= n <= NARROW and k * n <= B_ELEMENTS and m >= _MIN_ROWS and k >= 1


def blocking(dtype: np.dtype, n: int) -> tuple[int, int, int]:
    """``(lanes, vectors per block, rows per block)`` for results ``n`` wide."""
    wide = engine.vector_bytes()
    lanes = wide // dtype.itemsize
    # 32 registers with AVX-512: 24 accumulators, 4 vectors of b and a broadcast; 16
    # else: 12, 2 and 1 (more vectors of b would spill)
    budget, most = (24, 4) if wide >= 64 else (12, 2)
    nv = max(1, min(most, -(-n // lanes)))
    return lanes, nv, max(1, min(8, budget // nv))


def build(f: ir.Function, dtype: np.dtype, lanes: int, nv: int, mr: int) -> None:
    """The body of ``void f(T* a, T* b, T* c, i64 m, i64 n, i64 k, i64 a_row, i64 a_col)``:
    ``c[i, j] = sum_k a[i * a_row + k * a_col] * b[k * n + j]``, ``c`` row-major."""
    a, bm, c, m, n, k, s_row, s_col = f.args
    ety = sc.mem_type(dtype)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    zero = ir.Constant(I64, 0)

    def const(v):
        return ir.Constant(I64, v)

    def panel(b, j0, width, vec, rows):
        """Rows ``[i0, i0 + rows)`` (a loop over blocks) of columns ``[j0, j0 + width *
        vec)``: ``width`` vectors of ``vec`` lanes (``vec`` 1: scalars)."""
        vty = ir.VectorType(ety, vec) if vec > 1 else ety
        fma = _fma(f.module, ety, vec)

        def block(b, i0, nrows):
            rows_a = [b.mul(b.add(i0, const(r)), s_row) for r in range(nrows)]
            accs_in = []
            head = f.append_basic_block("k")
            body = f.append_basic_block("kbody")
            done = f.append_basic_block("kdone")
            pre = b.block
            b.branch(head)
            b.position_at_end(head)
            kk = b.phi(I64)
            kk.add_incoming(zero, pre)
            for _ in range(nrows * width):
                p = b.phi(vty)
                p.add_incoming(ir.Constant(vty, 0.0 if vec == 1 else [0.0] * vec), pre)
                accs_in.append(p)
            b.cbranch(b.icmp_signed("<", kk, k), body, done)
            b.position_at_end(body)
            brow = b.add(b.mul(kk, n), j0)
            bvals = []
            for v in range(width):
                at = b.gep(bm, [b.add(brow, const(v * vec))])
                if vec > 1:
                    at = b.bitcast(at, vty.as_pointer())
                ld = b.load(at)
                ld.align = dtype.itemsize
                bvals.append(ld)
            koff = b.mul(kk, s_col)
            accs_out = []
            for r in range(nrows):
                av = b.load(b.gep(a, [b.add(rows_a[r], koff)]))
                if vec > 1:
                    av = b.shuffle_vector(
                        b.insert_element(ir.Constant(vty, ir.Undefined), av, zero),
                        ir.Constant(vty, ir.Undefined),
                        ir.Constant(ir.VectorType(ir.IntType(32), vec), [0] * vec))
                for v in range(width):
                    accs_out.append(b.call(fma, [av, bvals[v], accs_in[r * width + v]]))
            nxt = b.add(kk, const(1))
            kk.add_incoming(nxt, b.block)
            for p, q in zip(accs_in, accs_out):
                p.add_incoming(q, b.block)
            b.branch(head)
            b.position_at_end(done)
            for r in range(nrows):
                crow = b.add(b.mul(b.add(i0, const(r)), n), j0)
                for v in range(width):
                    at = b.gep(c, [b.add(crow, const(v * vec))])
                    if vec > 1:
                        at = b.bitcast(at, vty.as_pointer())
                    st = b.store(accs_in[r * width + v], at)
                    st.align = dtype.itemsize

        # whole blocks of ``rows`` rows, then the rest one row at a time
        full = b.mul(b.sdiv(m, const(rows)), const(rows)) if rows > 1 else m
        blocks = b.sdiv(m, const(rows)) if rows > 1 else m
        b = loop_nest(b, f, (blocks,), lambda b, idx: block(b, b.mul(idx[0], const(rows)),
                                                                rows))
        if rows > 1:
            b = loop_nest(b, f, (m,), lambda b, idx: block(b, idx[0], 1),
                          bounds=(full, m))
        return b

    # columns: blocks of ``nv`` vectors, then single vectors of halving widths (down to
    # 4 elements), then single elements
    start = zero
    for vec, width in [(lanes, nv), *((w, 1) for w in _halves(lanes) if w < lanes or nv > 1),
                       (1, 1)]:
        span = vec * width
        count = b.sdiv(b.sub(n, start), const(span))
        first = start
        b = loop_nest(b, f, (count,), lambda b, idx, first=first, vec=vec, width=width,
                      span=span: panel(b, b.add(first, b.mul(idx[0], const(span))), width,
                                       vec, mr))
        start = b.add(start, b.mul(count, const(span)))
    b.ret_void()


def _halves(lanes: int) -> list[int]:
    """``lanes``, ``lanes / 2``, ... down to 4 (the vector widths of a narrow tail)."""
    out = []
    while lanes >= 4:
        out.append(lanes)
        lanes //= 2
    return out


def _fma(mod: ir.Module, ety, vec: int) -> ir.Function:
    """``llvm.fma`` of ``vec`` elements of ``ety`` (a scalar if ``vec`` is 1)."""
    base = "f64" if isinstance(ety, ir.DoubleType) else "f32"
    name = f"llvm.fma.v{vec}{base}" if vec > 1 else f"llvm.fma.{base}"
    ty = ir.VectorType(ety, vec) if vec > 1 else ety
    g = mod.globals.get(name)
    return g or ir.Function(mod, ir.FunctionType(ty, [ty, ty, ty]), name)


def symbol(dtype: np.dtype, lanes: int, nv: int, mr: int) -> str:
    """The name of the loop for ``dtype`` and a blocking."""
    return f"fusegrad_narrow_{dtype_name(dtype)}_{lanes}x{nv}x{mr}"


def module_text(dtype: np.dtype, lanes: int, nv: int, mr: int) -> str:
    """The module of the loop ``symbol(dtype, lanes, nv, mr)``."""
    mod = ir.Module(name="narrow")
    mod.triple, mod.data_layout = engine.triple_and_layout()
    ptr = sc.mem_type(dtype).as_pointer()
    f = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr] * 3 + [I64] * 5),
                    symbol(dtype, lanes, nv, mr))
    build(f, dtype, lanes, nv, mr)
    return str(mod)


def ensure(blocking: tuple) -> str:
    """Add the loop of ``blocking`` (``(dtype, lanes, nv, mr)``) to the engine (compiled
    once per machine, then loaded); its module's name."""
    sym = symbol(*blocking)
    rt = _added.get(sym)
    if rt is None:
        triple, layout = engine.triple_and_layout()
        rt = "rt_" + engine.module_name(f"; {sym} for {triple} {layout}")[4:]
        if not engine.load_objects([rt]):
            engine.add(module_text(*blocking), rt, kind="runtime")
        _added[sym] = rt
    return rt


def loaded(names: dict) -> None:
    """Note the loops a manifest loaded: symbol -> module name."""
    _added.update(names)


#: the loops in the engine: symbol -> runtime module name
_added: dict[str, str] = {}
