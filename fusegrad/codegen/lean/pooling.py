"""The pooling ops (``ir.pool_ops``) as loops of their own, with NumPy's bits.

Each op is one call of a loop function built in a module of its own, named by content:
its pooled operand viewed as ``(planes, S_0, .., S_{d-1})`` (the leading axes are the
planes), the pooled extents ``S`` and output extents ``Q`` its arguments (so one module
serves every size), the geometry (``kernel``, ``strides``, ``dilation``, ``pad_lo``)
constants of its text. A window's in-bounds taps are, per pooled axis, a range
``[a, b)`` of tap numbers computed from the output's position, walked in row-major
order, so padding is skipped without a test per tap and no padded copy is made.

Against the NumPy implementations (``ir.pool_ops``, the interpreter's):

- the max-pool ops select each window's first in-bounds tap, then each later one that
  is greater than the running maximum or NaN (ties go to the first, NaN to the last;
  between ``-0.0`` and ``0.0`` the first). ``max_pool`` is the selected element (a
  window without one: ``-inf``, or an integer type's minimum), ``max_pool_argmax`` its
  flat index in the plane (-1: none), ``max_pool_take`` the second operand there (0:
  none);
- ``max_pool_grad`` zeroes its result, then visits the windows plane by plane in
  row-major order: where windows cannot overlap (``stride >= dilated kernel`` on every
  axis) it stores each window's cotangent at its selected tap, as NumPy's assignment
  does (a ``-0.0`` stays), else it adds it there, in the order of ``np.add.at``;
- ``sum_pool`` adds a window's taps to ``0.0`` in tap order, as NumPy's per-tap passes
  do; ``sum_pool_transpose`` zeroes its result and, tap by tap in row-major order, adds
  the cotangent to every input element the tap reads, so each element's sum runs in
  NumPy's order too.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ...ir import Op
from ...ir.pool_ops import POOL_OPS, lowest
from . import scalar as sc
from .kernel import I64, loop_nest

LOWERED = tuple(sorted(POOL_OPS))
_MAX_FAMILY = ("max_pool", "max_pool_argmax", "max_pool_grad", "max_pool_take")


def lowered(op: Op) -> bool:
    """Whether the entry runs pooling op ``op``: an operand of a dtype with a register type
    (the op's rule allows floating types, and integers for ``max_pool``/``max_pool_argmax``)."""
    return sc.supported_dtype(op.operands[0].type.dtype)


def _nd(op: Op) -> int:
    return len(op.attrs["kernel"])


def layout(op: Op) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """``(planes, S, Q)``: the planes, the pooled extents of the input side and those of
    the output side."""
    nd = _nd(op)
    if op.name == "sum_pool_transpose":
        g = op.operands[0].type.shape
        return math.prod(g[:len(g) - nd]), tuple(op.attrs["size"]), g[len(g) - nd:]
    x, out = op.operands[0].type.shape, op.results[0].type.shape
    q = out[len(out) - nd:] if op.name != "max_pool_grad" else op.operands[1].type.shape[
        len(x) - nd:]
    return math.prod(x[:len(x) - nd]), x[len(x) - nd:], q


def work(op: Op) -> int:
    """Window taps ``op`` visits (every output's window)."""
    planes, _, q = layout(op)
    return planes * math.prod(q) * math.prod(op.attrs["kernel"])


def arguments(op: Op) -> list:
    """The operands and result of ``op``'s loop function, in order: its pooled operand
    (or ``sum_pool_transpose``'s cotangent), its second operand if any, its result."""
    return [*op.operands, op.results[0]]


class _Geometry:
    """One pooled axis: its constants and its extents in the loop function."""

    def __init__(self, k: int, st: int, dl: int, lo: int, size, out):
        self.k, self.st, self.dl, self.lo, self.size, self.out = k, st, dl, lo, size, out


def _const(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def _ceil_div(b: ir.IRBuilder, t, d: int):
    """``ceil(t / d)`` of a signed i64 ``t`` and a positive constant ``d``."""
    if d == 1:
        return t
    q, r = b.sdiv(t, _const(d)), b.srem(t, _const(d))
    return b.add(q, b.zext(b.icmp_signed(">", r, _const(0)), I64))


def _clamp(b: ir.IRBuilder, v, lo, hi):
    """``min(max(v, lo), hi)`` of i64 values."""
    v = b.select(b.icmp_signed("<", v, lo), lo, v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def _ranges(b: ir.IRBuilder, f: ir.Function, bounds, visit) -> None:
    """``visit(b, indices)`` for the indices of ``[lo_i, hi_i)`` of each ``(lo, hi)`` of
    ``bounds``, in row-major order."""
    def level(b, d, idx):
        if d == len(bounds):
            visit(b, idx)
            return
        lo, hi = bounds[d]
        loop_nest(b, f, (hi,), lambda b, i: level(b, d + 1, [*idx, i[0]]), bounds=(lo, hi))
    level(b, 0, [])


def _flat(b: ir.IRBuilder, idx, extents):
    """The row-major flat index of ``idx`` in ``extents``."""
    out = idx[0]
    for i, n in zip(idx[1:], extents[1:]):
        out = b.add(b.mul(out, n), i)
    return out


def _window(b: ir.IRBuilder, f: ir.Function, axes, q, visit) -> None:
    """``visit(b, flat)`` for each in-bounds tap of the window at output ``q``, in tap
    order: ``flat`` the tap's index in its plane."""
    bounds, starts = [], []
    for a, qi in zip(axes, q):
        start = b.sub(b.mul(qi, _const(a.st)), _const(a.lo))  # read by tap 0
        first = _ceil_div(b, b.sub(_const(0), start), a.dl)
        stop = _ceil_div(b, b.sub(a.size, start), a.dl)
        bounds.append((_clamp(b, first, _const(0), _const(a.k)),
                       _clamp(b, stop, _const(0), _const(a.k))))
        starts.append(start)

    def tap(b, j):
        pos = [b.add(s, b.mul(ji, _const(a.dl))) for s, ji, a in zip(starts, j, axes)]
        visit(b, _flat(b, pos, [a.size for a in axes]))
    _ranges(b, f, bounds, tap)


def build(f: ir.Function, op: Op) -> None:
    """The body of ``op``'s loop function ``f``: its arguments are ``arguments(op)``'s
    pointers, then the planes, ``S`` and ``Q`` (``layout``)."""
    nd = _nd(op)
    nptr = len(arguments(op))
    ptrs = f.args[:nptr]
    for a in ptrs:
        a.add_attribute("noalias")
    planes, sizes, outs = f.args[nptr], f.args[nptr + 1:nptr + 1 + nd], f.args[nptr + 1 + nd:]
    at = op.attrs
    axes = [_Geometry(*g, s, q) for g, s, q in zip(
        zip(at["kernel"], at["strides"], at["dilation"], at["pad_lo"]), sizes, outs)]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    if op.name in _MAX_FAMILY:
        b = _max_family(b, f, op, ptrs, planes, axes)
    elif op.name == "sum_pool":
        b = _sum_pool(b, f, op, ptrs, planes, axes)
    else:
        b = _sum_pool_transpose(b, f, op, ptrs, planes, axes)
    b.ret_void()


def _plane_sizes(b: ir.IRBuilder, axes):
    """Elements of an input plane and of an output plane."""
    s, q = _const(1), _const(1)
    for a in axes:
        s, q = b.mul(s, a.size), b.mul(q, a.out)
    return s, q


def _zero(b: ir.IRBuilder, f: ir.Function, ptr, n, t) -> None:
    """``ptr[:n] = 0`` (of ``t``'s element type)."""
    zero = ir.Constant(sc.mem_type(t), 0)
    loop_nest(b, f, (n,), lambda b, i: b.store(zero, b.gep(ptr, [i[0]])))


def _disjoint(op: Op) -> bool:
    """Whether no input element is read by two windows."""
    at = op.attrs
    return all(s >= 1 + d * (k - 1) for s, d, k in zip(at["strides"], at["dilation"],
                                                       at["kernel"]))


def _max_family(b, f, op: Op, ptrs, planes, axes):
    x_t = op.operands[0].type
    x = ptrs[0]
    out = ptrs[-1]
    ty = sc.mem_type(x_t)
    is_float = x_t.dtype.kind == "f"
    unsigned = x_t.dtype.kind == "u"
    low = ir.Constant(ty, lowest(x_t.dtype))
    best, top = b.alloca(I64), b.alloca(ty)
    size, per_out = _plane_sizes(b, axes)
    if op.name == "max_pool_grad":
        _zero(b, f, out, b.mul(planes, size), x_t)
    extents = [planes, *(a.out for a in axes)]
    minus = _const(-1)

    def window(b, idx):
        p, q = idx[0], idx[1:]
        base = b.mul(p, size)
        b.store(minus, best)
        b.store(low, top)

        def tap(b, flat):
            v, m, sel = b.load(b.gep(x, [b.add(base, flat)])), b.load(top), b.load(best)
            if is_float:
                take = b.or_(b.fcmp_ordered(">", v, m), b.fcmp_unordered("uno", v, v))
            else:
                take = (b.icmp_unsigned if unsigned else b.icmp_signed)(">", v, m)
            take = b.or_(take, b.icmp_signed("<", sel, _const(0)))
            b.store(b.select(take, v, m), top)
            b.store(b.select(take, flat, sel), best)
        _window(b, f, axes, q, tap)
        o = _flat(b, idx, extents)
        sel = b.load(best)
        if op.name == "max_pool":
            b.store(b.load(top), b.gep(out, [o]))
        elif op.name == "max_pool_argmax":
            b.store(sel, b.gep(out, [o]))
        else:
            found = b.icmp_signed(">=", sel, _const(0))
            if op.name == "max_pool_take":
                b.store(ir.Constant(ty, 0), b.gep(out, [o]))
            with b.if_then(found):
                if op.name == "max_pool_take":
                    b.store(b.load(b.gep(ptrs[1], [b.add(base, sel)])), b.gep(out, [o]))
                else:
                    g = b.load(b.gep(ptrs[1], [b.add(b.mul(p, per_out), _flat(b, q, [
                        a.out for a in axes]))]))
                    at = b.gep(out, [b.add(base, sel)])
                    b.store(g if _disjoint(op) else (b.fadd(b.load(at), g)), at)
    return loop_nest(b, f, extents, window)


def _sum_pool(b, f, op: Op, ptrs, planes, axes):
    t = op.results[0].type
    x, out = ptrs
    acc = b.alloca(sc.mem_type(t))
    zero = ir.Constant(sc.mem_type(t), 0)
    size, _ = _plane_sizes(b, axes)
    extents = [planes, *(a.out for a in axes)]

    def window(b, idx):
        base = b.mul(idx[0], size)
        b.store(zero, acc)
        _window(b, f, axes, idx[1:], lambda b, flat: b.store(
            b.fadd(b.load(acc), b.load(b.gep(x, [b.add(base, flat)]))), acc))
        b.store(b.load(acc), b.gep(out, [_flat(b, idx, extents)]))
    return loop_nest(b, f, extents, window)


def _sum_pool_transpose(b, f, op: Op, ptrs, planes, axes):
    t = op.results[0].type
    g, out = ptrs
    size, per_out = _plane_sizes(b, axes)
    _zero(b, f, out, b.mul(planes, size), t)

    def plane(b, p):
        def tap(b, j):
            bounds, offs = [], []
            for a, ji in zip(axes, j):
                off = b.sub(b.mul(ji, _const(a.dl)), _const(a.lo))  # read at output 0
                first = _ceil_div(b, b.sub(_const(0), off), a.st)
                stop = _ceil_div(b, b.sub(a.size, off), a.st)
                bounds.append((_clamp(b, first, _const(0), a.out),
                               _clamp(b, stop, _const(0), a.out)))
                offs.append(off)

            def add(b, q):
                pos = [b.add(o, b.mul(qi, _const(a.st))) for o, qi, a in zip(offs, q, axes)]
                at = b.gep(out, [b.add(b.mul(p, size), _flat(b, pos, [a.size for a in axes]))])
                v = b.load(b.gep(g, [b.add(b.mul(p, per_out), _flat(b, q, [
                    a.out for a in axes]))]))
                b.store(b.fadd(b.load(at), v), at)
            _ranges(b, f, bounds, add)
        _ranges(b, f, [(_const(0), _const(a.k)) for a in axes], tap)
    return loop_nest(b, f, (planes,), lambda b, i: plane(b, i[0]))
