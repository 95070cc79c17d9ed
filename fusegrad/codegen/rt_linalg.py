"""Numba helpers for the linear-algebra ops: a loop over a stack of matrices, one LAPACK
call each (Numba's ``np.linalg`` calls LAPACK through SciPy's ``cython_lapack``, so no
Python runs in the loop).

Every helper takes stacks flattened to 3-D, ``(batch, M, N)``, C-contiguous, and returns
3-D (or 2-D for per-matrix vectors, 1-D for per-matrix scalars) stacks; the generated
code reshapes them. Where Numba's ``np.linalg`` differs from NumPy's the helper makes
up the difference: ``eigh`` first symmetrises from the lower triangle
(NumPy reads only that one; a complex matrix becomes Hermitian, its diagonal real),
triangular solves are substitution loops (by blocks
updated with ``np.dot`` for large ones), and complete
QR is a Householder factorisation with LAPACK's reflector convention (``dlarfg``).
``host_op`` runs the NumPy implementation of the ops Numba has none of (``eig``,
``sqrtm``, ``sylvester``) from a ``numba.objmode`` block.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(error_model="numpy", cache=True)


def host_op(name: str, *operands):
    """The op-table NumPy implementation of ``name`` (``eig``, ``sqrtm``, ``sylvester``),
    run from a ``numba.objmode`` block: its results as a tuple of C-contiguous arrays."""
    from ..ir import OPS

    out = OPS[name].impl(*operands)
    return tuple(np.ascontiguousarray(r) for r in (out if isinstance(out, tuple) else (out,)))


@_jit
def _lower_sym(a):
    """The symmetric (Hermitian) matrix whose lower triangle is ``a``'s, its diagonal real."""
    n = a.shape[0]
    out = np.empty_like(a)
    for i in range(n):
        out[i, i] = a[i, i].real
        for j in range(i):
            out[i, j] = a[i, j]
            out[j, i] = np.conj(a[i, j])
    return out


@_jit
def cholesky(a):
    """Numba's ``np.linalg.cholesky`` reads only the lower triangle of a C-ordered matrix
    (``potrf`` on the upper triangle of its Fortran view) and zeroes the upper one."""
    out = np.empty_like(a)
    for b in range(a.shape[0]):
        out[b] = np.linalg.cholesky(a[b])
    return out


@_jit
def _is_identity(m):
    n, k = m.shape
    if n != k:
        return False
    for i in range(n):
        for j in range(k):
            if m[i, j] != (1 if i == j else 0):
                return False
    return True


@_jit
def solve(a, rhs):
    """LU solves; an identity right-hand side (an inverse: ``inv``, ``slogdet``'s
    gradient) takes ``getrf`` + ``getri`` (``np.linalg.inv``), a third cheaper than
    solving for ``n`` right-hand sides."""
    out = np.empty_like(rhs)
    for b in range(a.shape[0]):
        if _is_identity(rhs[b]):
            out[b] = np.linalg.inv(a[b])
        else:
            out[b] = np.linalg.solve(a[b], rhs[b])
    return out


@_jit
def _entry(t, i, j, trans):
    return t[j, i] if trans else t[i, j]


@_jit
def triangular_solve(a, rhs, lower, trans, unit):
    """``op(tri(a)) @ x = rhs`` by substitution; ``op(tri(a))`` is lower triangular when
    ``lower != trans`` (forward substitution), else upper (backward). Row by row: each
    solved row is subtracted from the later ones across all right-hand sides at once, so
    the inner loop runs over contiguous memory and vectorises."""
    out = np.empty_like(rhs)
    n, k = rhs.shape[1], rhs.shape[2]
    forward = lower != trans
    for b in range(a.shape[0]):
        t = a[b]
        if k == 1:  # one right-hand side: plain scalar substitution
            for s in range(n):
                i = s if forward else n - 1 - s
                acc = rhs[b, i, 0]
                lo, hi = (0, i) if forward else (i + 1, n)
                for j in range(lo, hi):
                    acc -= _entry(t, i, j, trans) * out[b, j, 0]
                out[b, i, 0] = acc if unit else acc / t[i, i]
            continue
        if n >= BLOCKED_MIN and k >= BLOCKED_MIN:
            _blocked_solve(t, rhs[b], out[b], forward, trans, unit)
            continue
        for s in range(n):
            i = s if forward else n - 1 - s
            row = out[b, i]
            src = rhs[b, i]
            for c in range(k):
                row[c] = src[c]
            lo, hi = (0, i) if forward else (i + 1, n)
            for j in range(lo, hi):
                f = _entry(t, i, j, trans)
                done = out[b, j]
                for c in range(k):
                    row[c] -= f * done[c]
            if not unit:
                d = t[i, i]
                for c in range(k):
                    row[c] = row[c] / d
    return out


#: matrices with at least this many rows and right-hand sides are solved in blocks
BLOCKED_MIN = 64
#: rows per block of ``_blocked_solve``
BLOCK = 32


@_jit
def _blocked_solve(t, rhs, out, forward, trans, unit):
    """``triangular_solve`` of one matrix by blocks of ``BLOCK`` rows: the rows already
    solved are subtracted from a block with one matrix product (BLAS ``gemm`` through
    ``np.dot``), then the block is solved by substitution."""
    n, k = rhs.shape
    out[:, :] = rhs
    for q in range((n + BLOCK - 1) // BLOCK):
        if forward:
            i0 = q * BLOCK
            i1 = min(i0 + BLOCK, n)
            lo, hi = 0, i0
        else:
            i1 = n - q * BLOCK
            i0 = max(i1 - BLOCK, 0)
            lo, hi = i1, n
        if hi > lo:
            coef = np.empty((i1 - i0, hi - lo), t.dtype)
            for r in range(i1 - i0):
                for j in range(lo, hi):
                    coef[r, j - lo] = _entry(t, i0 + r, j, trans)
            done = np.ascontiguousarray(out[lo:hi])
            upd = np.dot(coef, done)
            for r in range(i1 - i0):
                row = out[i0 + r]
                u = upd[r]
                for c in range(k):
                    row[c] -= u[c]
        for s in range(i1 - i0):
            i = i0 + s if forward else i1 - 1 - s
            row = out[i]
            jlo, jhi = (i0, i) if forward else (i + 1, i1)
            for j in range(jlo, jhi):
                f = _entry(t, i, j, trans)
                prev = out[j]
                for c in range(k):
                    row[c] -= f * prev[c]
            if not unit:
                d = t[i, i]
                for c in range(k):
                    row[c] = row[c] / d


@_jit
def slogdet(a):
    nb = a.shape[0]
    sign = np.empty(nb, a.dtype)
    logabs = np.empty(nb, a.dtype)
    for b in range(nb):
        s, la = np.linalg.slogdet(a[b])
        sign[b] = s
        logabs[b] = la
    return sign, logabs


@_jit
def eigh(a):
    nb, n = a.shape[0], a.shape[1]
    w = np.empty((nb, n), a.real.dtype)
    v = np.empty_like(a)
    for b in range(nb):
        wb, vb = np.linalg.eigh(_lower_sym(a[b]))
        w[b] = wb
        v[b] = vb
    return w, v


@_jit
def svd(a, full):
    nb, m, n = a.shape
    k = min(m, n)
    um, vn = (m, n) if full else (k, k)
    u = np.empty((nb, m, um), a.dtype)
    s = np.empty((nb, k), a.real.dtype)
    vt = np.empty((nb, vn, n), a.dtype)
    for b in range(nb):
        ub, sb, vtb = np.linalg.svd(a[b], full_matrices=full)
        u[b] = ub
        s[b] = sb
        vt[b] = vtb
    return u, s, vt


@_jit
def _householder_qr(a):
    """Complete QR of one matrix with LAPACK's reflectors: ``H_j = I - tau v v^T``,
    ``v[0] = 1``, ``beta = -sign(alpha) * |x|`` (``tau = 0`` when ``x[1:]`` is 0)."""
    m, n = a.shape
    r = a.copy()
    q = np.eye(m, dtype=a.dtype)
    k = min(m, n)
    vs = np.zeros((k, m), a.dtype)
    taus = np.zeros(k, a.dtype)
    for j in range(k):
        alpha = r[j, j]
        xnorm = 0.0
        for i in range(j + 1, m):
            xnorm += r[i, j] * r[i, j]
        if xnorm == 0.0:
            continue
        beta = -np.copysign(np.sqrt(alpha * alpha + xnorm), alpha)
        taus[j] = (beta - alpha) / beta
        vs[j, j] = 1.0
        for i in range(j + 1, m):
            vs[j, i] = r[i, j] / (alpha - beta)
        for c in range(j, n):
            dot = 0.0
            for i in range(j, m):
                dot += vs[j, i] * r[i, c]
            for i in range(j, m):
                r[i, c] -= taus[j] * vs[j, i] * dot
        r[j, j] = beta
        for i in range(j + 1, m):
            r[i, j] = 0.0
    for j in range(k - 1, -1, -1):  # q = H_0 ... H_{k-1} I, applied right to left
        if taus[j] == 0.0:
            continue
        for c in range(m):
            dot = 0.0
            for i in range(j, m):
                dot += vs[j, i] * q[i, c]
            for i in range(j, m):
                q[i, c] -= taus[j] * vs[j, i] * dot
    return q, r


@_jit
def qr(a, complete):
    nb, m, n = a.shape
    k = m if complete else min(m, n)
    q = np.empty((nb, m, k), a.dtype)
    r = np.empty((nb, k, n), a.dtype)
    for b in range(nb):
        if complete:
            qb, rb = _householder_qr(a[b])
        else:
            qb, rb = np.linalg.qr(a[b])
        q[b] = qb
        r[b] = rb
    return q, r
