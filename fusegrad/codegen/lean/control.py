"""Control flow in the entry module: ``cond``, ``while_loop``, ``scan``, ``while_grad``,
``while_grad_vjp`` and ``checkpoint`` whose regions the lean generator lowers
(recursively) run as native branches and loops, with no Python per iteration.

Each region becomes an internal function of the entry module, ``void(arena, *params,
*results)``, every parameter and result passed by pointer (a scalar as one element in
memory), its body emitted by the entry's own code (``Regions._body``): its kernels are
ordinary kernels named by content (shared and cached like any other), its intermediate
values have places of their own in the one arena. Around calls to it the caller emits:

- ``cond``: a branch on the predicate to one of the two branches, both writing the op's
  results;
- ``while_loop``: ``cond`` on the carry, then ``body`` writing the next carry into a
  second buffer per carried value, and the two buffers swap (shapes are static, so the
  two are laid out once; the carry read is never the carry written);
- ``scan``: the same over ``t = 0 .. length-1`` (reversed if ``reverse``), passing row
  ``t`` of each scanned operand and writing each ``y`` into row ``t`` of its stacked
  result;
- ``while_grad``: the loop of ``while_loop`` copying each carry onto a stack that grows
  by doubling (``realloc``), then ``adjoint`` over the stack backwards, the cotangents of
  the carry swapping between two buffers as the carry does, those of the consts summed;
- ``while_grad_vjp`` (``while_grad``'s VJP) in the interpreter's order: the loop pushing
  each carry; ``adjoint`` over the stack backwards, keeping each cotangent it was given
  (a second stack, of the trip count's rows); ``adjoint_vjp`` forwards over both, keeping
  its carry cotangents (a third) and summing those of the consts; ``body_vjp``
  backwards, each carry cotangent the kept one plus its own, the consts' summed on;
- ``checkpoint`` (which ``passes.fusion`` inlines before code generation, so only IR
  given to the generator directly has it): a call of its body.
"""

from __future__ import annotations

import math

from llvmlite import ir

from ...ir import Function, Op, Value
from ...ir.printer import value_names
from . import scalar as sc
from .kernel import I64, PTR, annotation

#: the control-flow ops lowered here when their regions are
LOWERED = ("cond", "while_loop", "scan", "while_grad", "while_grad_vjp", "checkpoint")
#: bytes each carried value's place on ``while_grad``'s stack is rounded up to
_STACK_ALIGN = 16


def functions(fn: Function):
    """``fn``, then the regions of its control-flow ops, recursively (depth first, in
    program order, each once; kernels' own regions are not entered)."""
    stack, seen = [fn], set()
    while stack:
        g = stack.pop()
        if g in seen:
            continue
        seen.add(g)
        yield g
        stack.extend(r for op in reversed(g.ops) if op.name in LOWERED
                     for r in reversed(op.regions))


def walk(fn: Function):
    """The ops of ``fn`` and of its control-flow regions (``functions``), in order."""
    return (op for g in functions(fn) for op in g.ops)


def work(fn: Function, own) -> float:
    """Elements of loop work one run of ``fn`` does at least, ``own(op)`` that of an op
    outside control flow: a ``scan``'s body counts ``length`` times, a ``cond`` its
    lighter branch, a ``while_loop`` or ``while_grad(_vjp)`` is infinite (its trip count is not
    known)."""
    total = 0.0
    for op in fn.ops:
        if op.name in ("while_loop", "while_grad", "while_grad_vjp"):
            return math.inf
        if op.name == "scan":
            total += op.attrs["length"] * work(op.regions[0], own)
        elif op.name in LOWERED:
            total += min(work(r, own) for r in op.regions)
        else:
            total += own(op)
    return total


def _nbytes(v: Value) -> int:
    return math.prod(v.type.shape) * v.type.dtype.itemsize


def _rows(values) -> tuple[list[int], int]:
    """The bytes at which each of ``values`` starts in a row of a stack of them, and the
    row's size (each place rounded up to ``_STACK_ALIGN``)."""
    offsets, row = [], 0
    for v in values:
        offsets.append(row)
        row += -(-max(_nbytes(v), 1) // _STACK_ALIGN) * _STACK_ALIGN
    return offsets, row


class Regions:
    """``Entry``'s lowering of the control-flow ops (a mixin: it uses the entry's
    builder, arena places and ``_body``)."""

    def _region(self, fn: Function) -> ir.Function:
        """``fn`` as an internal function ``void(arena, *params, *results)`` of the module
        (emitted once per region)."""
        f = self.region_fns.get(fn)
        if f is not None:
            return f
        n = len(fn.params)
        f = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR] * (1 + n + len(
            fn.results))), f"region{len(self.region_fns)}.{fn.name}")
        f.linkage = "internal"
        self.region_fns[fn] = f
        saved = (self.f, self.b, self.arena, self.table, self.vals, self.home, self.names)
        self.f, self.arena = f, f.args[0]
        self.b = ir.IRBuilder(f.append_basic_block("entry"))
        self.b.comment(f"region @{fn.name}")
        self._open_table()
        self._body(fn, f.args[1:1 + n], f.args[1 + n:])
        self.b.ret_void()
        self.f, self.b, self.arena, self.table, self.vals, self.home, self.names = saved
        return f

    def _body(self, fn: Function, params, results) -> None:
        """``fn``'s ops at the builder (the entry's, or a region's function), reading its
        parameters from the pointers ``params`` and writing its results to the pointers
        ``results`` (a scalar as one element); an array result is computed in place."""
        b = self.b
        self.vals = {p: sc.load(b, self._typed(d, p.type), p.type) if p.type.shape == ()
                     else d for p, d in zip(fn.params, params)}
        self.home = {}  # result values computed in place
        for r, d in zip(fn.results, results):
            if r.type.shape != () and r not in self.home and r not in fn.params:
                self.home[r] = d
        self.names = value_names(fn)
        for op in fn.ops:
            self.b.comment(annotation(op, self.names))
            self._op(op)
        for r, d in zip(fn.results, results):
            if self.home.get(r) is d:
                continue
            if r.type.shape == ():
                sc.store(self.b, self.vals[r], self._typed(d, r.type), r.type)
            else:
                self._memcpy(d, self.vals[r], r.type)

    def _in_memory(self, v: Value) -> ir.Value:
        """A pointer to operand ``v``: an array's own, a scalar stored in an arena place."""
        if v.type.shape != ():
            return self.vals[v]
        slot = self._scratch(v.type.dtype.itemsize)
        sc.store(self.b, self.vals[v], self._typed(slot, v.type), v.type)
        return slot

    def _out(self, r: Value) -> ir.Value:
        """Where a region writes result ``r`` of the op."""
        return self._place(r) if r.type.shape != () else self._scratch(r.type.dtype.itemsize)

    def _take(self, results, ptrs) -> None:
        """The op's ``results`` are in memory at ``ptrs``: scalars are read into registers,
        arrays that are the entry's results copied to their result arrays."""
        for r, p in zip(results, ptrs):
            if r.type.shape == ():
                self.vals[r] = sc.load(self.b, self._typed(p, r.type), r.type)
                continue
            home = self.home.get(r)
            if home is not None and home is not p:
                self._memcpy(home, p, r.type)
                p = home
            self.vals[r] = p

    def _nonzero(self, v: ir.Value) -> ir.Value:
        return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))

    def _cond(self, op: Op) -> None:
        true_fn, false_fn = (self._region(r) for r in op.regions)
        ins = [self._in_memory(v) for v in op.operands[1:]]
        outs = [self._out(r) for r in op.results]
        b = self.b
        with b.if_else(self._nonzero(self.vals[op.operands[0]])) as (then, other):
            with then:
                b.call(true_fn, [self.arena, *ins, *outs])
            with other:
                b.call(false_fn, [self.arena, *ins, *outs])
        self._take(op.results, outs)

    def _checkpoint(self, op: Op) -> None:
        body = self._region(op.regions[0])
        outs = [self._out(r) for r in op.results]
        self.b.call(body, [self.arena, *(self._in_memory(v) for v in op.operands), *outs])
        self._take(op.results, outs)

    def _repeat(self, carry, test, step, zero: bool = False) -> list:
        """A loop over the values ``carry``, each in two arena buffers that swap after every
        iteration: at its head ``test(cur, i)`` (an ``i1``: go on) and in its body
        ``step(cur, nxt, i)``, which writes the next carry into ``nxt``; ``i`` counts
        iterations; the carry starts as the values', or 0 if ``zero``. Returns the
        buffers holding the final carry, and the number of iterations run."""
        b, f = self.b, self.f
        pairs = []
        for v in carry:
            first, second = self._scratch(_nbytes(v)), self._scratch(_nbytes(v))
            if zero:
                self._zero(first, v)
            elif v.type.shape == ():
                sc.store(b, self.vals[v], self._typed(first, v.type), v.type)
            else:
                self._memcpy(first, self.vals[v], v.type)
            pairs.append((first, second))
        pre = b.block
        head, body, done = (f.append_basic_block(n) for n in ("repeat", "step", "done"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(ir.Constant(I64, 0), pre)
        cur, nxt = [b.phi(PTR) for _ in pairs], [b.phi(PTR) for _ in pairs]
        for (first, second), c, n in zip(pairs, cur, nxt):
            c.add_incoming(first, pre)
            n.add_incoming(second, pre)
        b.cbranch(test(cur, i), body, done)
        b.position_at_end(body)
        step(cur, nxt, i)
        end = b.block
        i.add_incoming(b.add(i, ir.Constant(I64, 1)), end)
        for c, n in zip(cur, nxt):
            c.add_incoming(n, end)
            n.add_incoming(c, end)
        b.branch(head)
        b.position_at_end(done)
        return cur, i

    def _test(self, region: Function, consts):
        """``_repeat``'s test calling the ``cond`` region ``region`` on the carry and the
        ``consts`` (pointers)."""
        cond = self._region(region)
        t = region.results[0].type
        flag = self._scratch(t.dtype.itemsize)

        def test(cur, i):
            self.b.call(cond, [self.arena, *cur, *consts, flag])
            return self._nonzero(sc.load(self.b, self._typed(flag, t), t))
        return test

    def _while_loop(self, op: Op) -> None:
        n = op.attrs["num_carry"]
        consts = [self._in_memory(v) for v in op.operands[n:]]
        test, body = self._test(op.regions[0], consts), self._region(op.regions[1])

        def step(cur, nxt, i):
            self.b.call(body, [self.arena, *cur, *consts, *nxt])
        self._take(op.results, self._repeat(op.operands[:n], test, step)[0])

    def _scan(self, op: Op) -> None:
        length, n, m = (op.attrs[k] for k in ("length", "num_carry", "num_xs"))
        body = self._region(op.regions[0])
        xs = [(self.vals[v], _nbytes(v) // max(length, 1)) for v in op.operands[n:n + m]]
        consts = [self._in_memory(v) for v in op.operands[n + m:]]
        ys = [(self._place(r), _nbytes(r) // max(length, 1)) for r in op.results[n:]]

        def test(cur, i):
            return self.b.icmp_signed("<", i, self._size(length))

        def step(cur, nxt, i):
            b = self.b
            t = b.sub(self._size(length - 1), i) if op.attrs["reverse"] else i
            rows = [b.gep(p, [b.mul(t, self._size(size))]) for p, size in xs]
            outs = [b.gep(p, [b.mul(t, self._size(size))]) for p, size in ys]
            b.call(body, [self.arena, *cur, *rows, *consts, *nxt, *outs])
        self._take(op.results[:n], self._repeat(op.operands[:n], test, step)[0])
        for r, (p, _) in zip(op.results[n:], ys):
            self.vals[r] = p

    def _stacked(self, op: Op):
        """The loop of ``while_grad(_vjp)`` ``op`` run forwards, each carry entering an
        iteration pushed on a stack growing by doubling (``realloc``): ``(stack, count,
        saved)``, a slot holding the stack's pointer, the trip count and ``saved(j)``,
        pointers to the carry entering iteration ``j``."""
        carry = op.operands[:op.attrs["num_carry"]]
        consts = self._consts(op)
        test = self._test(op.regions[0], consts)
        body = self._region(op.regions[1])
        offsets, size = _rows(carry)
        b = self.b
        stack = b.alloca(PTR)
        b.store(ir.Constant(PTR, None), stack)
        realloc = self._declare("realloc", PTR, [PTR, I64])

        def push(cur, nxt, i):
            b = self.b
            grow = b.icmp_unsigned("==", b.and_(i, b.sub(i, ir.Constant(I64, 1))),
                                   ir.Constant(I64, 0))  # i = 0 or a power of two
            with b.if_then(grow):
                rows = b.select(b.icmp_unsigned("==", i, ir.Constant(I64, 0)),
                                ir.Constant(I64, 1), b.shl(i, ir.Constant(I64, 1)))
                b.store(b.call(realloc, [b.load(stack), b.mul(rows, self._size(size))]),
                        stack)
            for v, c, p in zip(carry, cur, self._row(b.load(stack), i, offsets, size)):
                self._memcpy(p, c, v.type)
            b.call(body, [self.arena, *cur, *consts, *nxt])
        count = self._repeat(carry, test, push)[1]
        return stack, count, lambda j: self._row(self.b.load(stack), j, offsets, size)

    def _consts(self, op: Op) -> list:
        """Pointers to the consts of ``while_grad(_vjp)`` ``op``."""
        n, k = op.attrs["num_carry"], len(op.regions[0].params)
        return [self._in_memory(v) for v in op.operands[n:k]]

    def _row(self, base, j, offsets, size) -> list:
        """Pointers to the values of row ``j`` of a stack at ``base`` (``_rows``)."""
        at = self.b.gep(base, [self.b.mul(j, self._size(size))])
        return [self.b.gep(at, [self._size(off)]) for off in offsets]

    def _while_grad(self, op: Op) -> None:
        k = len(op.regions[0].params)
        cts = op.operands[k:]
        consts = self._consts(op)
        adjoint = self._region(op.regions[2])
        stack, count, saved = self._stacked(op)
        floats = op.results[len(cts):]
        sums, parts = self._sums(floats), [self._scratch(_nbytes(r)) for r in floats]

        def pop(cur, nxt, i):
            b = self.b
            j = b.sub(b.sub(count, ir.Constant(I64, 1)), i)
            b.call(adjoint, [self.arena, *saved(j), *consts, *cur, *nxt, *parts])
            for r, total, part in zip(floats, sums, parts):
                self._accumulate(total, part, r)
        final = self._repeat(cts, lambda cur, i: self.b.icmp_signed("<", i, count), pop)[0]
        self._free(self.b.load(stack))
        self._take(op.results[:len(cts)], final)
        self._take(floats, sums)

    def _while_grad_vjp(self, op: Op) -> None:
        k = len(op.regions[0].params)
        nfc = len(op.regions[2].params) - k
        nfk = len(op.regions[2].results) - nfc
        cts, u_g = op.operands[k:k + nfc], op.operands[k + nfc:k + 2 * nfc]
        u_acc = [self._in_memory(v) for v in op.operands[k + 2 * nfc:]]
        consts = self._consts(op)
        adjoint, adjoint_vjp, body_vjp = (self._region(r) for r in op.regions[2:])
        stack, count, saved = self._stacked(op)
        b = self.b
        offsets, size = _rows(cts)
        malloc = self._declare("malloc", PTR, [I64])
        # the cotangents adjoint was given (gs), and adjoint_vjp's carry cotangents (ucs)
        kept_g, kept_u = (b.call(malloc, [b.mul(count, self._size(size))]) for _ in "gu")
        vcs, accs = op.results[:nfc], op.results[nfc:nfc + nfk]
        sums = self._sums(accs)
        parts = [self._scratch(_nbytes(r)) for r in accs]
        v_parts = [self._scratch(_nbytes(r)) for r in vcs]

        def last(i):
            return self.b.sub(self.b.sub(count, ir.Constant(I64, 1)), i)

        def more(cur, i):
            return self.b.icmp_signed("<", i, count)

        def backward(cur, nxt, i):  # gs[j] = g; g = adjoint(c_j, consts, g)
            j = last(i)
            for v, c, p in zip(cts, cur, self._row(kept_g, j, offsets, size)):
                self._memcpy(p, c, v.type)
            self.b.call(adjoint, [self.arena, *saved(j), *consts, *cur, *nxt, *parts])
        self._repeat(cts, more, backward)

        def forward(cur, nxt, i):  # ucs[i], u_consts, u_g = adjoint_vjp(...)
            self.b.call(adjoint_vjp, [self.arena, *saved(i), *consts,
                                      *self._row(kept_g, i, offsets, size), *cur, *u_acc,
                                      *self._row(kept_u, i, offsets, size), *parts, *nxt])
            for r, total, part in zip(accs, sums, parts):
                self._accumulate(total, part, r)
        final_g = self._repeat(u_g, more, forward)[0]

        def reverse(cur, nxt, i):  # vc = ucs[j] + body_vjp(c_j, consts, vc)[:nfc]
            j = last(i)
            self.b.call(body_vjp, [self.arena, *saved(j), *consts, *cur, *v_parts, *parts])
            for r, to, kept, part in zip(vcs, nxt, self._row(kept_u, j, offsets, size),
                                         v_parts):
                self._memcpy(to, kept, r.type)
                self._accumulate(to, part, r)
            for r, total, part in zip(accs, sums, parts):
                self._accumulate(total, part, r)
        final_v = self._repeat(vcs, more, reverse, zero=True)[0]
        for block in (kept_g, kept_u, self.b.load(stack)):
            self._free(block)
        self._take(vcs, final_v)
        self._take(accs, sums)
        self._take(op.results[nfc + nfk:], final_g)

    def _sums(self, values) -> list:
        """Arena places holding 0 for sums of ``values``' types."""
        out = [self._scratch(_nbytes(r)) for r in values]
        for r, p in zip(values, out):
            self._zero(p, r)
        return out

    def _free(self, block) -> None:
        self.b.call(self._declare("free", ir.VoidType(), [PTR]), [block])

    def _zero(self, ptr, r: Value) -> None:
        """Zero bits (0.0) in the place of value ``r`` at ``ptr``."""
        fill = self._declare("llvm.memset.p0i8.i64", ir.VoidType(),
                             [PTR, ir.IntType(8), I64, ir.IntType(1)])
        self.b.call(fill, [ptr, ir.Constant(ir.IntType(8), 0), self._size(_nbytes(r)),
                           ir.Constant(ir.IntType(1), 0)])

    def _accumulate(self, total, part, r: Value) -> None:
        """``total += part`` for value ``r``'s type, element by element."""
        t = r.type
        if t.shape == ():
            ptr = self._typed(total, t)
            sc.store(self.b, self.b.fadd(sc.load(self.b, ptr, t),
                                         sc.load(self.b, self._typed(part, t), t)), ptr, t)
            return

        def body(b, idx, f):
            dst = b.gep(f.args[0], [idx[0]])
            sc.store(b, b.fadd(sc.load(b, dst, t), sc.load(b, b.gep(f.args[1], [idx[0]]), t)),
                     dst, t)
        self._loop([self._typed(total, t), self._typed(part, t)], (math.prod(t.shape),), body)
