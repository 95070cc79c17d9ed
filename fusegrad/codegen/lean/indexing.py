"""Gathers and scatters along one axis in the entry module: ``take``, ``index_add`` and
``index_set``, with NumPy's semantics (the interpreter's: ``ir/optable.py``).

Each op is one call of a loop built in a module of its own, named by content (shapes
are constants, so programs gathering the same shapes share it). Viewing ``x`` as
``[pre, n, post]`` around the axis and the indices as ``k`` of them, the loop first
checks every index in order and returns the position of the first out of range, having
written nothing; else it gathers ``out[p, i, :] = x[p, idx[i], :]`` or scatters
``out[p, idx[i], :] (+)= v[p, i, :]`` (``out`` a copy of ``x``) for ``p`` then ``i``
in order, a negative index counting from the end, and returns -1. So ``index_add``
adds repeated indices in index order (``np.add.at``'s bits) and ``index_set``'s last
write wins, as NumPy's assignment.

An index out of range raises the interpreter's ``IndexError`` (``runtime.interpreter
.run_op``'s message, naming the op, the function and the user's line): the entry
re-acquires the GIL if it released it, sets the exception (``PyErr_Format``) and
returns NULL. From inside a control-flow region, whose functions return nothing, the
entry's call is left by ``longjmp`` to a ``_setjmp`` it made on entry (only programs
with indexing or linear algebra in a region make one); a ``while_grad`` stack in flight is then not
freed. Where the error is reported from (the control op at the top of the program)
is written to the arena before the op runs, so a region shared by two ops names the
right one.
"""

from __future__ import annotations

import math
import re

from llvmlite import ir

from ...ir import Op
from . import complexes, control, decompositions, lapack
from . import scalar as sc
from .kernel import I64, PTR, loop_nest
from .sizes import ERROR_AT

#: the ops lowered here
LOWERED = ("take", "index_add", "index_set")
#: the ops of an entry that may raise (these and the linear-algebra ones)
RAISING = (*LOWERED, *lapack.ERRORS, *decompositions.ERRORS)
#: what a failed C entry writes at ``ERROR_AT``: an index out of range (``lapack.ERRORS``
#: has the others)
INDEX_ERROR = 1
#: arena bytes kept for a ``jmp_buf`` (glibc's is 200 bytes on x86-64, 312 on AArch64)
_JMP_BUF = 512
_I32 = ir.IntType(32)
#: ``lean_exec.segments`` names the segments of a program ``{name}.{i}``; the
#: interpreter names the program
_SEGMENT = re.compile(r"\.\d+$")


def work(op: Op) -> int:
    """Elements ``op`` gathers, or copies and scatters."""
    return sum(math.prod(v.type.shape) for v in (op.results[0], *op.operands[2:]))


def _layout(op: Op) -> tuple[int, int, int, int]:
    """``(pre, n, post, k)``: ``x`` as ``[pre, n, post]`` around the axis, ``k`` indices."""
    shape = op.operands[0].type.shape
    a = op.attrs["axis"] % len(shape)
    return (math.prod(shape[:a]), shape[a], math.prod(shape[a + 1:]),
            math.prod(op.operands[1].type.shape))


def _index(b: ir.IRBuilder, ptr, i, t) -> ir.Value:
    """Index ``i`` of the index array at ``ptr`` (of type ``t``), as an i64."""
    j = b.load(b.gep(ptr, [i]))
    if j.type.width == 64:
        return j
    return b.zext(j, I64) if t.dtype.kind == "u" else b.sext(j, I64)


class Indexing:
    """``Entry``'s lowering of the indexing ops (a mixin: it uses the entry's builder,
    arena places, ``_helper`` and the control-flow regions' ``_in_memory``)."""

    def _errors(self, gil) -> None:
        """Prepare to raise from the entry ``self.f`` (of ``self.fn``, the GIL released
        before as ``gil``, or None): a ``_setjmp`` into an arena place if an indexing op
        is in a control-flow region, beside the GIL's token and where the error is
        reported from."""
        self.top, self.gil, self.landing = self.f, gil, None
        if not any(op.name in RAISING for g in list(control.functions(self.fn))[1:]
                   for op in g.ops):
            return
        b = self.b
        self.landing = self.arena_bytes
        jmp = self._scratch(_JMP_BUF + 16)
        if gil is not None:
            b.store(gil, self._slot(0))
        setjmp = self._declare("_setjmp", _I32, [PTR])
        setjmp.attributes.add("returns_twice")
        back = b.call(setjmp, [jmp])
        with b.if_then(b.icmp_signed("!=", back, ir.Constant(_I32, 0)), likely=False):
            b.ret(ir.Constant(PTR, None))  # the error is set and the GIL held

    def _slot(self, i: int) -> ir.Value:
        """Pointer ``i`` after the ``jmp_buf``: the GIL's token (0), the report's
        suffix (1)."""
        at = self.b.gep(self.arena, [ir.Constant(I64, self.landing + _JMP_BUF + 8 * i)])
        return self.b.bitcast(at, PTR.as_pointer())

    def _where(self, op: Op, of: str = "") -> str:
        """The interpreter's suffix for an index error of (a region of) top-level op
        ``op``."""
        at = f", at {op.loc}" if op.loc else ""
        return f" (in {of}@{_SEGMENT.sub('', self.fn.name)}{at})"

    def _enter(self, op: Op) -> None:
        """Before control-flow op ``op``: record where an index error in its regions is
        reported from."""
        if self.landing is not None and self.f is self.top:
            self.b.store(self._string(self._where(op, f"{op.name} of ")), self._slot(1))

    def _string(self, text: str) -> ir.Value:
        """A pointer to the NUL-terminated UTF-8 ``text``, a constant of the module."""
        data = text.encode() + b"\0"
        return self._global_array("string", ir.ArrayType(ir.IntType(8), len(data)), bytearray(data))

    def _raise(self, op: Op, bad: ir.Value) -> None:
        """Raise ``op``'s ``IndexError`` for index ``bad`` (an i64)."""
        top = self.f is self.top
        self._leave(INDEX_ERROR, lambda: self._report(op, bad, top))

    def _leave(self, code: int, report) -> None:
        """Leave the entry with an error: ``report()`` sets the exception (an entry
        called from CPython), ``code`` is written at the arena's ``ERROR_AT`` (for a C
        entry's caller, which has no exception); from the entry, return NULL; from a
        region, jump back to the entry, which does."""
        b, top = self.b, self.f is self.top
        at = b.bitcast(b.gep(self.arena, [ir.Constant(I64, ERROR_AT)]), I64.as_pointer())
        b.store(ir.Constant(I64, code), at)
        if self.gil is not None:
            b.call(self._declare("PyEval_RestoreThread", ir.VoidType(), [PTR]),
                   [self.gil if top else b.load(self._slot(0))])
        if self.host:
            report()
        if top:
            b.ret(ir.Constant(PTR, None))
            return
        jump = self._declare("longjmp", ir.VoidType(), [PTR, _I32])
        jump.attributes.add("noreturn")
        b.call(jump, [b.gep(self.arena, [ir.Constant(I64, self.landing)]),
                      ir.Constant(_I32, 1)])
        b.unreachable()

    def _report(self, op: Op, bad: ir.Value, top: bool) -> None:
        """Set the interpreter's ``IndexError`` for index ``bad`` of ``op``."""
        b = self.b
        exc = self.mod.globals.get("fusegrad_PyExc_IndexError") or ir.GlobalVariable(
            self.mod, PTR, "fusegrad_PyExc_IndexError")  # registered by ``engine``
        x = op.operands[0].type.shape
        axis = op.attrs["axis"]
        tail = f" is out of bounds for axis {axis} with size "
        size = self._size(x[axis])
        suffix = self._string(self._where(op)) if top else b.load(self._slot(1))
        fmt = self.mod.globals.get("PyErr_Format") or ir.Function(
            self.mod, ir.FunctionType(PTR, [PTR, PTR], var_arg=True), "PyErr_Format")
        b.call(fmt, [b.load(exc), self._string("%s: index %lld%s%lld%s"),
                     self._string(op.name), bad, self._string(tail), size, suffix])

    def _indexing(self, op: Op) -> None:
        """``take``, ``index_add`` or ``index_set`` by its loop (see the module's
        docstring), and the error if an index is out of range."""
        out, idx = op.results[0], op.operands[1]
        t = out.type
        if t.shape == ():
            dst = self._scratch(t.dtype.itemsize)
        else:
            dst = self._place(out)
        where = self._in_memory(idx)
        if op.name == "take":
            args = [self.vals[op.operands[0]], where, dst]
        else:
            self._memcpy(dst, self.vals[op.operands[0]], t)
            args = [where, self._in_memory(op.operands[2]), dst]
        types = [t, idx.type, t] if op.name == "take" else [idx.type, t, t]
        args = [self._typed(a, ty) for a, ty in zip(args, types)]
        # the layout as arguments: one helper serves every size
        args += [self._size(n) for n in _layout(op)]
        pos = self._helper(args, lambda f: _build(f, op), I64)
        b = self.b
        with b.if_then(b.icmp_signed(">=", pos, ir.Constant(I64, 0)), likely=False):
            self._raise(op, _index(b, self._typed(where, idx.type), pos, idx.type))
        self.vals[out] = sc.load(b, self._typed(dst, t), t) if t.shape == () else dst


def _build(f: ir.Function, op: Op) -> None:
    """The body of ``op``'s loop function ``f`` (its last four arguments ``op``'s
    ``_layout``): check the indices, then gather or scatter (the module's docstring)."""
    pre, size, post, k = f.args[3:]
    t = op.results[0].type
    idx_t = op.operands[1].type
    if op.name == "take":
        x, idx, out = f.args[:3]
    else:
        idx, v, out = f.args[:3]
    for a in f.args[:3]:
        a.add_attribute("noalias")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    signed = idx_t.dtype.kind == "i"
    low = b.sub(ir.Constant(I64, 0), size)

    def check(b, i):
        j = _index(b, idx, i[0], idx_t)
        bad = (b.or_(b.icmp_signed("<", j, low), b.icmp_signed(">=", j, size))
               if signed else b.icmp_unsigned(">=", j, size))
        with b.if_then(bad, likely=False):
            b.ret(i[0])
    b = loop_nest(b, f, (k,), check)
    memcpy = ir.Function(f.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)]),
                         "llvm.memcpy.p0i8.p0i8.i64")

    def move(b, i):
        p, at = i
        j = _index(b, idx, at, idx_t)
        if signed:
            j = b.select(b.icmp_signed("<", j, ir.Constant(I64, 0)), b.add(j, size), j)
        row = b.mul(b.add(b.mul(p, size), j), post)  # x's and out's
        col = b.mul(b.add(b.mul(p, k), at), post)
        if op.name == "take":
            dst, src = b.gep(out, [col]), b.gep(x, [row])
        else:
            dst, src = b.gep(out, [row]), b.gep(v, [col])
        if op.name != "index_add":
            nbytes = b.mul(post, ir.Constant(I64, t.dtype.itemsize))
            b.call(memcpy, [b.bitcast(dst, PTR), b.bitcast(src, PTR), nbytes,
                            ir.Constant(ir.IntType(1), 0)])
            return

        def add(b, q):
            at, y = b.gep(dst, q), b.load(b.gep(src, q))
            s = b.load(at)
            b.store(b.fadd(s, y) if t.dtype.kind == "f" else
                    complexes.add(b, None, [s, y]) if t.dtype.kind == "c" else
                    b.or_(s, y) if t.dtype.kind == "b" else b.add(s, y), at)
        loop_nest(b, f, (post,), add)
    b = loop_nest(b, f, (pre, k), move)
    b.ret(ir.Constant(I64, -1))
