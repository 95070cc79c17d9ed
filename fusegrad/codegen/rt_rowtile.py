"""Helpers of the row-tile kernels (``codegen.rowtile_emit``): a row's dot product with a
vector and a row added, scaled, into an accumulator.

Both are inlined by LLVM into the generated loop. The dot product may reassociate its
sum (``fastmath={"reassoc", "contract"}``) so that it vectorises; the order is fixed by
the machine code, not by the thread count, so a result is the same on every call.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .inline import InlineDispatcher

#: rows of a block: the unit of parallel work and of the partial sums, fixed so that
#: results never depend on the number of threads
BLOCK_ROWS = 4096

#: bytes of a tile of rows: it stays in the L1 data cache between its two uses
TILE_BYTES = 16384

#: how far ahead of the row being read the kernel prefetches: without it, a core stops
#: asking memory for data while it computes a tile's loop and its update of g. Rows of
#: 100 float32 (2.5e6 rows, one thread): alone 25 -> 30 GB/s; two processes together,
#: 35 -> 43 GB/s. 6.4 and 9.6 kB ahead did as well, 1.6 and 3.2 kB less.
PREFETCH_BYTES = 8192

#: rows shorter than this are not prefetched: their per-row loop (exp, log...) costs
#: more than their bytes, memory keeps up, and the prefetches only add work. Measured on
#: 400 MB of data, one thread, prefetch against none: float32 rows of 25, 50, 100, 200
#: items 0.84x, 0.94x, 1.13x, 1.26x; float64 0.91x, 0.85x, 1.10x, 1.16x.
PREFETCH_MIN_ITEMS = 96

#: at most this many rows per tile (the per-row work has a few per-tile buffers)
TILE_ROWS_MAX = 16

#: rows of at most this many items get a dot product and update with the length in
#: the text (LLVM then vectorises the whole row, remainder included)
LITERAL_ROW_MAX = 4096


def fast_inline(py_func):
    """A Numba function, inlined by LLVM into its callers, whose sums may reassociate."""
    disp = InlineDispatcher(py_func, targetoptions={
        "nopython": True, "error_model": "numpy", "fastmath": {"reassoc", "contract"}})
    disp.enable_caching()
    return disp


def _inline(py_func):
    disp = InlineDispatcher(py_func, targetoptions={"nopython": True, "error_model": "numpy"})
    disp.enable_caching()
    return disp


@fast_inline
def dot_row(X, i, w, zero):
    """``X[i] @ w``."""
    acc = zero
    for j in range(w.size):
        acc += X[i, j] * w[j]
    return acc


@fast_inline
def axpy_row(g, a, X, i):
    """``g += a * X[i]``."""
    for j in range(g.size):
        g[j] += a * X[i, j]


@fast_inline
def axpy4_rows(g, r, k, X, i):
    """``g += r[k:k + 4] @ X[i:i + 4]``."""
    r0, r1, r2, r3 = r[k], r[k + 1], r[k + 2], r[k + 3]
    for j in range(g.size):
        g[j] += (r0 * X[i, j] + r1 * X[i + 1, j]) + (r2 * X[i + 2, j] + r3 * X[i + 3, j])


@intrinsic
def prefetch(typingctx, arr, offset):
    """Ask the CPU to fetch the cache line ``offset`` bytes into ``arr``'s data into its
    caches: a hint, which never faults, whatever the address."""
    sig = types.void(arr, types.intp)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        i32, i8p = ir.IntType(32), ir.IntType(8).as_pointer()
        addr = builder.add(builder.ptrtoint(a.data, ir.IntType(64)), args[1])
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0")
        builder.call(fn, [builder.inttoptr(addr, i8p), i32(0), i32(3), i32(1)])  # read, keep
        return context.get_dummy_value()

    return sig, codegen


@_inline
def prefetch_ahead(X, i, ahead):
    """Prefetch the cache lines that begin in row ``i`` of C-contiguous ``X`` moved
    ``ahead`` bytes on: each line of ``X`` once over the rows, whatever their width."""
    row = X.shape[1] * X.itemsize
    lo = i * row + ahead
    end = min(lo + row, X.shape[0] * row)
    for b in range((lo + 63) // 64 * 64, end, 64):
        prefetch(X, b)


@_inline
def tile_rows(d, itemsize):
    """Rows per tile for rows of ``d`` items of ``itemsize`` bytes."""
    return max(1, min(TILE_ROWS_MAX, TILE_BYTES // max(1, d * itemsize)))


@_inline
def block_sum(parts, zero):
    """The blocks' partial vectors (rows of ``parts``) added in block order."""
    out = np.empty(parts.shape[1], parts.dtype)
    for j in range(parts.shape[1]):
        out[j] = zero
    for b in range(parts.shape[0]):
        for j in range(parts.shape[1]):
            out[j] += parts[b, j]
    return out
