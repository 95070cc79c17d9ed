"""``eig``'s loop: ``np.linalg.eig`` of a stack of real matrices (``decompositions.py``
describes it and calls ``geev``)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from .kernel import I64, loop_nest
from .lapack import _ZERO, _Fortran, _transpose
from .schur import leave_unless_finite

_F64 = ir.DoubleType()
_ONE = ir.Constant(I64, 1)


def geev(f: ir.Function, it) -> None:
    """The loop: -1 if a matrix is not finite, ``?geev``'s ``info`` if it fails, else 0
    with the eigenvalues and eigenvectors written as complex numbers (each a pair of
    the results' part type: real part first)."""
    a, w_struct, v_struct, aw, wr, wi, vrr, n, count = f.args
    F = _Fortran(f, it, np.float64)
    b = F.b
    part = w_struct.type.pointee.elements[0]
    w_out, v_out = (b.bitcast(p, part.as_pointer()) for p in (w_struct, v_struct))
    nn = b.mul(n, n)
    leave_unless_finite(F, b, a, _ZERO, b.mul(nn, count))  # (the whole stack first)
    geev_ = F.routine("geev", "cciaiaaaiaiaii")
    jobvl, jobvr, n_, ld, info = F.char("N"), F.char("V"), F.int(n), F.lead(n), F.info()
    query = b.alloca(_F64)
    F.call(geev_, [jobvl, jobvr, n_, aw, ld, wr, wi, vrr, ld, vrr, ld, query,
                   F.int(ir.Constant(I64, -1)), info], 2)
    lwork = F.workspace(b, query)
    block = F.malloc(b, b.mul(lwork, ir.Constant(I64, 8)))
    work_ = b.bitcast(block, _F64.as_pointer())
    lw = F.int(lwork)
    all_real = b.alloca(ir.IntType(1))
    b.store(ir.Constant(ir.IntType(1), 1), all_real)
    second = b.alloca(ir.IntType(1))  # the column is the second of a complex pair
    zero = ir.Constant(_F64, 0.0)

    def put(b, out, at, re, im):
        """Complex ``(re, im)`` (float64) at element ``at`` of ``out``."""
        at = b.mul(at, ir.Constant(I64, 2))
        for k, x in enumerate((re, im)):
            x = x if part == _F64 else b.fptrunc(x, part)
            b.store(x, b.gep(out, [b.add(at, ir.Constant(I64, k))]))

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, aw, a, n, n, _ZERO, b.mul(i, nn))
        F.call(geev_, [jobvl, jobvr, n_, aw, ld, wr, wi, vrr, ld, vrr, ld, work_, lw, info], 2)
        F.fail_if(b, info, block)
        b.store(ir.Constant(ir.IntType(1), 0), second)
        base = b.mul(i, nn)

        def column(b, jdx):
            j = jdx[0]
            im_j = b.load(b.gep(wi, [j]))
            put(b, w_out, b.add(b.mul(i, n), j), b.load(b.gep(wr, [j])), im_j)
            real = b.fcmp_ordered("==", im_j, zero)
            b.store(b.and_(b.load(all_real), real), all_real)
            skip = b.load(second)
            with b.if_else(skip) as (then, otherwise):
                with then:
                    b.store(ir.Constant(ir.IntType(1), 0), second)
                with otherwise, b.if_else(real) as (one, pair):
                    with one:
                        def rows(b, r):
                            re = b.load(b.gep(vrr, [b.add(b.mul(j, n), r[0])]))
                            put(b, v_out, b.add(base, b.add(b.mul(r[0], n), j)), re, zero)
                        loop_nest(b, f, (n,), rows)
                    with pair:
                        k = b.add(j, _ONE)

                        def rows2(b, r):
                            re = b.load(b.gep(vrr, [b.add(b.mul(j, n), r[0])]))
                            im = b.load(b.gep(vrr, [b.add(b.mul(k, n), r[0])]))
                            row = b.add(base, b.mul(r[0], n))
                            put(b, v_out, b.add(row, j), re, im)
                            put(b, v_out, b.add(row, k), re, b.fneg(im))
                        loop_nest(b, f, (n,), rows2)
                        b.store(ir.Constant(ir.IntType(1), 1), second)
        loop_nest(b, f, (n,), column)
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)

    def plus_zero(b, idx):  # every eigenvalue real: NumPy's real arrays made complex
        at = b.gep(w_out, [b.add(b.mul(idx[0], ir.Constant(I64, 2)), _ONE)])
        b.store(ir.Constant(part, 0.0), at)
    with b.if_then(b.load(all_real)):
        loop_nest(b, f, (b.mul(n, count),), plus_zero)
    b.ret(_ZERO)
