"""Ops over sliding windows in an entry: the convolution (``convolve.py``) and the
pooling ops (``pooling.py``), each one call of a loop function built in a module of its
own, named by content (``Entry._helper``). The geometry (from the op's attributes) is
in its text, its sizes are arguments read from the entry's size table, so one module
serves every size of a geometry and a standalone module is the same text at every size
(``standalone``).
"""

from __future__ import annotations

from ...ir import Op
from . import convolve, pooling
from .kernel import I64

#: the ops lowered here
LOWERED = ("conv", *pooling.LOWERED)


def lowered(op: Op) -> bool:
    """Whether the entry runs window op ``op`` (of ``LOWERED``)."""
    return convolve.lowered(op) if op.name == "conv" else pooling.lowered(op)


def work(op: Op) -> int:
    """Elements of loop work of ``op``: multiply-adds, or window taps."""
    return convolve.work(op) if op.name == "conv" else pooling.work(op)


class Windows:
    """``Entry``'s lowering of the window ops (a mixin: it uses the entry's builder,
    arena places, size table and ``_helper``)."""

    def _window(self, op: Op) -> None:
        if op.name == "conv":
            self._convolve(op)
        else:
            self._pool(op)

    def _pool(self, op: Op) -> None:
        out = op.results[0]
        dst = self._place(out)
        values = [*op.operands, out]
        args = [self._typed(self.vals[v] if v is not out else dst, v.type) for v in values]
        if pooling.selections(op):
            args.append(self.b.bitcast(self._scratch(pooling.selections(op)), I64.as_pointer()))
        planes, sizes, outs = pooling.layout(op)
        args += [self._size(n) for n in (planes, *sizes, *outs)]
        self._helper(args, lambda f: pooling.build(f, op))
        self.vals[out] = dst

    def _convolve(self, op: Op) -> None:
        out, (x, w) = op.results[0], op.operands
        t = out.type
        dst = self._place(out)
        places = [self._scratch(convolve.column_bytes(op))]
        if convolve.padded(op):
            places.append(self._scratch(convolve.padded_bytes(op)))
        args = [self._typed(p, t) for p in (self.vals[x], self.vals[w], dst, *places)]
        args.append(self._table(convolve.layout(op)))
        self._helper(args, lambda f: convolve.build(f, op))
        self.vals[out] = dst

