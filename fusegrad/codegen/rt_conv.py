"""The compiled ``conv``: im2col then one BLAS product per (image, group).

Generated modules call ``conv1`` / ``conv2`` (1 or 2 spatial axes), which view
their operands as 3-d convolutions with unit extents and run ``conv5``, or ``conv5``
itself (3 spatial axes: a wrapper would cost a Numba compile of its own, which
optimises all of ``conv5`` again). For each output position and kernel tap, per
spatial axis, a table gives the input index read (``-1``: a padding or dilation
zero), so the column matrix is filled without tests on the hot path; the product of
each group's weight rows with it is a BLAS ``gemm`` (``np.dot`` on contiguous float
arrays). The attributes arrive as int64 arrays: ``st`` (stride), ``pad`` (lo, hi per
axis), ``ld`` / ``rd`` (input / kernel dilation), as in ``ir.conv_ops``.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(error_model="numpy", cache=True)


@_jit
def _table(size, k, st, lo, hi, ld, rd):
    """``t[j, q]``: the input index kernel tap ``j`` reads at output ``q`` (-1: a zero),
    and the number of outputs ``q``."""
    ext = 0 if size == 0 else 1 + ld * (size - 1)
    kd = 0 if k == 0 else 1 + rd * (k - 1)
    padded = lo + ext + hi
    nq = 0 if (padded < kd or k == 0) else (padded - kd) // st + 1
    t = np.full((k, nq), -1, np.int64)
    for j in range(k):
        for q in range(nq):
            p = q * st + j * rd - lo  # position in the dilated, unpadded input
            if 0 <= p < ext and p % ld == 0:
                t[j, q] = p // ld
    return t, nq


@_jit
def _runs(t):
    """Per kernel tap ``j``: the first and one-past-last output whose input index is
    valid, when those outputs are contiguous (always without input dilation), else
    ``(-1, -1)``: the caller then reads the table element by element."""
    k, nq = t.shape
    r = np.full((k, 2), -1, np.int64)
    for j in range(k):
        lo, hi, ok = -1, -1, True
        for q in range(nq):
            if t[j, q] >= 0:
                if lo < 0:
                    lo = q
                elif hi >= 0:
                    ok = False
            elif lo >= 0 and hi < 0:
                hi = q
        if lo < 0:
            r[j, 0], r[j, 1] = 0, 0
        elif ok:
            r[j, 0], r[j, 1] = lo, nq if hi < 0 else hi
    return r


@_jit
def _targets(size, k, st, lo, ld, rd, nq):
    """``u[j, p]``: the output that input element ``p`` meets under kernel tap ``j``
    (-1: none), the transpose of ``_table``."""
    u = np.full((k, size), -1, np.int64)
    for j in range(k):
        for p in range(size):
            pos = p * ld + lo - j * rd
            if pos >= 0 and pos % st == 0 and pos // st < nq:
                u[j, p] = pos // st
    return u


@_jit
def _scatter(x, w, st, pad, ld, rd, groups, q0, q1, q2):
    """``conv`` by products of the kernel taps with the input, added into the outputs
    they reach: fewer memory operations than im2col when the outputs outnumber the
    input elements (a transposed convolution: ``lhs_dilation > 1`` or wide padding)."""
    n, cg = x.shape[0], w.shape[1]
    o = w.shape[0]
    k0, k1, k2 = w.shape[2], w.shape[3], w.shape[4]
    p0, p1, p2 = x.shape[2], x.shape[3], x.shape[4]
    u0 = _targets(p0, k0, st[0], pad[0], ld[0], rd[0], q0)
    u1 = _targets(p1, k1, st[1], pad[2], ld[1], rd[1], q1)
    u2 = _targets(p2, k2, st[2], pad[4], ld[2], rd[2], q2)
    og = o // groups
    kk = k0 * k1 * k2
    # wk[g, (tap, o), c]: each group's taps stacked as rows
    wk = np.empty((groups, kk * og, cg), x.dtype)
    for g in range(groups):
        for oi in range(og):
            for ci in range(cg):
                t = 0
                for a in range(k0):
                    for bb in range(k1):
                        for cc in range(k2):
                            wk[g, t * og + oi, ci] = w[g * og + oi, ci, a, bb, cc]
                            t += 1
    out = np.zeros((n, o, q0, q1, q2), x.dtype)
    xc = np.ascontiguousarray(x).reshape((n, groups, cg, p0 * p1 * p2))
    for b in range(n):
        for g in range(groups):
            y = np.dot(wk[g], xc[b, g])  # (taps * og, inputs)
            t = 0
            for a in range(k0):
                for bb in range(k1):
                    for cc in range(k2):
                        for oi in range(og):
                            yr = y[t * og + oi]
                            dst = out[b, g * og + oi]
                            for i in range(p0):
                                j0 = u0[a, i]
                                if j0 < 0:
                                    continue
                                for j in range(p1):
                                    j1 = u1[bb, j]
                                    if j1 < 0:
                                        continue
                                    base = (i * p1 + j) * p2
                                    for m in range(p2):
                                        j2 = u2[cc, m]
                                        if j2 >= 0:
                                            dst[j0, j1, j2] += yr[base + m]
                        t += 1
    return out


@_jit
def _conv_by_rows(xc, wr, t0, t1, t2, groups, cg, k0, k1, k2, q0, q1, q2, out):
    """The im2col product with the column matrix transposed, ``(outputs, taps)``: its
    rows run along the kernel's last axis, so a small output read through a large
    kernel (a weight gradient's convolution) fills long rows instead of short ones.
    Several images share one product, so that it has enough columns for BLAS."""
    n, o = out.shape[0], out.shape[1]
    og = o // groups
    kk = cg * k0 * k1 * k2
    qq = q0 * q1 * q2
    nb = min(n, max(1, 256 // qq))  # images per product
    cols = np.empty((nb * qq, kk), xc.dtype)
    for g in range(groups):
        for b0 in range(0, n, nb):
            b1 = min(n, b0 + nb)
            col = 0
            for b in range(b0, b1):
                for i in range(q0):
                    for j in range(q1):
                        for m in range(q2):
                            crow = cols[col]
                            row = 0
                            for ci in range(cg):
                                xi = xc[b, g * cg + ci]
                                for a in range(k0):
                                    i0 = t0[a, i]
                                    for bb in range(k1):
                                        i1 = t1[bb, j]
                                        if i0 < 0 or i1 < 0:
                                            for cc in range(k2):
                                                crow[row + cc] = 0.0
                                        else:
                                            xr = xi[i0, i1]
                                            for cc in range(k2):
                                                i2 = t2[cc, m]
                                                crow[row + cc] = 0.0 if i2 < 0 else xr[i2]
                                        row += k2
                            col += 1
            y = np.dot(wr[g * og:(g + 1) * og], cols[:col].T)  # (og, images * outputs)
            for b in range(b0, b1):
                out[b, g * og:(g + 1) * og] = y[:, (b - b0) * qq:(b - b0 + 1) * qq]
    return out.reshape((n, o, q0, q1, q2))


@_jit
def _rows_padded(xc, wr, st, pad, rd, groups, cg, k0, k1, k2, q0, q1, q2, out):
    """``_conv_by_rows`` without input dilation or cropping, through a zero-bordered copy
    of each image (no tests for the padding while the rows are filled)."""
    n, c, o = xc.shape[0], xc.shape[1], out.shape[1]
    og = o // groups
    kk = cg * k0 * k1 * k2
    qq = q0 * q1 * q2
    s0, s1, s2 = xc.shape[2], xc.shape[3], xc.shape[4]
    xp = np.zeros((c, pad[0] + s0 + pad[1], pad[2] + s1 + pad[3], pad[4] + s2 + pad[5]),
                  xc.dtype)
    st0, st1, st2 = st[0], st[1], st[2]
    rd0, rd1, rd2 = rd[0], rd[1], rd[2]
    nb = min(n, max(1, 256 // qq))  # images per product
    cols = np.empty((nb * qq, kk), xc.dtype)
    for g in range(groups):
        for b0 in range(0, n, nb):
            b1 = min(n, b0 + nb)
            col = 0
            for b in range(b0, b1):
                xp[:, pad[0]:pad[0] + s0, pad[2]:pad[2] + s1, pad[4]:pad[4] + s2] = xc[b]
                for i in range(q0):
                    for j in range(q1):
                        for m in range(q2):
                            crow = cols[col]
                            row = 0
                            for ci in range(cg):
                                xi = xp[g * cg + ci]
                                for a in range(k0):
                                    for bb in range(k1):
                                        src = xi[i * st0 + a * rd0, j * st1 + bb * rd1]
                                        base = m * st2
                                        dst = crow[row:row + k2]
                                        if rd2 == 1:
                                            sr = src[base:base + k2]
                                            for cc in range(k2):
                                                dst[cc] = sr[cc]
                                        else:
                                            for cc in range(k2):
                                                dst[cc] = src[base + cc * rd2]
                                        row += k2
                            col += 1
            y = np.dot(wr[g * og:(g + 1) * og], cols[:col].T)  # (og, images * outputs)
            for b in range(b0, b1):
                out[b, g * og:(g + 1) * og] = y[:, (b - b0) * qq:(b - b0 + 1) * qq]
    return out.reshape((n, o, q0, q1, q2))


@_jit
def _conv_padded(xc, wr, st, pad, rd, groups, cg, k0, k1, k2, q0, q1, q2, cols, out):
    """im2col without input dilation or cropping: each image is copied once into a
    zero-bordered buffer, so every column row is read without tests for the padding."""
    n, c = xc.shape[0], xc.shape[1]
    o = out.shape[1]
    og = o // groups
    s0, s1, s2 = xc.shape[2], xc.shape[3], xc.shape[4]
    xp = np.zeros((c, pad[0] + s0 + pad[1], pad[2] + s1 + pad[3], pad[4] + s2 + pad[5]),
                  xc.dtype)
    st0, st1, st2 = st[0], st[1], st[2]
    rd0, rd1, rd2 = rd[0], rd[1], rd[2]
    for b in range(n):
        xp[:, pad[0]:pad[0] + s0, pad[2]:pad[2] + s1, pad[4]:pad[4] + s2] = xc[b]
        for g in range(groups):
            row = 0
            for ci in range(cg):
                xi = xp[g * cg + ci]
                for a in range(k0):
                    for bb in range(k1):
                        for cc in range(k2):
                            crow = cols[row]
                            col = 0
                            for i in range(q0):
                                for j in range(q1):
                                    src = xi[i * st0 + a * rd0, j * st1 + bb * rd1]
                                    base = cc * rd2
                                    dst = crow[col:col + q2]  # (views with zero-based
                                    if st2 == 1:  # indices: the copy vectorises)
                                        sr = src[base:base + q2]
                                        for m in range(q2):
                                            dst[m] = sr[m]
                                    else:
                                        for m in range(q2):
                                            dst[m] = src[base + m * st2]
                                    col += q2
                            row += 1
            out[b, g * og:(g + 1) * og] = np.dot(wr[g * og:(g + 1) * og], cols)
    return out.reshape((n, o, q0, q1, q2))


@_jit
def conv5(x, w, st, pad, ld, rd, groups):
    """``conv`` of ``x`` (N, C, D, H, W) with ``w`` (O, C/groups, KD, KH, KW)."""
    n = x.shape[0]
    o, cg = w.shape[0], w.shape[1]
    k0, k1, k2 = w.shape[2], w.shape[3], w.shape[4]
    t0, q0 = _table(x.shape[2], k0, st[0], pad[0], pad[1], ld[0], rd[0])
    t1, q1 = _table(x.shape[3], k1, st[1], pad[2], pad[3], ld[1], rd[1])
    t2, q2 = _table(x.shape[4], k2, st[2], pad[4], pad[5], ld[2], rd[2])
    r2 = _runs(t2)
    s2 = st[2] // ld[2] if st[2] % ld[2] == 0 else 0  # input step between valid outputs
    kk = cg * k0 * k1 * k2
    qq = q0 * q1 * q2
    og = o // groups
    out = np.zeros((n, o, qq), x.dtype)
    if n == 0 or o == 0 or qq == 0 or kk == 0:
        return out.reshape((n, o, q0, q1, q2))
    ntaps = k0 * k1 * k2
    inputs = x.shape[2] * x.shape[3] * x.shape[4]
    if ntaps * og * inputs * (1 + cg) < kk * qq * (1 + og):
        return _scatter(x, w, st, pad, ld, rd, groups, q0, q1, q2)
    xc = np.ascontiguousarray(x)
    wr = np.ascontiguousarray(w).reshape((o, kk))
    plain = ld[0] == 1 and ld[1] == 1 and ld[2] == 1 and pad.min() >= 0
    if q2 < k2 and qq < ntaps:
        if plain:
            return _rows_padded(xc, wr, st, pad, rd, groups, cg, k0, k1, k2, q0, q1, q2, out)
        return _conv_by_rows(xc, wr, t0, t1, t2, groups, cg, k0, k1, k2, q0, q1, q2, out)
    cols = np.empty((kk, qq), x.dtype)
    if plain:
        return _conv_padded(xc, wr, st, pad, rd, groups, cg, k0, k1, k2, q0, q1, q2, cols, out)
    for b in range(n):
        for g in range(groups):
            row = 0
            for ci in range(cg):
                xi = xc[b, g * cg + ci]
                for a in range(k0):
                    for bb in range(k1):
                        for cc in range(k2):
                            col = 0
                            for i in range(q0):
                                i0 = t0[a, i]
                                for j in range(q1):
                                    i1 = t1[bb, j]
                                    if i0 < 0 or i1 < 0:
                                        for m in range(q2):
                                            cols[row, col + m] = 0.0
                                    elif r2[cc, 0] >= 0 and s2 > 0:  # one strided run
                                        lo, hi = r2[cc, 0], r2[cc, 1]
                                        for m in range(lo):
                                            cols[row, col + m] = 0.0
                                        xr = xi[i0, i1]
                                        off = t2[cc, lo] - lo * s2 if hi > lo else 0
                                        for m in range(lo, hi):
                                            cols[row, col + m] = xr[off + m * s2]
                                        for m in range(hi, q2):
                                            cols[row, col + m] = 0.0
                                    else:
                                        for m in range(q2):
                                            i2 = t2[cc, m]
                                            cols[row, col + m] = 0.0 if i2 < 0 else xi[i0, i1, i2]
                                    col += q2
                            row += 1
            out[b, g * og:(g + 1) * og] = np.dot(wr[g * og:(g + 1) * og], cols)
    return out.reshape((n, o, q0, q1, q2))


@_jit
def conv1(x, w, st, pad, ld, rd, groups):
    x5 = np.ascontiguousarray(x).reshape((x.shape[0], x.shape[1], 1, 1, x.shape[2]))
    w5 = np.ascontiguousarray(w).reshape((w.shape[0], w.shape[1], 1, 1, w.shape[2]))
    one = np.ones(1, np.int64)
    z = np.zeros(2, np.int64)
    out = conv5(x5, w5, np.concatenate((one, one, st)), np.concatenate((z, z, pad)),
                np.concatenate((one, one, ld)), np.concatenate((one, one, rd)), groups)
    return out.reshape((out.shape[0], out.shape[1], out.shape[4]))


@_jit
def conv2(x, w, st, pad, ld, rd, groups):
    x5 = np.ascontiguousarray(x).reshape((x.shape[0], x.shape[1], 1, x.shape[2], x.shape[3]))
    w5 = np.ascontiguousarray(w).reshape((w.shape[0], w.shape[1], 1, w.shape[2], w.shape[3]))
    one = np.ones(1, np.int64)
    z = np.zeros(2, np.int64)
    out = conv5(x5, w5, np.concatenate((one, st)), np.concatenate((z, pad)),
                np.concatenate((one, ld)), np.concatenate((one, rd)), groups)
    return out.reshape((out.shape[0], out.shape[1], out.shape[3], out.shape[4]))

