"""The convolution (``ir.conv_ops``) as one loop function: per image, the windows copied
into columns (im2col), then one BLAS ``gemm`` per group.

The function, ``void(x, w, out, columns[, padded], sizes)``, is built in a module of
its own, named by content. Its text holds the dtype, the columns' layout and the
geometry (per spatial axis the stride, the low padding and both dilations: constants,
so that the index arithmetic folds); its sizes (batch, channels, output channels,
groups, and per spatial axis the extent, the dilated and padded extent, the kernel's
and the output's extents) are an int64 array, a run of the entry's size table
(``layout``), so one module serves every size of a geometry. ``columns`` is an arena
place for one image's columns and ``padded`` one for the image dilated and padded
(``ir.conv_ops.dilate_pad``: zeros, then each element at its place, a negative
padding cropping), both reused image after image while they are in cache; without
padding or input dilation the image is read as it is. Each run of columns is then a
plain strided copy: the window's taps never leave the padded image.

The columns are laid out as ``conv_impl``'s, so each ``gemm`` is the one NumPy's
``matmul``/``dot`` makes there (the same bits, where the two BLAS libraries agree):

- ``(C, *K, *Q)`` (``conv_impl``'s ``cols``), when the output has at least as many
  positions as the kernel taps: group ``g``'s block is the ``(C/G * K, Q)`` matrix
  ``A`` of ``out[n, g] = w[g] @ A``;
- ``(*Q, C, *K)`` (its ``rows``, a small output through a large kernel: a weight's
  gradient), read transposed by ``gemm``.

``conv_impl`` adds shifted products instead when there are fewer output than input
channels; here those convolutions go through columns too, so their sums are ordered
as BLAS orders a product's and may differ from NumPy's in the last bits. An empty
result is left alone, an empty product (no input channel or kernel tap) written as
zeros, as ``conv_impl`` does.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from ...ir.conv_ops import dilated
from . import scalar as sc
from .kernel import I64, loop_nest

I32 = ir.IntType(32)
#: sizes of each spatial axis in the size array, after ``N, C, O, G``
AXIS_FIELDS = ("size", "padded", "kernel", "out")


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
    """The size array of ``op``: ``N, C, O, G``, then ``AXIS_FIELDS`` per spatial axis."""
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    q = op.results[0].type.shape[2:]
    out = [x[0], x[1], w[0], int(op.attrs["groups"])]
    pads = op.attrs["padding"]
    for i, (s, ld, k, qi) in enumerate(zip(x[2:], op.attrs["lhs_dilation"], w[2:], q)):
        out += [s, pads[2 * i] + dilated(s, ld) + pads[2 * i + 1], k, qi]
    return out


def column_bytes(op: Op) -> int:
    """Bytes of one image's columns."""
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    q = op.results[0].type.shape[2:]
    return x[1] * math.prod(w[2:]) * math.prod(q) * op.results[0].type.dtype.itemsize


def padded(op: Op) -> bool:
    """Whether ``op`` reads its images dilated and padded (``ir.conv_ops.dilate_pad``)
    from a copy, rather than as they are."""
    at = op.attrs
    return any(at["padding"]) or any(d != 1 for d in at["lhs_dilation"])


def padded_bytes(op: Op) -> int:
    """Bytes of one image dilated and padded (0 if ``op`` reads its images as they are)."""
    if not padded(op):
        return 0
    x = op.operands[0].type.shape
    sizes = layout(op)[4:]
    return x[1] * math.prod(sizes[1::len(AXIS_FIELDS)]) * op.results[0].type.dtype.itemsize


def _c(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


class _Axis:
    """One spatial axis: its sizes, read from the size array, and its geometry (the
    text's constants)."""

    def __init__(self, b: ir.IRBuilder, sizes, first: int, op: Op, i: int):
        for j, name in enumerate(AXIS_FIELDS):
            setattr(self, name, b.load(b.gep(sizes, [_c(first + j)])))
        at = op.attrs
        self.stride, self.pad = at["stride"][i], at["padding"][2 * i]
        self.lhs, self.rhs = at["lhs_dilation"][i], at["rhs_dilation"][i]


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


def build(f: ir.Function, op: Op) -> None:
    """The body of ``op``'s convolution function ``f`` (the module's docstring)."""
    x, w, out, cols, *pad, sizes = f.args
    for a in (x, w, out, cols, *pad):
        a.add_attribute("noalias")
    t = op.results[0].type
    nd, by_rows = len(t.shape) - 2, rows(op)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ety = sc.mem_type(t)
    n_img, c, o, g = (b.load(b.gep(sizes, [_c(j)])) for j in range(4))
    axes = [_Axis(b, sizes, 4 + len(AXIS_FIELDS) * i, op, i) for i in range(nd)]
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
        src = b.gep(x, [b.mul(n, b.mul(c, ss))])
        if pad:
            _pad(b, pad[0], src, c, axes)
            src = pad[0]
        _fill(b, cols, src, c, axes, by_rows)

        def group(b, j):
            k = j[0]
            a = b.gep(cols, [b.mul(k, a_step)])
            wk = b.gep(w, [b.mul(b.mul(k, og), cgk)])
            ck_ = b.gep(out, [b.mul(b.add(b.mul(n, o), b.mul(k, og)), qq)])
            b.call(gemm, [flags[0], flags[1], ints[0], ints[1], ints[2], one, a, ints[3],
                          wk, ints[4], zero, ck_, ints[5]])
        loop_nest(b, f, (g,), group)
    loop_nest(b, f, (n_img,), image).ret_void()


def _strides(b: ir.IRBuilder, extents):
    """C-order element strides of ``extents``, and their product."""
    out = [_c(1)] * len(extents)
    for i in range(len(extents) - 2, -1, -1):
        out[i] = b.mul(out[i + 1], extents[i + 1])
    return out, b.mul(out[0], extents[0])


def _pad(b: ir.IRBuilder, dst, x, c, axes) -> None:
    """``dst = dilate_pad(x)`` of one image ``x`` (``(C, *S)``): zeros, then each input
    element at its dilated and padded place if that is not cropped; along the last
    axis the kept elements are one range, computed once per row."""
    zero = ir.Constant(dst.type.pointee, 0.0)
    last, outer = axes[-1], axes[:-1]
    into, plane = _strides(b, [a.padded for a in axes])
    frm, size = _strides(b, [a.size for a in axes])
    n = b.mul(c, plane)
    loop_nest(b, b.function, (n,), lambda b, i: b.store(zero, b.gep(dst, [i[0]])))

    def row(b, idx):
        ch, s = idx[0], idx[1:]
        ok = ir.Constant(ir.IntType(1), 1)
        at, src = b.mul(ch, plane), b.mul(ch, size)
        for a, si, st_to, st_from in zip(outer, s, into, frm):
            p = b.add(b.mul(si, _c(a.lhs)), _c(a.pad))
            ok = b.and_(ok, b.and_(b.icmp_signed(">=", p, _c(0)),
                                   b.icmp_signed("<", p, a.padded)))
            at = b.add(at, b.mul(p, st_to))
            src = b.add(src, b.mul(si, st_from))
        # the last axis: p = s * lhs + pad in [0, padded) for s in [lo, hi)
        lo = _ceil_pos(b, _c(-last.pad), last.lhs)
        hi = _ceil_pos(b, b.sub(last.padded, _c(last.pad)), last.lhs)
        hi = b.select(b.icmp_signed(">", hi, last.size), last.size, hi)
        with b.if_then(ok):
            loop_nest(b, b.function, (hi,), lambda b, i: b.store(
                b.load(b.gep(x, [b.add(src, i[0])])),
                b.gep(dst, [b.add(at, b.add(b.mul(i[0], _c(last.lhs)), _c(last.pad)))])),
                bounds=(lo, hi))
    loop_nest(b, b.function, [c, *(a.size for a in outer)], row)


def _fill(b: ir.IRBuilder, cols, x, c, axes, by_rows: bool) -> None:
    """One image's columns, read from ``x`` (the image, dilated and padded if it is),
    each run along the last axis of the columns a strided copy."""
    nd = len(axes)
    last, outer = axes[-1], axes[:-1]
    if by_rows:  # (*Q, C, *K): runs along the kernel's last axis
        extents = [*(a.out for a in axes), c, *(a.kernel for a in outer)]
    else:  # (C, *K, *Q): runs along the output's last axis
        extents = [c, *(a.kernel for a in axes), *(a.out for a in outer)]
    strides, plane = _strides(b, [a.padded for a in axes])
    length = last.kernel if by_rows else last.out

    def row(b, idx):
        if by_rows:
            q, ch, k = idx[:nd], idx[nd], [*idx[nd + 1:], None]
        else:
            ch, k, q = idx[0], idx[1:nd + 1], [*idx[nd + 1:], None]
        dst = b.gep(cols, [b.mul(_flat(b, idx, extents), length)])
        src = b.mul(ch, plane)
        for a, qi, ki, st in zip(outer, q, k, strides):
            u = b.add(b.mul(qi, _c(a.stride)), b.mul(ki, _c(a.rhs)))
            src = b.add(src, b.mul(u, st))
        if by_rows:
            src, step = b.add(src, b.mul(q[-1], _c(last.stride))), last.rhs
        else:
            src, step = b.add(src, b.mul(k[-1], _c(last.rhs))), last.stride
        row_x = b.gep(x, [src])
        loop_nest(b, b.function, (length,), lambda b, i: b.store(
            b.load(b.gep(row_x, [b.mul(i[0], _c(step))])), b.gep(dst, [i[0]])))
    loop_nest(b, b.function, extents, row)


def _ceil_pos(b: ir.IRBuilder, t, d: int):
    """``max(0, ceil(t / d))`` of an i64 ``t`` and a positive constant ``d``."""
    q = t if d == 1 else b.sdiv(b.add(t, _c(d - 1)), _c(d))
    return b.select(b.icmp_signed(">", t, _c(0)), q, _c(0))
