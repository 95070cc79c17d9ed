"""Matrix products in an entry: BLAS ``gemm``, once per matrix of a batch.

Real products call SciPy's ``dgemm``/``sgemm``; complex ones ``zgemm``/``cgemm`` of the
OpenBLAS NumPy bundles, which ``np.matmul`` calls for contiguous matrices (the same
bits where it calls gemm; where it calls gemv or a dot, for a one-row or one-column
operand, or multiplies itself, to rounding).

``matmul`` of ``(..., m, k)`` by ``(..., k, n)`` (batch axes broadcast, NumPy's rule)
is one ``gemm`` per matrix of the result's batch, in a loop whose per-matrix offsets
into each operand are constant tables of the entry (an operand broadcast along a
batch axis steps 0 there). C order is the transposed column order, so ``C = A B`` is
computed as ``C^T = B^T A^T`` without copies. An operand that is the transpose of the
last two axes of a stored array, read only by products (``folded_transposes``), is
never copied: gemm reads the stored matrices with its transpose flag. Attention's
``q @ k^T`` and its gradient's products are such products.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Function, Op, Value
from . import scalar as sc
from . import smallmm, symbols
from .kernel import loop_nest

I64 = ir.IntType(64)
I32 = ir.IntType(32)


#: the gemm each dtype calls: (symbol, integer type); complex products call NumPy's own
#: OpenBLAS (ILP64, the library ``np.matmul`` calls, found as ``lapack64`` routines are)
_GEMM = {np.dtype(np.float64): ("fusegrad_dgemm", I32),
         np.dtype(np.float32): ("fusegrad_sgemm", I32),
         np.dtype(np.complex128): ("fusegrad_lapack64_zgemm", I64),
         np.dtype(np.complex64): ("fusegrad_lapack64_cgemm", I64)}


def lowered(op: Op) -> bool:
    """Whether the entry lowers product ``op``: floating point or complex, any batch
    (complex where NumPy bundles its OpenBLAS)."""
    a, b = op.operands
    dtype = a.type.dtype
    if dtype != b.type.dtype or dtype not in _GEMM:
        return False
    return dtype.kind != "c" or _numpy_gemm(_GEMM[dtype][0])


def _numpy_gemm(symbol: str) -> bool:
    lib = symbols.numpy_blas()
    return lib is not None and hasattr(lib, f"scipy_{symbol.rsplit('_', 1)[1]}_64_")


def work(op: Op) -> int:
    """Multiply-adds of product ``op``."""
    return math.prod(op.results[0].type.shape) * op.operands[0].type.shape[-1]


def _swaps_last_two(op: Op) -> bool:
    perm = tuple(op.attrs["perm"])
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def folded_transposes(fn: Function) -> frozenset:
    """The transposes of ``fn``'s last two axes read only by lowered products (which
    read them transposed in place) and not results: never copied."""
    uses: dict[Value, list[Op]] = {}
    for op in fn.ops:
        for v in op.operands:
            uses.setdefault(v, []).append(op)
    out = set()
    for op in fn.ops:
        r = op.results[0] if op.name == "transpose" else None
        if (r is not None and _swaps_last_two(op) and r not in fn.results and uses.get(r)
                and all(u.name == "matmul" and lowered(u) for u in uses[r])):
            out.add(r)
    return frozenset(out)


def _batch_offsets(batch, shape) -> list[int]:
    """Element offset of each matrix of an operand of ``shape`` (its last two axes the
    matrix) for each index of the broadcast ``batch`` shape, in C order."""
    own = shape[:-2]
    size = shape[-1] * shape[-2]
    strides, step = [], size
    for n in reversed(own):
        strides.append(step if n != 1 else 0)
        step *= n
    strides = [0] * (len(batch) - len(own)) + strides[::-1]
    return [sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*batch)] or [0]


class Products:
    """The entry's ``matmul`` (mixed into ``entry.Entry``: uses ``b``, ``vals``,
    ``narrow``, ``narrow_loops``, ``folded``, ``_place``, ``_typed``, ``_declare``,
    ``_size`` and ``_table``)."""

    def _matmul(self, op: Op) -> None:
        b = self.b
        out, (x, y) = op.results[0], op.operands
        m, k = x.type.shape[-2:]
        n = y.type.shape[-1]
        dst = self._place(out)
        ety = sc.mem_type(out.type)

        def ref(value, ty):
            slot = b.alloca(ty)
            b.store(value, slot)
            return slot

        tx = x in self.folded  # x = S^T, S stored (..., k, m)
        ty = y in self.folded  # y = U^T, U stored (..., n, k)
        if self.narrow and smallmm.used(op, tx, ty):
            self._narrow_product(op, tx, dst)
            return
        flags = [ref(ir.Constant(ir.IntType(8), ord("T" if t else "N")), ir.IntType(8))
                 for t in (ty, tx)]
        name, ity = _GEMM[out.type.dtype]
        ints = [ref(self._size(v) if ity is I64 else self._size32(v), ity) for v in (
            n, m, k, max(1, k if ty else n), max(1, m if tx else k), max(1, n))]
        one, zero = (ref(sc.constant(c, out.type), ety) for c in (1.0, 0.0))
        xp, yp, cp = (self._typed(p, out.type) for p in (self.vals[x], self.vals[y], dst))
        batch = out.type.shape[:-2]

        def call(xm, ym, cm):
            args = [flags[0], flags[1], ints[0], ints[1], ints[2], one, ym, ints[3],
                    xm, ints[4], zero, cm, ints[5]]
            b.call(self._declare(name, ir.VoidType(), [a.type for a in args]), args)

        count = math.prod(batch)
        if count == 1:
            call(xp, yp, cp)
        else:
            xo, yo = (self._table(_batch_offsets(batch, v.type.shape)) for v in (x, y))
            def each(b, idx):
                i = idx[0]
                call(b.gep(xp, [b.load(b.gep(xo, [i]))]), b.gep(yp, [b.load(b.gep(yo, [i]))]),
                     b.gep(cp, [b.mul(i, mn)]))

            mn = self._size(m * n)
            loop_nest(b, b.function, (self._size(count),), each)  # the builder goes on
        self.vals[out] = dst

    def _narrow_product(self, op: Op, tx: bool, dst) -> None:
        """A product with a narrow result by ``smallmm``'s loop (``x`` read transposed
        from its stored form if ``tx``)."""
        out, (x, y) = op.results[0], op.operands
        m, k = x.type.shape
        n = y.type.shape[-1]
        dtype = out.type.dtype
        blocking = (dtype, *smallmm.blocking(dtype, n))
        ptrs = [self._typed(p, out.type) for p in (self.vals[x], self.vals[y], dst)]
        strides = (1, m) if tx else (k, 1)
        args = [*ptrs, *(self._size(v) for v in (m, n, k, *strides))]
        sym = smallmm.symbol(*blocking)
        self.b.call(self._declare(sym, ir.VoidType(), [a.type for a in args]), args)
        self.narrow_loops[sym] = blocking  # (a runtime module: ``smallmm.ensure``)
        self.vals[out] = dst
