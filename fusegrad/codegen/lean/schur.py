"""``sylvester`` in an entry: ``scipy.linalg.solve_sylvester``'s calls, in its order, from
a loop function over the batch (``lapack.py`` has the calling machinery).

For each ``a x + x b = q`` (``a`` M x M, ``b`` N x N), as SciPy does:

- ``r, u = schur(a)``: ``a`` must be finite (``ValueError``, ``asarray_chkfinite``'s
  message), copied in Fortran order, ``?gees`` (Schur vectors, no sorting) with the
  workspace its query asked for (``LinAlgError`` if it fails);
- ``s, v = schur(b^T)``: the same on ``b``'s C-ordered data, which is ``b^T`` in
  Fortran order;
- ``f = (u^T q) v``, two ``np.dot`` (``npdot``: NumPy's own BLAS calls for these
  layouts);
- ``y, scale = ?trsyl('N', 'C', 1, r, s, f)`` on ``f`` copied in Fortran order, then
  ``y = scale * y``;
- ``x = (u y) v^T``, two more ``np.dot``.

LAPACK is SciPy's (LP64), the products NumPy's ILP64 OpenBLAS, in the operands' dtype
(float32 stays float32, as SciPy's ``s`` routines), so the bits are SciPy's. Empty
matrices are left to NumPy (``lowered``).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from . import lapack, npdot
from . import scalar as sc
from .kernel import I64, PTR, loop_nest
from .lapack import _ZERO, I32, _Fortran, _transpose

LOWERED = ("sylvester",)
#: the ``LinAlgError`` of a failed Schur decomposition (as ``lapack.ERRORS``)
ERRORS = {"sylvester": (8, "Schur form not found. Possibly ill-conditioned.",
                        "Schur form not found. Possibly ill-conditioned.")}
#: the ``ValueError`` of a matrix that is not finite: (code, message)
NOT_FINITE = (9, "array must not contain infs or NaNs")


def lowered(op: Op) -> bool:
    """Real float32 / float64 matrices, none empty, with NumPy's bundled BLAS."""
    return (lapack.lowered(op) and npdot.available()
            and all(0 not in v.type.shape[-2:] for v in op.operands))


def work(op: Op) -> int:
    *batch, m, n = op.operands[2].type.shape
    return math.prod(batch) * (m ** 3 + n ** 3 + m * n * (m + n))


class Schur:
    """Mixed into ``entry.Entry`` after ``lapack.Lapack``."""

    def _sylvester(self, op: Op) -> None:
        t = op.operands[2].type
        *batch, m, n = t.shape
        out = self._place(op.results[0])

        def place(elements):
            return self._typed(self._scratch(elements * t.dtype.itemsize), t)
        k = max(m, n)
        args = [*(self._typed(self.vals[v], t) for v in op.operands), self._typed(out, t),
                *(place(e) for e in (m * m, m * m, n * n, n * n, m * n, m * n, k, k)),
                self.b.bitcast(self._scratch(4 * k), I32.as_pointer()),
                *(self._size(v) for v in (m, n, math.prod(batch)))]
        status = self._helper(args, lambda f: _loop(f, t.dtype, m == 1, n == 1), I64)
        b = self.b
        code, message = NOT_FINITE
        with b.if_then(b.icmp_signed("<", status, _ZERO), likely=False):
            self._leave(code, lambda: self._raise_value(message))
        self._status(op, status, ERRORS[op.name])
        self.vals[op.results[0]] = out

    def _raise_value(self, message: str) -> None:
        """Set ``ValueError`` with ``message``."""
        exc = self.mod.globals.get("fusegrad_PyExc_ValueError") or ir.GlobalVariable(
            self.mod, PTR, "fusegrad_PyExc_ValueError")  # registered by ``engine``
        fmt = self.mod.globals.get("PyErr_Format") or ir.Function(
            self.mod, ir.FunctionType(PTR, [PTR, PTR], var_arg=True), "PyErr_Format")
        self.b.call(fmt, [self.b.load(exc), self._string(message)])


def leave_unless_finite(F: _Fortran, b, x, off, count, block=None) -> None:
    """Return -1 from the loop (after freeing ``block``, if given) unless the ``count``
    elements at ``x + off`` are finite."""

    def each(b, idx):
        v = b.load(b.gep(x, [b.add(off, idx[0])]))
        with b.if_then(b.not_(sc.isfinite(b, None, [v])), likely=False):
            if block is not None:
                F.free(b, block)
            b.ret(ir.Constant(I64, -1))
    loop_nest(b, F.f, (count,), each)


def _loop(f: ir.Function, dtype, m_one: bool, n_one: bool) -> None:
    (a, bm, q, out, r, u, s, v, t1, fw, wr, wi, bwork, m, n, count) = f.args
    F = _Fortran(f, I32, dtype)
    b = F.b
    ety = r.type.pointee
    gees = F.routine("gees", "ccpiaiiaaaiaipi")
    trsyl = F.routine("trsyl", "cciiiaiaiaiai")
    jobvs, sort, tr_n, tr_c = F.char("V"), F.char("N"), F.char("N"), F.char("C")
    select = ir.Constant(I32.as_pointer(), None)  # not called without sorting
    m_, n_, lm, ln, one = F.int(m), F.int(n), F.lead(m), F.lead(n), F.int(ir.Constant(I64, 1))
    sdim, info = F.info(), F.info()
    query, minus = b.alloca(ety), F.int(ir.Constant(I64, -1))
    scale = b.alloca(ety)

    def schur(size_, lead, t, z, work_, lwork):
        F.call(gees, [jobvs, sort, select, size_, t, lead, sdim, wr, wi, z, lead, work_,
                      lwork, bwork, info], 2)

    schur(m_, lm, r, u, query, minus)
    lw_a = F.workspace(b, query)
    schur(n_, ln, s, v, query, minus)
    lw_b = F.workspace(b, query)
    most = b.select(b.icmp_signed("<", lw_a, lw_b), lw_b, lw_a)
    block = F.malloc(b, b.mul(most, ir.Constant(I64, np.dtype(dtype).itemsize)))
    work_ = b.bitcast(block, ety.as_pointer())
    la, lb = F.int(lw_a), F.int(lw_b)
    mm, nn, mn = b.mul(m, m), b.mul(n, n), b.mul(m, n)

    operand = npdot.Operand  # (pointer, rows, columns, 1 row, 1 column, Fortran order)

    def each(b, idx):
        i = idx[0]
        leave_unless_finite(F, b, a, b.mul(i, mm), mm, block)
        _transpose(b, f, r, a, m, m, _ZERO, b.mul(i, mm))
        schur(m_, lm, r, u, work_, la)
        F.fail_if(b, info, block)
        leave_unless_finite(F, b, bm, b.mul(i, nn), nn, block)
        _transpose(b, f, s, bm, ir.Constant(I64, 1), nn, _ZERO, b.mul(i, nn),
                   dst_ld=ir.Constant(I64, 1))  # (a plain copy: b^T in Fortran order)
        schur(n_, ln, s, v, work_, lb)
        F.fail_if(b, info, block)
        ut = operand(u, m, m, m_one, m_one, False)  # u^T: u's data read in C order
        qi = operand(b.gep(q, [b.mul(i, mn)]), m, n, m_one, n_one, False)
        npdot.dot(b, dtype, ut, qi, t1)
        res = b.gep(out, [b.mul(i, mn)])  # (the C-ordered f, before its Fortran copy)
        npdot.dot(b, dtype, operand(t1, m, n, m_one, n_one, False),
                  operand(v, n, n, n_one, n_one, True), res)
        _transpose(b, f, fw, res, m, n, _ZERO, _ZERO)
        F.call(trsyl, [tr_n, tr_c, one, m_, n_, r, lm, s, ln, fw, lm, scale, info], 2)
        k = b.load(scale)

        def scaled(b, j):
            at = b.gep(fw, [j[0]])
            b.store(b.fmul(k, b.load(at)), at)
        loop_nest(b, f, (mn,), scaled)
        npdot.dot(b, dtype, operand(u, m, m, m_one, m_one, True),
                  operand(fw, m, n, m_one, n_one, True), t1)
        npdot.dot(b, dtype, operand(t1, m, n, m_one, n_one, False),
                  operand(v, n, n, n_one, n_one, False), res)  # v^T: v read in C order
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)
    b.ret(_ZERO)
