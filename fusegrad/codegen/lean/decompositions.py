"""Matrix decompositions in an entry: ``eigh``, ``svd``, ``qr`` and ``eig`` of real
matrices by LAPACK, as ``np.linalg`` computes them (``lapack.py`` has the simpler ops
and the calling machinery; ``zlapack.py`` the loops of complex ``eigh`` and ``svd``).

As NumPy does, each loop asks LAPACK for its workspace's size first (``lwork = -1``)
and gives it that much (from ``malloc``, freed before the loop returns), copies each
matrix in Fortran order (float32 converted to float64), and copies the answers back:

- ``eigh``: ``?syevd`` (eigenvectors, lower triangle);
- ``svd``: ``?gesdd`` (``jobz`` ``'A'`` for full matrices, else ``'S'``);
- ``qr``: ``?geqrf``, ``r`` the upper triangle of its first ``k`` rows, then ``?orgqr``
  on the first columns for ``q`` (``k = m`` when complete, else ``min(m, n)``);
- ``eig``: every matrix of the stack must be finite (else NumPy's ``LinAlgError``,
  before any is decomposed), then ``?geev`` (right eigenvectors only), its real
  answers made complex as NumPy does: eigenvalue ``k`` is ``(wr[k], wi[k])``; a real
  one's eigenvector is column ``k`` (imaginary parts 0), a complex pair's columns
  ``k``, ``k + 1`` are ``re +- i im`` from columns ``k`` and ``k + 1``; if every
  eigenvalue of the stack is real, their imaginary parts are +0 (NumPy returns real
  arrays then, which ``eig_impl`` makes complex).

Matrices with an extent of 0 are left to NumPy (``lowered``).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from . import eigen, lapack, schur, zlapack
from .kernel import I64, loop_nest
from .lapack import _ZERO, I32, _Fortran, _transpose, wide

LOWERED = ("eigh", "svd", "qr", "eig")
#: each op's ``LinAlgError`` (as ``lapack.ERRORS``; with ``schur.py``'s)
ERRORS = {**schur.ERRORS,
    "eigh": (5, "Eigenvalues did not converge", "Eigenvalues did not converge"),
    "svd": (6, "SVD did not converge", "SVD did not converge"),
    "qr": (7, "Incorrect argument found while performing QR factorization",
           "Incorrect argument found while performing QR factorization"),
    "eig": (10, "Eigenvalues did not converge", "Eigenvalues did not converge"),
}
#: ``eig``'s ``LinAlgError`` for a matrix that is not finite: (code, message)
EIG_NOT_FINITE = (11, "Array must not contain infs or NaNs")
_F64 = ir.DoubleType()


def lowered(op: Op) -> bool:
    """Real float32 / float64 (``lapack.lowered``; complex64 / complex128 too for
    ``eigh`` and ``svd``) matrices of no empty axis; ``eig``'s results are complex, of
    the matrix's precision."""
    if 0 in op.operands[0].type.shape[-2:]:
        return False
    if op.name != "eig":
        return lapack.lowered(op)
    t = op.operands[0].type.dtype
    return t in (np.float32, np.float64) and all(
        r.type.dtype == np.result_type(t, np.complex64) for r in op.results)


def work(op: Op) -> int:
    *batch, m, n = op.operands[0].type.shape
    return math.prod(batch) * m * n * min(m, n)


class Decompositions:
    """Mixed into ``entry.Entry`` after ``lapack.Lapack``."""

    def _decomposition(self, op: Op) -> None:
        t = op.operands[0].type
        it = I64 if wide(op) else I32
        outs = [self._place(r) for r in op.results]
        extra, build = arguments(op, self, it)
        args = [self._typed(self.vals[op.operands[0]], t),
                *(self._typed(o, r.type) for o, r in zip(outs, op.results)), *extra]
        status = self._helper(args, lambda f: build(f, it), I64)
        if op.name == "eig":
            b = self.b
            code, message = EIG_NOT_FINITE
            with b.if_then(b.icmp_signed("<", status, _ZERO), likely=False):
                self._leave(code, lambda: self._raise_linalg(message, None))
        self._status(op, status, ERRORS[op.name])
        for r, o in zip(op.results, outs):
            self.vals[r] = o


def arguments(op: Op, entry, it) -> tuple[list, object]:
    """The loop's arguments after the operand and the results (arena places for the
    Fortran copies, then the sizes) and its builder, for ``entry`` (an ``Entry``)."""
    *batch, m, n = op.operands[0].type.shape
    k = min(m, n)
    w = lapack.working(op.operands[0].type.dtype)
    cplx = w.kind == "c"

    def place(elements, real=False):
        dt = np.dtype(np.float64) if real else w
        return entry._typed(entry._scratch(elements * dt.itemsize), dt)
    sizes = [entry._size(v) for v in (m, n, math.prod(batch))]
    if op.name == "eigh":
        return [place(n * n), place(n, True), *sizes[1:]], zlapack.heevd if cplx else _eigh
    if op.name == "eig":
        return [place(n * n), place(n), place(n), place(n * n), *sizes[1:]], eigen.geev
    if op.name == "svd":
        full = bool(op.attrs["full_matrices"])
        ucols, vrows = (m, n) if full else (k, k)
        loop = zlapack.gesdd if cplx else _svd
        return ([place(m * n), place(m * ucols), place(k, True), place(vrows * n), *sizes],
                lambda f, it: loop(f, it, full))
    complete = bool(op.attrs["complete"])
    qcols = m if complete else k
    return [place(m * n), place(m * qcols), place(k), *sizes], lambda f, it: _qr(f, it, complete)


def _query(F: _Fortran) -> tuple[ir.Value, ir.Value, ir.Value]:
    """References for a workspace query: the float size, the integer size, -1."""
    return (F.b.alloca(_F64), F.b.alloca(F.it), F.int(ir.Constant(I64, -1)))


def _eigh(f: ir.Function, it) -> None:
    _, _, _, aw, ww, n, _ = f.args
    F = _Fortran(f, it, np.float64)
    b = F.b
    syevd = F.routine("syevd", "cciaiaaipii")
    jobz, uplo, n_, lda, info = F.char("V"), F.char("L"), F.int(n), F.lead(n), F.info()
    qwork, qiwork, minus = _query(F)
    F.call(syevd, [jobz, uplo, n_, aw, lda, ww, qwork, minus, qiwork, minus, info], 2)
    lwork = F.workspace(b, qwork)
    liwork = F.read(b, qiwork)
    block = F.malloc(b, b.add(b.mul(lwork, ir.Constant(I64, 8)),
                              b.mul(liwork, ir.Constant(I64, it.width // 8))))
    work_ = b.bitcast(block, _F64.as_pointer())
    iwork = b.bitcast(b.gep(work_, [lwork]), it.as_pointer())
    lw, liw = F.int(lwork), F.int(liwork)
    lapack.eigh_loop(F, block, [jobz, uplo, n_, aw, lda, ww, work_, lw, iwork, liw, info],
                     syevd)


def _svd(f: ir.Function, it, full: bool) -> None:
    a, u_out, s_out, vt_out, aw, uw, sw, vtw, m, n, count = f.args
    F = _Fortran(f, it, np.float64)
    b = F.b
    gesdd = F.routine("gesdd", "ciiaiaaiaiaipi")
    k = b.select(b.icmp_signed("<", m, n), m, n)
    ucols, vrows = (m, n) if full else (k, k)
    jobz, m_, n_, info = F.char("A" if full else "S"), F.int(m), F.int(n), F.info()
    lda, ldvt = F.lead(m), F.lead(vrows)
    qwork, qiwork, minus = _query(F)
    F.call(gesdd, [jobz, m_, n_, aw, lda, sw, uw, lda, vtw, ldvt, qwork, minus, qiwork,
                   info], 1)
    lwork = F.workspace(b, qwork)
    block = F.malloc(b, b.add(b.mul(lwork, ir.Constant(I64, 8)),
                              b.mul(b.mul(k, ir.Constant(I64, 8)),
                                    ir.Constant(I64, it.width // 8))))
    work_ = b.bitcast(block, _F64.as_pointer())
    iwork = b.bitcast(b.gep(work_, [lwork]), it.as_pointer())
    lw = F.int(lwork)
    mn = b.mul(m, n)

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, aw, a, m, n, _ZERO, b.mul(i, mn))
        F.call(gesdd, [jobz, m_, n_, aw, lda, sw, uw, lda, vtw, ldvt, work_, lw, iwork, info],
               1)
        F.fail_if(b, info, block)
        _transpose(b, f, u_out, uw, ucols, m, b.mul(i, b.mul(m, ucols)), _ZERO)
        _transpose(b, f, s_out, sw, ir.Constant(I64, 1), k, b.mul(i, k), _ZERO)
        _transpose(b, f, vt_out, vtw, n, vrows, b.mul(i, b.mul(vrows, n)), _ZERO)
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)
    b.ret(_ZERO)


def _qr(f: ir.Function, it, complete: bool) -> None:
    a, q_out, r_out, aw, qw, tau, m, n, count = f.args
    F = _Fortran(f, it, np.float64)
    b = F.b
    geqrf = F.routine("geqrf", "iiaiaaii")
    orgqr = F.routine("orgqr", "iiiaiaaii")
    k = b.select(b.icmp_signed("<", m, n), m, n)
    qcols = m if complete else k
    m_, n_, k_, qc, lda, info = F.int(m), F.int(n), F.int(k), F.int(qcols), F.lead(m), F.info()
    qwork, _, minus = _query(F)
    F.call(geqrf, [m_, n_, aw, lda, tau, qwork, minus, info])
    lw_r = F.workspace(b, qwork)
    F.call(orgqr, [m_, qc, k_, qw, lda, tau, qwork, minus, info])
    lw_q = F.workspace(b, qwork)
    most = b.select(b.icmp_signed("<", lw_r, lw_q), lw_q, lw_r)
    block = F.malloc(b, b.mul(most, ir.Constant(I64, 8)))
    work_ = b.bitcast(block, _F64.as_pointer())
    lr, lq = F.int(lw_r), F.int(lw_q)
    mn = b.mul(m, n)
    kept = b.select(b.icmp_signed("<", n, qcols), n, qcols)  # columns of A q starts from

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, aw, a, m, n, _ZERO, b.mul(i, mn))
        F.call(geqrf, [m_, n_, aw, lda, tau, work_, lr, info])
        F.fail_if(b, info, block)
        # r: the upper triangle of the first qcols rows (Fortran, leading dimension m)
        _transpose(b, f, r_out, aw, n, qcols, b.mul(i, b.mul(qcols, n)), _ZERO, zero="c>r",
                   src_ld=m, dst_ld=n)
        _transpose(b, f, qw, aw, ir.Constant(I64, 1), b.mul(kept, m), _ZERO, _ZERO,
                   dst_ld=ir.Constant(I64, 1))  # (a plain copy)
        F.call(orgqr, [m_, qc, k_, qw, lda, tau, work_, lq, info])
        F.fail_if(b, info, block)
        _transpose(b, f, q_out, qw, qcols, m, b.mul(i, b.mul(m, qcols)), _ZERO)
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)
    b.ret(_ZERO)
