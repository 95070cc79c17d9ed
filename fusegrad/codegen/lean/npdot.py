"""``np.dot`` of two real matrices inside a loop function, as NumPy computes it: the
same CBLAS routine of NumPy's bundled ILP64 OpenBLAS with the same arguments, so the
same bits.

NumPy (``cblas_matrixproduct``) chooses by the operands' shapes: a 1 x 1 operand is a
scalar (one multiplication, or ``?axpy`` into the zeroed result), a vector times a
matrix or a matrix times a vector is ``?gemv``, two matrices ``?gemm``, with the
transpose flags and leading dimensions read from each operand's layout (C or Fortran
order). The shapes' extents of 1 are known when the loop is built (``Operand``); the
others are its run-time sizes. The routines are linked as ``fusegrad_cblas64_<name>``
(``symbols.provide``: ``cblas64:<name>``).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import scalar as sc
from . import symbols

I32, I64, PTR = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
_ROW_MAJOR, _COL_MAJOR, _NO_TRANS, _TRANS = 101, 102, 111, 112


def available() -> bool:
    """Whether NumPy's products run on the OpenBLAS its wheels bundle (whose CBLAS this
    module calls)."""
    lib = symbols.numpy_blas()
    return lib is not None and hasattr(lib, "scipy_cblas_dgemm64_")


class Operand:
    """A matrix in memory: ``ptr``, its extents ``rows``, ``cols`` (i64 values),
    whether each is 1 (known when the loop is built), and its layout. (A plain class:
    ``dataclasses`` costs a first gradient's import its own milliseconds.)"""

    __slots__ = ("cols", "fortran", "one_col", "one_row", "ptr", "rows")

    def __init__(self, ptr: ir.Value, rows: ir.Value, cols: ir.Value, one_row: bool,
                 one_col: bool, fortran: bool):
        self.ptr, self.rows, self.cols = ptr, rows, cols
        self.one_row, self.one_col, self.fortran = one_row, one_col, fortran

    @property
    def shape(self) -> str:
        """NumPy's class of the matrix: ``scalar``, ``column``, ``row`` or ``matrix``."""
        if not self.one_row:
            return "column" if self.one_col else "matrix"
        return "scalar" if self.one_col else "row"

    def stride(self, axis: int):
        """The element stride along ``axis`` (for an axis of more than one element)."""
        if self.fortran:
            return ir.Constant(I64, 1) if axis == 0 else self.rows
        return self.cols if axis == 0 else ir.Constant(I64, 1)

    def c_contiguous(self) -> bool:
        return not self.fortran or self.one_row or self.one_col

    def f_contiguous(self) -> bool:
        return self.fortran or self.one_row or self.one_col


def _routine(b: ir.IRBuilder, name: str, ret, args) -> ir.Function:
    mod = b.module
    sym = f"fusegrad_cblas64_{name}"
    return mod.globals.get(sym) or ir.Function(mod, ir.FunctionType(ret, args), sym)


def _lead(b, n):
    one = ir.Constant(I64, 1)
    return b.select(b.icmp_signed(">", n, one), n, one)


def dot(b: ir.IRBuilder, dtype, x: Operand, y: Operand, out: ir.Value) -> None:
    """``out = np.dot(x, y)`` (``out`` C-ordered, ``x.rows`` x ``y.cols``)."""
    ety = sc.mem_type(np.dtype(dtype))
    p = "d" if np.dtype(dtype) == np.float64 else "s"
    fp = ety.as_pointer()
    size = b.mul(x.rows, y.cols)
    memset = b.module.globals.get("llvm.memset.p0i8.i64") or ir.Function(
        b.module, ir.FunctionType(ir.VoidType(), [PTR, ir.IntType(8), I64, ir.IntType(1)]),
        "llvm.memset.p0i8.i64")
    b.call(memset, [b.bitcast(out, PTR), ir.Constant(ir.IntType(8), 0),
                    b.mul(size, ir.Constant(I64, np.dtype(dtype).itemsize)),
                    ir.Constant(ir.IntType(1), 0)])
    sx, sy = x.shape, y.shape
    if "scalar" in (sx, sy):
        vec, one = (y, x) if sx == "scalar" else (x, y)
        single = (vec.one_col if vec.shape == "row" else vec.one_row)
        alpha = b.load(one.ptr)
        if single:  # both 1 x 1
            b.store(b.fmul(alpha, b.load(vec.ptr)), out)
            return
        if vec.shape == "matrix":
            raise NotImplementedError("np.dot of a matrix by a 1 x 1 matrix")
        n = vec.cols if vec.shape == "row" else vec.rows
        step = vec.stride(1 if vec.shape == "row" else 0)
        axpy = _routine(b, p + "axpy", ir.VoidType(), [I64, ety, fp, I64, fp, I64])
        b.call(axpy, [n, alpha, vec.ptr, step, out, ir.Constant(I64, 1)])
        return
    if sy == "column" and sx != "matrix":
        raise NotImplementedError("np.dot of two vectors")
    zero, one = ir.Constant(ety, 0.0), ir.Constant(ety, 1.0)
    if (sx == "matrix") != (sy == "matrix"):  # a matrix and a vector: gemv
        mat, vec = (x, y) if sx == "matrix" else (y, x)
        order, lda = ((_ROW_MAJOR, _lead(b, mat.cols)) if mat.c_contiguous()
                      else (_COL_MAJOR, _lead(b, mat.rows)))
        step = vec.stride(1 if vec.shape == "row" else 0)
        gemv = _routine(b, p + "gemv", ir.VoidType(),
                        [I32, I32, I64, I64, ety, fp, I64, fp, I64, ety, fp, I64])
        trans = _NO_TRANS if sx == "matrix" else _TRANS
        b.call(gemv, [ir.Constant(I32, order), ir.Constant(I32, trans), mat.rows, mat.cols,
                      one, mat.ptr, lda, vec.ptr, step, zero, out, ir.Constant(I64, 1)])
        return
    flags = []
    for m in (x, y):
        if m.f_contiguous():
            flags.append((_TRANS, _lead(b, m.rows)))
        else:
            flags.append((_NO_TRANS, _lead(b, m.cols)))
    (t1, lda), (t2, ldb) = flags
    gemm = _routine(b, p + "gemm", ir.VoidType(),
                    [I32, I32, I32, I64, I64, I64, ety, fp, I64, fp, I64, ety, fp, I64])
    b.call(gemm, [ir.Constant(I32, _ROW_MAJOR), ir.Constant(I32, t1), ir.Constant(I32, t2),
                  x.rows, y.cols, y.rows, one, x.ptr, lda, y.ptr, ldb, zero, out,
                  _lead(b, y.cols)])
