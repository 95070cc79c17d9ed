"""The loops of ``eigh`` and ``svd`` of complex matrices (``decompositions.py`` calls them;
``lapack.py`` has the calling machinery), as ``np.linalg`` computes them.

NumPy computes complex64 matrices in complex128, as it computes float32 in float64:
each matrix is copied in Fortran order as complex128 (``lapack._transpose`` widens
complex64), LAPACK's answers are copied back rounded to the results' dtypes (the
eigenvalues and singular values real). The workspaces are NumPy's:

- ``eigh``: ``zheevd`` (eigenvectors, lower triangle), its three workspaces of the
  sizes its query gives (``lwork = -1``, ``lrwork = -1``, ``liwork = -1``; the complex
  size's real part);
- ``svd``: ``zgesdd`` (``jobz`` ``'A'`` for full matrices, else ``'S'``), ``work`` of
  the size its query gives, ``rwork`` of LAPACK's documented size (it only holds
  intermediate values), ``iwork`` of ``8 min(m, n)``.

Each workspace is one ``malloc`` block, asked for before the loop and freed before it
returns.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .kernel import I64, loop_nest
from .lapack import _ZERO, _Fortran, _transpose, eigh_loop

_F64 = ir.DoubleType()
_C128 = ir.LiteralStructType([_F64, _F64])
_ONE = ir.Constant(I64, 1)


def _query(F: _Fortran):
    """A complex workspace query's reference and a reference to its real part."""
    slot = F.b.alloca(_C128)
    return slot, F.b.gep(slot, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 0)])


def _bytes(b, count, size: int) -> ir.Value:
    return b.mul(count, ir.Constant(I64, size))


def heevd(f: ir.Function, it) -> None:
    """``eigh``'s loop: 0, or ``zheevd``'s ``info`` if it fails."""
    _, _, _, aw, ww, n, _ = f.args
    F = _Fortran(f, it, np.complex128)
    b = F.b
    heevd_ = F.routine("heevd", "cciairairipii")
    jobz, uplo, n_, lda, info = F.char("V"), F.char("L"), F.int(n), F.lead(n), F.info()
    qwork, qwork_re = _query(F)
    qrwork, qiwork, minus = b.alloca(_F64), b.alloca(it), F.int(ir.Constant(I64, -1))
    F.call(heevd_, [jobz, uplo, n_, aw, lda, ww, qwork, minus, qrwork, minus, qiwork, minus,
                    info], 2)
    lwork, lrwork, liwork = F.workspace(b, qwork_re), F.workspace(b, qrwork), F.read(b, qiwork)
    rbytes = _bytes(b, lwork, 16)
    ibytes = b.add(rbytes, _bytes(b, lrwork, 8))
    block = F.malloc(b, b.add(ibytes, _bytes(b, liwork, it.width // 8)))
    work_ = b.bitcast(block, _C128.as_pointer())
    rwork = b.bitcast(b.gep(block, [rbytes]), _F64.as_pointer())
    iwork = b.bitcast(b.gep(block, [ibytes]), it.as_pointer())
    lw, lrw, liw = F.int(lwork), F.int(lrwork), F.int(liwork)
    eigh_loop(F, block, [jobz, uplo, n_, aw, lda, ww, work_, lw, rwork, lrw, iwork, liw, info],
              heevd_)


def gesdd(f: ir.Function, it, full: bool) -> None:
    """``svd``'s loop: 0, or ``zgesdd``'s ``info`` if it fails."""
    a, u_out, s_out, vt_out, aw, uw, sw, vtw, m, n, count = f.args
    F = _Fortran(f, it, np.complex128)
    b = F.b
    gesdd_ = F.routine("gesdd", "ciiairaiaiairpi")
    k = b.select(b.icmp_signed("<", m, n), m, n)
    most = b.select(b.icmp_signed("<", m, n), n, m)
    ucols, vrows = (m, n) if full else (k, k)
    jobz, m_, n_, info = F.char("A" if full else "S"), F.int(m), F.int(n), F.info()
    lda, ldvt = F.lead(m), F.lead(vrows)
    # rwork: max(5 k^2 + 5 k, 2 max(m, n) k + 2 k^2 + k) reals (LAPACK's bound)
    kk = b.mul(k, k)
    small = b.add(b.mul(kk, ir.Constant(I64, 5)), b.mul(k, ir.Constant(I64, 5)))
    large = b.add(b.mul(b.add(b.mul(most, k), kk), ir.Constant(I64, 2)), k)
    lrwork = b.select(b.icmp_signed("<", small, large), large, small)
    qwork, qwork_re = _query(F)
    rwork_q, iwork_q = b.alloca(_F64), b.alloca(it)  # (not read by a query)
    F.call(gesdd_, [jobz, m_, n_, aw, lda, sw, uw, lda, vtw, ldvt, qwork,
                    F.int(ir.Constant(I64, -1)), rwork_q, iwork_q, info], 1)
    lwork = F.workspace(b, qwork_re)
    rbytes = _bytes(b, lwork, 16)
    ibytes = b.add(rbytes, _bytes(b, lrwork, 8))
    block = F.malloc(b, b.add(ibytes, _bytes(b, k, 8 * (it.width // 8))))
    work_ = b.bitcast(block, _C128.as_pointer())
    rwork = b.bitcast(b.gep(block, [rbytes]), _F64.as_pointer())
    iwork = b.bitcast(b.gep(block, [ibytes]), it.as_pointer())
    lw = F.int(lwork)
    mn = b.mul(m, n)

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, aw, a, m, n, _ZERO, b.mul(i, mn))
        F.call(gesdd_, [jobz, m_, n_, aw, lda, sw, uw, lda, vtw, ldvt, work_, lw, rwork, iwork,
                        info], 1)
        F.fail_if(b, info, block)
        _transpose(b, f, u_out, uw, ucols, m, b.mul(i, b.mul(m, ucols)), _ZERO)
        _transpose(b, f, s_out, sw, _ONE, k, b.mul(i, k), _ZERO)
        _transpose(b, f, vt_out, vtw, n, vrows, b.mul(i, b.mul(vrows, n)), _ZERO)
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)
    b.ret(_ZERO)
