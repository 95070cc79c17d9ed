"""The compiled pooling ops: one loop over output positions, one over window taps.

Generated modules view the pooled operand as ``(planes, S0, S1, S2)`` (unit extents
in front when fewer than 3 axes are pooled; all leading axes folded into the
planes) and call the functions below with the geometry as int64 arrays of 3:
``k`` (kernel), ``st`` (strides), ``dl`` (dilation), ``lo`` / ``hi`` (padding).
Per axis a table gives the input index each tap reads at each output (-1: padding),
so the hot loops test one sign per tap and build no padded temporary. Outputs are
visited plane by plane in row-major order, so ``max_pool_grad``'s additions happen
in PyTorch's order (bit-identical sums where windows overlap).
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(error_model="numpy", cache=True)


@_jit
def _table(size, k, st, dl, lo, hi, scale):
    """``t[j, q]``: ``scale *`` the input index tap ``j`` reads at output ``q`` (-1:
    padding), and the number of outputs."""
    kd = 0 if k == 0 else 1 + dl * (k - 1)
    padded = lo + size + hi
    nq = 0 if (padded < kd or k == 0) else (padded - kd) // st + 1
    t = np.full((k, nq), -1, np.int64)
    for j in range(k):
        for q in range(nq):
            p = q * st + j * dl - lo
            if 0 <= p < size:
                t[j, q] = p * scale
    return t, nq


@_jit
def _tables(shape, k, st, dl, lo, hi):
    s1, s2 = shape[2], shape[3]
    t0, q0 = _table(shape[1], k[0], st[0], dl[0], lo[0], hi[0], s1 * s2)
    t1, q1 = _table(s1, k[1], st[1], dl[1], lo[1], hi[1], s2)
    t2, q2 = _table(s2, k[2], st[2], dl[2], lo[2], hi[2], 1)
    return t0, t1, t2, q0, q1, q2


@_jit
def _best(xb, t0, t1, t2, i0, i1, i2):
    """The flat index of the selected tap of one window (-1: none): the first in-bounds
    tap, replaced by any later one greater than the running maximum or NaN."""
    best = -1
    m = xb[0]
    for j0 in range(t0.shape[0]):
        a = t0[j0, i0]
        if a < 0:
            continue
        for j1 in range(t1.shape[0]):
            b = t1[j1, i1]
            if b < 0:
                continue
            for j2 in range(t2.shape[0]):
                c = t2[j2, i2]
                if c < 0:
                    continue
                f = a + b + c
                v = xb[f]
                if best < 0 or v > m or v != v:
                    best, m = f, v
    return best


@_jit
def _selected(x, k, st, dl, lo, hi):
    """``x`` (planes, S0, S1, S2) flattened per plane, the tables and the output extents."""
    t0, t1, t2, q0, q1, q2 = _tables(x.shape, k, st, dl, lo, hi)
    xf = np.ascontiguousarray(x).reshape((x.shape[0], x.shape[1] * x.shape[2] * x.shape[3]))
    return xf, t0, t1, t2, q0, q1, q2


@_jit
def max_pool(x, low, k, st, dl, lo, hi):
    """Each window's maximum; ``low`` (-inf, or an integer type's minimum) where a
    window holds no input element."""
    xf, t0, t1, t2, q0, q1, q2 = _selected(x, k, st, dl, lo, hi)
    out = np.empty((x.shape[0], q0, q1, q2), x.dtype)
    if xf.shape[1] == 0:
        out[:] = low
        return out
    for p in range(x.shape[0]):
        xb = xf[p]
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    f = _best(xb, t0, t1, t2, i0, i1, i2)
                    if f >= 0:
                        out[p, i0, i1, i2] = xb[f]
                    else:
                        out[p, i0, i1, i2] = low
    return out


@_jit
def max_pool_argmax(x, k, st, dl, lo, hi):
    xf, t0, t1, t2, q0, q1, q2 = _selected(x, k, st, dl, lo, hi)
    out = np.full((x.shape[0], q0, q1, q2), -1, np.int64)
    if xf.shape[1] == 0:
        return out
    for p in range(x.shape[0]):
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    out[p, i0, i1, i2] = _best(xf[p], t0, t1, t2, i0, i1, i2)
    return out


@_jit
def max_pool_grad(x, g, k, st, dl, lo, hi):
    """``g`` (planes, Q0, Q1, Q2) added at each window's selected tap of ``x``."""
    xf, t0, t1, t2, q0, q1, q2 = _selected(x, k, st, dl, lo, hi)
    out = np.zeros(xf.shape, x.dtype)
    if xf.shape[1] == 0:
        return out.reshape(x.shape)
    for p in range(x.shape[0]):
        xb = xf[p]
        ob = out[p]
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    f = _best(xb, t0, t1, t2, i0, i1, i2)
                    if f >= 0:
                        ob[f] += g[p, i0, i1, i2]
    return out.reshape(x.shape)


@_jit
def max_pool_take(x, c, k, st, dl, lo, hi):
    """``c`` (shaped as ``x``) read at each window's selected tap of ``x`` (0: none)."""
    xf, t0, t1, t2, q0, q1, q2 = _selected(x, k, st, dl, lo, hi)
    cf = np.ascontiguousarray(c).reshape(xf.shape)
    out = np.zeros((x.shape[0], q0, q1, q2), x.dtype)
    if xf.shape[1] == 0:
        return out
    for p in range(x.shape[0]):
        xb = xf[p]
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    f = _best(xb, t0, t1, t2, i0, i1, i2)
                    if f >= 0:
                        out[p, i0, i1, i2] = cf[p, f]
    return out


@_jit
def sum_pool(x, k, st, dl, lo, hi):
    xf, t0, t1, t2, q0, q1, q2 = _selected(x, k, st, dl, lo, hi)
    out = np.zeros((x.shape[0], q0, q1, q2), x.dtype)
    for p in range(x.shape[0]):
        xb = xf[p]
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    s = out[p, i0, i1, i2]
                    for j0 in range(t0.shape[0]):
                        a = t0[j0, i0]
                        if a < 0:
                            continue
                        for j1 in range(t1.shape[0]):
                            b = t1[j1, i1]
                            if b < 0:
                                continue
                            for j2 in range(t2.shape[0]):
                                c = t2[j2, i2]
                                if c >= 0:
                                    s += xb[a + b + c]
                    out[p, i0, i1, i2] = s
    return out


@_jit
def sum_pool_transpose(g, size, k, st, dl, lo, hi):
    """``g`` (planes, Q0, Q1, Q2) added to every input position of its window; the
    result is (planes, *size)."""
    shape = np.empty(4, np.int64)
    shape[0] = g.shape[0]
    shape[1:] = size
    t0, t1, t2, q0, q1, q2 = _tables(shape, k, st, dl, lo, hi)
    out = np.zeros((g.shape[0], size[0] * size[1] * size[2]), g.dtype)
    for p in range(g.shape[0]):
        ob = out[p]
        for i0 in range(q0):
            for i1 in range(q1):
                for i2 in range(q2):
                    v = g[p, i0, i1, i2]
                    for j0 in range(t0.shape[0]):
                        a = t0[j0, i0]
                        if a < 0:
                            continue
                        for j1 in range(t1.shape[0]):
                            b = t1[j1, i1]
                            if b < 0:
                                continue
                            for j2 in range(t2.shape[0]):
                                c = t2[j2, i2]
                                if c >= 0:
                                    ob[a + b + c] += v
    return out.reshape((g.shape[0], size[0], size[1], size[2]))
