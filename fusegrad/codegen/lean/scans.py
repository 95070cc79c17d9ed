"""Ops along one axis an entry runs as loops of their own: ``cumsum``, ``argmax``,
``argmin`` and ``argsort``.

The operand is viewed as ``(pre, n, post)`` around the axis; each op is a loop function
of the arrays and those three extents (``Entry._helper``: one module per dtype, shared
by every size and program). ``cumsum`` adds along the axis in order, as
``np.cumsum`` does, so its bits are NumPy's; for each ``(pre, post)`` position
``argmax``/``argmin`` keep the first extreme, and the first NaN once one is met, as
NumPy does. ``argsort`` is a bottom-up merge sort of the indices (stable: of equal
values the earlier first; NaNs last), so its permutation is the one
``np.argsort(kind="stable")`` returns, whatever algorithm NumPy picks.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ...ir import Op
from . import complexes
from . import scalar as sc
from .kernel import I64, loop_nest

LOWERED = ("cumsum", "argmax", "argmin", "argsort")


def lowered(op: Op) -> bool:
    """Whether the entry runs ``op`` (of ``LOWERED``): a numeric operand that is not
    boolean (complex: ``cumsum`` only); for ``argmax``/``argmin``, a nonempty axis (NumPy
    raises on an empty one)."""
    x = op.operands[0].type
    if x.shape == () or x.dtype.kind not in "iufc" or not sc.supported_dtype(x.dtype):
        return False
    if op.name == "cumsum":  # (the one scan of complex values)
        return op.results[0].type.dtype == x.dtype
    return x.dtype.kind != "c" and (op.name == "argsort" or x.shape[_axis(op)] > 0)


def _axis(op: Op) -> int:
    return op.attrs["axis"] % len(op.operands[0].type.shape)


def layout(op: Op) -> tuple[int, int, int]:
    """``(pre, n, post)``: the operand's extents before, along and after the axis."""
    shape, axis = op.operands[0].type.shape, _axis(op)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def work(op: Op) -> int:
    return math.prod(op.operands[0].type.shape)


class Scans:
    """Mixed into ``entry.Entry``."""

    def _along_axis(self, op: Op, build) -> None:
        out, x = op.results[0], op.operands[0]
        t = out.type
        dst = self._scratch(t.dtype.itemsize) if t.shape == () else self._place(out)
        args = [self._typed(self.vals[x], x.type), self._typed(dst, t)]
        self._helper(args + [self._size(n) for n in layout(op)], build)
        # a 0-d result (of a 1-d operand) lives in a register
        self.vals[out] = sc.load(self.b, self._typed(dst, t), t) if t.shape == () else dst

    def _cumsum(self, op: Op) -> None:
        self._along_axis(op, lambda f: _cumsum(f, op.results[0].type))

    def _argmax(self, op: Op) -> None:
        self._along_axis(op, lambda f: _arg_extreme(f, op.operands[0].type, ">"))

    def _argmin(self, op: Op) -> None:
        self._along_axis(op, lambda f: _arg_extreme(f, op.operands[0].type, "<"))

    def _argsort(self, op: Op) -> None:
        out, x = op.results[0], op.operands[0]
        pre, n, post = layout(op)
        args = [self._typed(self.vals[x], x.type), self._typed(self._place(out), out.type),
                self.b.bitcast(self._scratch(16 * n), I64.as_pointer())]
        self._helper(args + [self._size(v) for v in (pre, n, post)],
                     lambda f: _argsort(f, x.type))
        self.vals[out] = args[1]


def _cumsum(f: ir.Function, t) -> None:
    """``out[p, j, q] = out[p, j - 1, q] + x[p, j, q]``, the first row copied."""
    x, out, pre, n, post = f.args
    for a in (x, out):
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    is_float = t.dtype.kind == "f"

    def first(b, i):
        at = b.mul(b.mul(i[0], n), post)
        at = b.add(at, i[1])
        sc.store(b, sc.load(b, b.gep(x, [at]), t), b.gep(out, [at]), t)

    def rest(b, i):
        row = b.add(i[1], ir.Constant(I64, 1))
        at = b.add(b.mul(b.add(b.mul(i[0], n), row), post), i[2])
        prev = sc.load(b, b.gep(out, [b.sub(at, post)]), t)
        v = sc.load(b, b.gep(x, [at]), t)
        total = (complexes.add(b, None, [prev, v]) if t.dtype.kind == "c" else
                 b.fadd(prev, v) if is_float else b.add(prev, v))
        sc.store(b, total, b.gep(out, [at]), t)

    with b.if_then(b.icmp_signed(">", n, ir.Constant(I64, 0))):
        b = loop_nest(b, f, (pre, post), first)
        b = loop_nest(b, f, (pre, b.sub(n, ir.Constant(I64, 1)), post), rest)
    b.ret_void()


def _arg_extreme(f: ir.Function, t, pred: str) -> None:
    """``out[p, q]``: the first ``j`` whose ``x[p, j, q]`` is extreme by ``pred`` (the
    first NaN, once one is met)."""
    x, out, pre, n, post = f.args
    for a in (x, out):
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    ty = sc.reg_type(t)
    best = b.alloca(ty)
    where = b.alloca(I64)
    is_float = t.dtype.kind == "f"
    unsigned = t.dtype.kind == "u"

    def position(b, i):
        base = b.add(b.mul(b.mul(i[0], n), post), i[1])
        b.store(sc.load(b, b.gep(x, [base]), t), best)
        b.store(ir.Constant(I64, 0), where)

        def step(b, j):
            at = b.add(base, b.mul(j[0], post))
            v, cur = sc.load(b, b.gep(x, [at]), t), b.load(best)
            if is_float:
                nan_v = b.fcmp_unordered("uno", v, v)
                nan_cur = b.fcmp_unordered("uno", cur, cur)
                take = b.or_(b.fcmp_ordered(pred, v, cur),
                             b.and_(nan_v, b.not_(nan_cur)))
            else:
                take = (b.icmp_unsigned if unsigned else b.icmp_signed)(pred, v, cur)
            b.store(b.select(take, v, cur), best)
            b.store(b.select(take, j[0], b.load(where)), where)

        loop_nest(b, f, (n,), step, bounds=(ir.Constant(I64, 1), n))
        b.store(b.load(where), b.gep(out, [b.add(b.mul(i[0], post), i[1])]))

    b = loop_nest(b, f, (pre, post), position)
    b.ret_void()


def _argsort(f: ir.Function, t) -> None:
    """``out[p, :, q]``: the stable ascending permutation of ``x[p, :, q]`` (NaNs last),
    merged bottom up between the two halves of ``tmp`` (``2 n`` indices)."""
    x, out, tmp, pre, n, post = f.args
    for a in (x, out, tmp):
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
    var = {k: b.alloca(I64) for k in ("width", "lo", "i", "j", "k", "src", "dst")}
    is_float = t.dtype.kind == "f"
    lt = b.icmp_unsigned if t.dtype.kind == "u" else b.icmp_signed

    def less(b, u, v):
        if not is_float:
            return lt("<", u, v)
        return b.or_(b.fcmp_ordered("<", u, v),
                     b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", u, u)))

    def loop(b, test, body):
        """``while test(b): body(b)``; the builder after it."""
        head, inner, done = (f.append_basic_block(k) for k in ("while", "do", "end"))
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(test(b), inner, done)
        b.position_at_end(inner)
        body(b)
        b.branch(head)
        b.position_at_end(done)

    def lane(b, idx):
        base = b.add(b.mul(b.mul(idx[0], n), post), idx[1])

        def value(b, position):
            return sc.load(b, b.gep(x, [b.add(base, b.mul(position, post))]), t)

        def get(b, name):
            return b.load(var[name])

        def put(b, name, v):
            b.store(v, var[name])

        loop_nest(b, f, (n,), lambda b, i: b.store(i[0], b.gep(tmp, [i[0]])))
        put(b, "src", zero)
        put(b, "dst", n)
        put(b, "width", one)

        def merge_pass(b):
            width, src, dst = get(b, "width"), get(b, "src"), get(b, "dst")
            put(b, "lo", zero)

            def merge(b):
                lo = get(b, "lo")
                mid = b.add(lo, width)
                mid = b.select(lt("<", mid, n), mid, n)
                hi = b.add(mid, width)
                hi = b.select(lt("<", hi, n), hi, n)
                put(b, "i", lo)
                put(b, "j", mid)
                put(b, "k", lo)

                def step(b):
                    i, j, k = get(b, "i"), get(b, "j"), get(b, "k")
                    left = b.load(b.gep(tmp, [b.add(src, b.select(lt("<", i, mid), i, lo))]))
                    right = b.load(b.gep(tmp, [b.add(src, b.select(lt("<", j, hi), j, lo))]))
                    # the right one only if the left run is done or it is strictly less
                    right_first = b.and_(lt("<", j, hi), b.or_(
                        b.icmp_signed(">=", i, mid), less(b, value(b, right), value(b, left))))
                    b.store(b.select(right_first, right, left), b.gep(tmp, [b.add(dst, k)]))
                    put(b, "i", b.select(right_first, i, b.add(i, one)))
                    put(b, "j", b.select(right_first, b.add(j, one), j))
                    put(b, "k", b.add(k, one))
                loop(b, lambda b: lt("<", get(b, "k"), hi), step)
                put(b, "lo", hi)
            loop(b, lambda b: lt("<", get(b, "lo"), n), merge)
            put(b, "src", dst)
            put(b, "dst", src)
            put(b, "width", b.shl(width, one))
        loop(b, lambda b: lt("<", get(b, "width"), n), merge_pass)
        src = get(b, "src")
        loop_nest(b, f, (n,), lambda b, i: b.store(
            b.load(b.gep(tmp, [b.add(src, i[0])])),
            b.gep(out, [b.add(base, b.mul(i[0], post))])))

    loop_nest(b, f, (pre, post), lane).ret_void()
