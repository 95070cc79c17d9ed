"""The pooling ops (``ir.pool_ops``) as loops of their own, with NumPy's bits.

Each op is one call of a loop function built in a module of its own, named by content:
its pooled operand viewed as ``(planes, S_0, .., S_{d-1})`` (the leading axes are the
planes), the pooled extents ``S`` and output extents ``Q`` its arguments (so one module
serves every size), the geometry (``kernel``, ``strides``, ``dilation``, ``pad_lo``)
constants of its text. A window's in-bounds taps are, per pooled axis, a range
``[a, b)`` of tap numbers computed from the output's position, walked in row-major
order, so padding is skipped without a test per tap and no padded copy is made. The
windows that hold no padding (most of them) are straight-line code over the taps, in a
loop along the last axis that LLVM vectorises.

Against the NumPy implementations (``ir.pool_ops``, the interpreter's):

- the max-pool ops select each window's first in-bounds tap, then each later one that
  is greater than the running maximum or NaN (ties go to the first, NaN to the last;
  between ``-0.0`` and ``0.0`` the first). ``max_pool`` is the selected element (a
  window without one: ``-inf``, or an integer type's minimum), ``max_pool_argmax`` its
  flat index in the plane (-1: none), ``max_pool_take`` the second operand there (0:
  none);
- ``max_pool_grad`` works plane by plane: it zeroes the plane, selects the taps of its
  windows (into an arena place of one plane's outputs), then visits the windows in
  row-major order: where windows cannot overlap (``stride >= dilated kernel`` on every
  axis) it stores each window's cotangent at its selected tap, as NumPy's assignment
  does (a ``-0.0`` stays), else it adds it there, in the order of ``np.add.at``;
  ``max_pool_take`` selects likewise, then reads;
- ``sum_pool`` adds a window's taps to ``0.0`` in tap order, as NumPy's per-tap passes
  do; ``sum_pool_transpose`` zeroes its result and, tap by tap in row-major order, adds
  the cotangent to every input element the tap reads, so each element's sum runs in
  NumPy's order too.
"""

from __future__ import annotations

import itertools
import math

from llvmlite import ir

from ...ir import Op
from ...ir.pool_ops import POOL_OPS, lowest
from . import scalar as sc
from .kernel import I64, loop_nest

LOWERED = tuple(sorted(POOL_OPS))
#: windows of at most this many taps are also emitted as straight-line code, for the
#: outputs whose window holds no padding
_UNROLLED = 32


def lowered(op: Op) -> bool:
    """Whether the entry runs pooling op ``op``: an operand of a dtype with a register type
    (the op's rule allows floating types, and integers for ``max_pool``/``max_pool_argmax``)."""
    dtype = op.operands[0].type.dtype
    return dtype.kind in "iuf" and sc.supported_dtype(dtype)


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


def selections(op: Op) -> int:
    """Bytes of the arena place ``op``'s function selects one plane's taps into (0: it
    takes none): for ``max_pool_grad`` and ``max_pool_take``, whose second pass reads or
    writes at the selected taps."""
    if op.name not in ("max_pool_grad", "max_pool_take"):
        return 0
    return 8 * max(1, math.prod(layout(op)[2]))


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


def _whole(b: ir.IRBuilder, axes, q, visit) -> None:
    """``visit(b, flat)`` for each tap of the window at output ``q``, every tap in
    bounds: straight-line code, one visit per tap."""
    starts = [b.sub(b.mul(qi, _const(a.st)), _const(a.lo)) for a, qi in zip(axes, q)]
    corner = _flat(b, starts, [a.size for a in axes])
    for j in itertools.product(*(range(a.k) for a in axes)):
        step, off = _const(1), _const(0)  # the tap's offset from the window's corner
        for a, ji in zip(reversed(axes), reversed(j)):
            off = b.add(off, b.mul(step, _const(ji * a.dl)))
            step = b.mul(step, a.size)
        visit(b, b.add(corner, off))


def _outputs(b: ir.IRBuilder, f: ir.Function, axes, general, whole) -> None:
    """Call ``general(b, q)`` or, where the window at ``q`` holds no padding and the
    kernel is small (``_UNROLLED``), ``whole(b, q)`` for every output position ``q`` of
    a plane, in row-major order. Along the last axis the positions with whole windows
    are one range ``[lo, hi)``, a loop of straight-line windows (which LLVM vectorises);
    rows of the other axes are tested once."""
    last, outer = axes[-1], axes[:-1]
    if math.prod(a.k for a in axes) > _UNROLLED:
        loop_nest(b, f, [a.out for a in axes], general)
        return

    def row(b, qo):
        inside = ir.Constant(ir.IntType(1), 1)
        for a, qi in zip(outer, qo):
            start = b.sub(b.mul(qi, _const(a.st)), _const(a.lo))
            end = b.add(start, _const((a.k - 1) * a.dl))
            inside = b.and_(inside, b.and_(b.icmp_signed(">=", start, _const(0)),
                                           b.icmp_signed("<", end, a.size)))
        first = _const(-(-last.lo // last.st))
        lo = b.select(b.icmp_signed("<", last.out, first), last.out, first)
        top = b.sub(last.size, _const(1 + (last.k - 1) * last.dl - last.lo))
        hi = b.select(b.icmp_signed(">=", top, _const(0)),
                      b.add(b.sdiv(top, _const(last.st)), _const(1)), _const(0))
        hi = _clamp(b, hi, lo, last.out)

        def span(start, stop, emit):
            loop_nest(b, f, (stop,), lambda b, i: emit(b, [*qo, i[0]]), bounds=(start, stop))
        with b.if_else(inside) as (yes, no):
            with yes:
                span(_const(0), lo, general)
                span(lo, hi, whole)
                span(hi, last.out, general)
            with no:
                span(_const(0), last.out, general)
    if outer:
        loop_nest(b, f, [a.out for a in outer], row)
    else:
        row(b, [])


def build(f: ir.Function, op: Op) -> None:
    """The body of ``op``'s loop function ``f``: its arguments are pointers to its
    operands and its result (and to the place of ``selections`` if any), then the planes,
    ``S`` and ``Q`` (``layout``)."""
    nd = _nd(op)
    nptr = len(op.operands) + 1 + (selections(op) > 0)
    ptrs = f.args[:nptr]
    for a in ptrs:
        a.add_attribute("noalias")
    planes, sizes, outs = f.args[nptr], f.args[nptr + 1:nptr + 1 + nd], f.args[nptr + 1 + nd:]
    at = op.attrs
    axes = [_Geometry(*g, s, q) for g, s, q in zip(
        zip(at["kernel"], at["strides"], at["dilation"], at["pad_lo"]), sizes, outs)]
    b = ir.IRBuilder(f.append_basic_block("entry"))
    s, q = _const(1), _const(1)  # elements of an input plane and of an output plane
    for a in axes:
        s, q = b.mul(s, a.size), b.mul(q, a.out)
    plane = {"max_pool": _max_pool, "max_pool_argmax": _max_pool, "sum_pool": _sum_pool,
             "max_pool_grad": _selected, "max_pool_take": _selected,
             "sum_pool_transpose": _sum_pool_transpose}[op.name](b, op, ptrs, axes, s, q)
    loop_nest(b, f, (planes,), lambda b, i: plane(b, i[0])).ret_void()


def _zero(b: ir.IRBuilder, ptr, n, t) -> None:
    """``ptr[:n] = 0`` (of ``t``'s element type)."""
    zero = ir.Constant(sc.mem_type(t), 0)
    loop_nest(b, b.function, (n,), lambda b, i: b.store(zero, b.gep(ptr, [i[0]])))


def _disjoint(op: Op) -> bool:
    """Whether no input element is read by two windows."""
    at = op.attrs
    return all(s >= 1 + d * (k - 1) for s, d, k in zip(at["strides"], at["dilation"],
                                                       at["kernel"]))


class _Max:
    """The selection of the max-pool ops over a window's taps: ``(maximum, flat index)``
    of the selected tap, ``(lowest, -1)`` before the first."""

    def __init__(self, t):
        self.t = t
        self.empty = (ir.Constant(sc.mem_type(t), lowest(t.dtype)), _const(-1))

    def step(self, b: ir.IRBuilder, state, v, flat, first: bool):
        m, sel = state
        if first:  # a window's first in-bounds tap is selected
            return v, flat
        if self.t.dtype.kind == "f":
            take = b.or_(b.fcmp_ordered(">", v, m), b.fcmp_unordered("uno", v, v))
        else:
            take = (b.icmp_unsigned if self.t.dtype.kind == "u" else b.icmp_signed)(
                ">", v, m)
        return b.select(take, v, m), b.select(take, flat, sel)

    def step_any(self, b: ir.IRBuilder, state, v, flat):
        """``step`` where the tap may be the first (``sel`` still -1)."""
        m, sel = self.step(b, state, v, flat, False)
        none = b.icmp_signed("<", state[1], _const(0))
        return b.select(none, v, m), b.select(none, flat, sel)


class _Sum:
    """``sum_pool``'s sum of a window's taps, from ``0.0`` (so a lone ``-0.0`` sums to
    ``0.0``, as NumPy's ``+=`` into zeros)."""

    def __init__(self, t):
        self.empty = (ir.Constant(sc.mem_type(t), 0.0),)

    def step(self, b: ir.IRBuilder, state, v, flat, first: bool):
        return (b.fadd(state[0], v),)

    def step_any(self, b: ir.IRBuilder, state, v, flat):
        return self.step(b, state, v, flat, False)


def _reduce_windows(b: ir.IRBuilder, x, t, axes, size, rule, finish):
    """``plane(b, p)``: each window of plane ``p`` of input ``x`` (of type ``t``, ``size``
    elements a plane) reduced by ``rule`` (``_Max`` or ``_Sum``) over its taps in order;
    ``finish(b, state, p, q)`` writes the result of the window at output ``q``."""
    slots = [b.alloca(c.type) for c in rule.empty]  # in the function's first block

    def plane(b, p):
        base = b.mul(p, size)

        def general(b, q):
            for slot, c in zip(slots, rule.empty):
                b.store(c, slot)

            def tap(b, flat):
                v = sc.load(b, b.gep(x, [b.add(base, flat)]), t)
                state = rule.step_any(b, [b.load(s) for s in slots], v, flat)
                for slot, value in zip(slots, state):
                    b.store(value, slot)
            _window(b, b.function, axes, q, tap)
            finish(b, [b.load(s) for s in slots], p, q)

        def whole(b, q):
            taps = []

            def tap(b, flat):
                v = sc.load(b, b.gep(x, [b.add(base, flat)]), t)
                taps.append(rule.step(b, taps[-1] if taps else rule.empty, v, flat, not taps))
            _whole(b, axes, q, tap)
            finish(b, taps[-1], p, q)
        _outputs(b, b.function, axes, general, whole)
    return plane


def _max_pool(b, op: Op, ptrs, axes, size, per_out):
    """``max_pool``: the selected element; ``max_pool_argmax``: its flat index."""
    x, out = ptrs
    t = op.operands[0].type
    outs = [a.out for a in axes]

    def finish(b, state, p, q):
        at = b.gep(out, [b.add(b.mul(p, per_out), _flat(b, q, outs))])
        b.store(state[0] if op.name == "max_pool" else state[1], at)
    return _reduce_windows(b, x, t, axes, size, _Max(t), finish)


def _selected(b, op: Op, ptrs, axes, size, per_out):
    """``max_pool_grad`` and ``max_pool_take``, plane by plane: the taps selected into
    ``ptrs[3]``, then read (``take``) or written (``grad``) there."""
    x, other, out, sel = ptrs
    t = op.operands[0].type
    ty = sc.mem_type(t)
    outs = [a.out for a in axes]

    def finish(b, state, p, q):
        b.store(state[1], b.gep(sel, [_flat(b, q, outs)]))
    select = _reduce_windows(b, x, t, axes, size, _Max(t), finish)

    def plane(b, p):
        base, first = b.mul(p, size), b.mul(p, per_out)
        if op.name == "max_pool_grad":
            _zero(b, b.gep(out, [base]), size, t)
        select(b, p)

        def each(b, i):
            o = i[0]
            s = b.load(b.gep(sel, [o]))
            found = b.icmp_signed(">=", s, _const(0))
            if op.name == "max_pool_take":
                b.store(ir.Constant(ty, 0), b.gep(out, [b.add(first, o)]))
                with b.if_then(found):
                    b.store(b.load(b.gep(other, [b.add(base, s)])), b.gep(out, [b.add(first, o)]))
                return
            with b.if_then(found):
                g = b.load(b.gep(other, [b.add(first, o)]))
                at = b.gep(out, [b.add(base, s)])
                b.store(g if _disjoint(op) else b.fadd(b.load(at), g), at)
        loop_nest(b, b.function, (per_out,), each)
    return plane


def _sum_pool(b, op: Op, ptrs, axes, size, per_out):
    x, out = ptrs
    outs = [a.out for a in axes]

    def finish(b, state, p, q):
        b.store(state[0], b.gep(out, [b.add(b.mul(p, per_out), _flat(b, q, outs))]))
    return _reduce_windows(b, x, op.operands[0].type, axes, size, _Sum(op.results[0].type),
                           finish)


def _sum_pool_transpose(b, op: Op, ptrs, axes, size, per_out):
    """Zero the plane, then tap by tap add the cotangent where the tap reads."""
    t = op.results[0].type
    g, out = ptrs

    def plane(b, p):
        _zero(b, b.gep(out, [b.mul(p, size)]), size, t)

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
            _ranges(b, b.function, bounds, add)
        _ranges(b, b.function, [(_const(0), _const(a.k)) for a in axes], tap)
    return plane
