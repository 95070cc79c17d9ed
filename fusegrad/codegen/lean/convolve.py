"""The convolution (``ir.conv_ops``) as one loop function: per image, the windows copied
into columns (im2col), then one BLAS ``gemm`` per group.

The function, ``void(x, w, out, columns, geometry)``, is built in a module of its own,
named by content; its text holds only the dtype, the number of spatial axes and the
columns' layout, so one module serves every size and geometry: the geometry (batch,
channels, groups, and per spatial axis the extent, its dilated extent, the kernel's
and the output's extents, stride, low padding, both dilations) is an int64 array, a
run of the entry's size table (``layout``). ``columns`` is an arena place for one
image's columns, reused image after image while they are in cache.

The columns are laid out as ``ir.conv_ops.conv_impl``'s, so each ``gemm`` is the one
NumPy's ``matmul``/``dot`` makes there:

- ``(C, *K, *Q)`` (``conv_impl``'s ``cols``), when the output has at least as many
  positions as the kernel taps: group ``g``'s block is the ``(C/G * K, Q)`` matrix
  ``A`` of ``out[n, g] = w[g] @ A``;
- ``(*Q, C, *K)`` (its ``rows``, a small output through a large kernel: a weight's
  gradient), read transposed by ``gemm``.

``conv_impl`` adds shifted products instead when there are fewer output than input
channels; here those convolutions go through columns too, so their sums are ordered
as BLAS orders a product's and may differ from NumPy's in the last bits.

Each column is filled along its last axis (the output's last spatial axis, or the
kernel's) as a run ``x[off + i * step]`` of one input row: with no input dilation a
run is a zero head, a strided copy and a zero tail whose bounds are computed once per
run; with ``lhs_dilation > 1`` (a transposed convolution) each element is tested. An
empty result is left alone, an empty product (no input channel or kernel tap) written
as zeros, as ``conv_impl`` does.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from ...ir.conv_ops import conv_out_shape, dilated
from . import scalar as sc
from .kernel import I64, loop_nest

I32 = ir.IntType(32)
#: fields of each spatial axis in the geometry array, after ``N, C, O, G``
AXIS_FIELDS = ("size", "dilated", "kernel", "out", "stride", "pad", "lhs", "rhs")


def lowered(op: Op) -> bool:
    """Whether the entry runs convolution ``op``: real floating point (BLAS ``gemm``)."""
    return op.operands[0].type.dtype in (np.float64, np.float32)


def work(op: Op) -> int:
    """Multiply-adds of ``op``."""
    w = op.operands[1].type.shape
    return math.prod(op.results[0].type.shape) * math.prod(w[1:])


def rows(op: Op) -> bool:
    """Whether ``op``'s columns are ``(*Q, C, *K)`` (else ``(C, *K, *Q)``), as
    ``conv_impl`` chooses."""
    qq = math.prod(op.results[0].type.shape[2:])
    return 0 < qq < math.prod(op.operands[1].type.shape[2:])


def layout(op: Op) -> list[int]:
    """The geometry array of ``op``: ``N, C, O, G``, then ``AXIS_FIELDS`` per axis."""
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    at = op.attrs
    q = conv_out_shape(x, w, stride=at["stride"], padding=at["padding"],
                       lhs_dilation=at["lhs_dilation"], rhs_dilation=at["rhs_dilation"])
    out = [x[0], x[1], w[0], int(at["groups"])]
    for i, (s, k) in enumerate(zip(x[2:], w[2:])):
        ld = at["lhs_dilation"][i]
        out += [s, dilated(s, ld), k, q[i], at["stride"][i], at["padding"][2 * i], ld,
                at["rhs_dilation"][i]]
    return out


def column_bytes(op: Op) -> int:
    """Bytes of one image's columns."""
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    q = op.results[0].type.shape[2:]
    return x[1] * math.prod(w[2:]) * math.prod(q) * op.results[0].type.dtype.itemsize


def _c(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


class _Axis:
    """One spatial axis's geometry, read from the array."""

    def __init__(self, b: ir.IRBuilder, geo, first: int):
        for j, name in enumerate(AXIS_FIELDS):
            setattr(self, name, b.load(b.gep(geo, [_c(first + j)])))


def _product(b: ir.IRBuilder, values):
    out = _c(1)
    for v in values:
        out = b.mul(out, v)
    return out


def _flat(b: ir.IRBuilder, idx, extents):
    out = _c(0)
    for i, n in zip(idx, extents):
        out = b.add(b.mul(out, n), i)
    return out


def _max1(b: ir.IRBuilder, v):
    return b.select(b.icmp_signed("<", v, _c(1)), _c(1), v)


def build(f: ir.Function, t, nd: int, by_rows: bool) -> None:
    """The body of the convolution function ``f`` of dtype ``t`` over ``nd`` spatial axes,
    its columns laid out by rows if ``by_rows`` (the module's docstring)."""
    x, w, out, cols, geo = f.args
    for a in (x, w, out, cols):
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ety = sc.mem_type(t)
    n_img, c, o, g = (b.load(b.gep(geo, [_c(j)])) for j in range(4))
    axes = [_Axis(b, geo, 4 + len(AXIS_FIELDS) * i) for i in range(nd)]
    kk = _product(b, [a.kernel for a in axes])
    qq = _product(b, [a.out for a in axes])
    ss = _product(b, [a.size for a in axes])
    cg, og = b.sdiv(c, g), b.sdiv(o, g)
    cgk = b.mul(cg, kk)
    flags = [b.alloca(ir.IntType(8)) for _ in range(2)]
    ints = [b.alloca(I32) for _ in range(6)]
    one, zero = b.alloca(ety), b.alloca(ety)
    total = b.mul(b.mul(n_img, o), qq)
    with b.if_then(b.icmp_signed("==", total, _c(0))):  # an empty result
        b.ret_void()
    b.store(ir.Constant(ety, 1.0), one)
    b.store(ir.Constant(ety, 0.0), zero)
    with b.if_then(b.icmp_signed("==", cgk, _c(0))):  # no product: zeros
        loop_nest(b, f, (total,), lambda b, i: b.store(ir.Constant(ety, 0.0),
                                                       b.gep(out, [i[0]])))
        b.ret_void()
    # gemm's arguments but the matrices: C^T (Q x O/G) = A^T (Q x CgK) w_g^T (CgK x O/G)
    ck = b.mul(c, kk)
    b.store(ir.Constant(ir.IntType(8), ord("T" if by_rows else "N")), flags[0])
    b.store(ir.Constant(ir.IntType(8), ord("N")), flags[1])
    for slot, v in zip(ints, (qq, og, cgk, _max1(b, ck if by_rows else qq), _max1(b, cgk),
                              _max1(b, qq))):
        b.store(b.trunc(v, I32), slot)
    gemm_name = "fusegrad_dgemm" if t.dtype == np.float64 else "fusegrad_sgemm"
    ptr = ety.as_pointer()
    i8p, i32p = ir.IntType(8).as_pointer(), I32.as_pointer()
    gemm = ir.Function(f.module, ir.FunctionType(ir.VoidType(), [
        i8p, i8p, i32p, i32p, i32p, ptr, ptr, i32p, ptr, i32p, ptr, ptr, i32p]), gemm_name)
    a_step = cgk if by_rows else b.mul(cgk, qq)  # group g's block of the columns

    def image(b, idx):
        n = idx[0]
        _fill(b, f, cols, b.gep(x, [b.mul(n, b.mul(c, ss))]), c, axes, by_rows)

        def group(b, j):
            k = j[0]
            a = b.gep(cols, [b.mul(k, a_step)])
            wk = b.gep(w, [b.mul(b.mul(k, og), cgk)])
            ck_ = b.gep(out, [b.mul(b.add(b.mul(n, o), b.mul(k, og)), qq)])
            b.call(gemm, [flags[0], flags[1], ints[0], ints[1], ints[2], one, a, ints[3],
                          wk, ints[4], zero, ck_, ints[5]])
        loop_nest(b, f, (g,), group)
    loop_nest(b, f, (n_img,), image).ret_void()


def _fill(b: ir.IRBuilder, f: ir.Function, cols, x, c, axes, by_rows: bool) -> None:
    """One image's columns (``x`` its first element): each run along the last axis of
    the columns by ``_run``, the other axes' taps tested once per run."""
    nd = len(axes)
    last = axes[-1]
    outer = axes[:-1]
    if by_rows:  # (*Q, C, *K): runs along the kernel's last axis
        extents = [*(a.out for a in axes), c, *(a.kernel for a in outer)]
    else:  # (C, *K, *Q): runs along the output's last axis
        extents = [c, *(a.kernel for a in axes), *(a.out for a in outer)]
    strides = [_c(1)] * nd  # of x's spatial axes
    for i in range(nd - 2, -1, -1):
        strides[i] = b.mul(strides[i + 1], axes[i + 1].size)
    plane = b.mul(strides[0], axes[0].size)
    length = last.kernel if by_rows else last.out
    zero = ir.Constant(cols.type.pointee, 0.0)

    def row(b, idx):
        if by_rows:
            q, ch, k = idx[:nd], idx[nd], [*idx[nd + 1:], None]
        else:
            ch, k, q = idx[0], idx[1:nd + 1], [*idx[nd + 1:], None]
        dst = b.gep(cols, [b.mul(_flat(b, idx, extents), length)])
        ok = ir.Constant(ir.IntType(1), 1)
        src = b.mul(ch, plane)
        for a, qi, ki, st in zip(outer, q, k, strides):
            u = b.sub(b.add(b.mul(qi, a.stride), b.mul(ki, a.rhs)), a.pad)
            ok = b.and_(ok, b.and_(b.icmp_signed(">=", u, _c(0)),
                                   b.icmp_signed("<", u, a.dilated)))
            ok = b.and_(ok, b.icmp_signed("==", b.srem(u, a.lhs), _c(0)))
            src = b.add(src, b.mul(b.sdiv(u, a.lhs), st))
        if by_rows:
            start, step = b.sub(b.mul(q[-1], last.stride), last.pad), last.rhs
        else:
            start, step = b.sub(b.mul(k[-1], last.rhs), last.pad), last.stride
        with b.if_else(ok) as (inside, padding):
            with inside:
                _run(b, f, dst, b.gep(x, [src]), start, step, length, last)
            with padding:
                loop_nest(b, f, (length,), lambda b, i: b.store(zero, b.gep(dst, [i[0]])))
    loop_nest(b, f, extents, row)


def _run(b: ir.IRBuilder, f: ir.Function, dst, x, start, step, length, a) -> None:
    """``dst[i] = x[u / lhs]`` for ``u = start + i * step`` over ``[0, length)`` where
    ``u`` is a position of the dilated input row, else 0."""
    zero = ir.Constant(dst.type.pointee, 0.0)
    dense = b.icmp_signed("==", a.lhs, _c(1))
    with b.if_else(dense) as (plain, dilated_):
        with plain:  # zeros over [0, lo), the copy over [lo, hi), zeros over [hi, length)
            lo = _ceil_pos(b, b.sub(_c(0), start), step)
            hi = _ceil_pos(b, b.sub(a.dilated, start), step)
            hi = b.select(b.icmp_signed(">", hi, length), length, hi)
            lo = b.select(b.icmp_signed(">", lo, hi), hi, lo)
            loop_nest(b, f, (lo,), lambda b, i: b.store(zero, b.gep(dst, [i[0]])))
            loop_nest(b, f, (hi,), lambda b, i: b.store(
                b.load(b.gep(x, [b.add(start, b.mul(i[0], step))])), b.gep(dst, [i[0]])),
                bounds=(lo, hi))
            loop_nest(b, f, (length,), lambda b, i: b.store(zero, b.gep(dst, [i[0]])),
                      bounds=(hi, length))
        with dilated_:
            def each(b, i):
                u = b.add(start, b.mul(i[0], step))
                at = b.gep(dst, [i[0]])
                ok = b.and_(b.and_(b.icmp_signed(">=", u, _c(0)),
                                   b.icmp_signed("<", u, a.dilated)),
                            b.icmp_signed("==", b.srem(u, a.lhs), _c(0)))
                with b.if_else(ok) as (inside, padding):
                    with inside:
                        b.store(b.load(b.gep(x, [b.sdiv(u, a.lhs)])), at)
                    with padding:
                        b.store(zero, at)
            loop_nest(b, f, (length,), each)


def _ceil_pos(b: ir.IRBuilder, t, d):
    """``max(0, ceil(t / d))`` of i64 ``t`` and positive ``d``."""
    pos = b.icmp_signed(">", t, _c(0))
    q = b.sdiv(b.add(t, b.sub(d, _c(1))), d)
    return b.select(pos, q, _c(0))
