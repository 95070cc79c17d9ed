"""The sizes a loop kernel reads at run time, so kernels that differ only in extents
are one module.

A kernel's first argument points to an int64 table, filled by its caller (the
entry, which knows the shapes), laid out as ``table``: the extents of the iteration
space, the element count of each ``count`` op in its body (a mean's divisor), and
for a kernel run in chunks the chunk axis's extent and the chunk width. The text
reads them from there, but for the extents ``fixed`` keeps as constants: the
innermost of a loop nest, whose loop is the one LLVM vectorises (with a known trip
count it needs no remainder loop: the runtime form took LLVM 20-25% longer on an
MLP's kernels), and every extent of a kernel of at most ``SMALL`` elements (LLVM
unrolls its loops whole instead of vectorising them with runtime checks: a nested
Jacobian's two dozen tiny kernels took about 25% longer otherwise). So the text
holds the kernel's structure (which axes are 1, which results reduce which axes,
whether it is one flat loop) and those extents: ``x * y`` flat at any size above
``SMALL`` compiles once, ``x + b[None, :]`` once per row length, and a batch of
another size reuses every kernel but the tiny ones.

Sizes are Python ints where they are known from the structure alone (1, 0, the
innermost stride) and LLVM values read from the table otherwise; ``mul`` folds the
known ones.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator

from llvmlite import ir

from ...ir import Op
from ...ir.count_op import count_n

I64 = ir.IntType(64)
TABLE = I64.as_pointer()


def counts(op: Op) -> list[Op]:
    """The ``count`` ops of a kernel's body, in order (their values are in its table)."""
    return [bop for bop in op.regions[0].ops if bop.name == "count"]


def table(op: Op, space: tuple[int, ...], chunk: tuple[int, int] | None) -> list[int]:
    """The values of kernel ``op``'s size table: ``space``, the ``counts``, and
    ``chunk`` ``(extent, width)`` of a kernel run in chunks."""
    values = [*space, *(count_n(c.attrs["shape"], c.attrs["axes"]) for c in counts(op))]
    return values + list(chunk or ())


#: kernels of at most this many elements hold all their extents as constants
SMALL = 16


_mode = threading.local()


@contextlib.contextmanager
def all_read() -> Iterator[None]:
    """Kernels built in this block (on this thread) hold no extent as a constant (but
    1): their text is the same at every size, as a standalone module's must be
    (``standalone``)."""
    old = getattr(_mode, "all_read", False)
    _mode.all_read = True
    try:
        yield
    finally:
        _mode.all_read = old


def reading_all() -> bool:
    """Whether ``all_read`` is in effect."""
    return getattr(_mode, "all_read", False)


def fixed(space: tuple[int, ...], flat: bool) -> tuple[int, ...]:
    """The axes of ``space`` whose extents a kernel's text holds as constants: every
    axis of a kernel of at most ``SMALL`` elements, else the innermost of a loop nest
    (none inside ``all_read``)."""
    if getattr(_mode, "all_read", False):
        return ()
    if math.prod(space) <= SMALL:
        return tuple(range(len(space)))
    return (len(space) - 1,) if not flat and len(space) > 1 else ()


def mul(b: ir.IRBuilder, x, y):
    """``x * y``, each an int or an LLVM i64, folded where both are known."""
    if isinstance(x, int) and isinstance(y, int):
        return x * y
    if isinstance(x, int) and x == 1:
        return y
    if isinstance(y, int) and y == 1:
        return x
    return b.mul(value(x), value(y))


def prod(b: ir.IRBuilder, xs) -> int | ir.Value:
    out = 1
    for x in xs:
        out = mul(b, out, x)
    return out


def value(x) -> ir.Value:
    return ir.Constant(I64, x) if isinstance(x, int) else x


class Extents:
    """A kernel's sizes, read from its table at ``ptr`` where the builder stands."""

    def __init__(self, b: ir.IRBuilder, ptr: ir.Value, op: Op, space: tuple[int, ...],
                 flat: bool):
        self.b, self.ptr, self.space = b, ptr, space
        self.ncounts = len(counts(op))
        keep = fixed(space, flat)
        self.dims = [n if n == 1 or d in keep else self.load(d) for d, n in enumerate(space)]

    def load(self, k: int) -> ir.Value:
        return self.b.load(self.b.gep(self.ptr, [ir.Constant(I64, k)]))

    def count(self, j: int) -> ir.Value:
        """The element count of the body's ``j``-th ``count`` op (an i64)."""
        return self.load(len(self.space) + j)

    def chunk(self) -> tuple[ir.Value, ir.Value]:
        """``(extent, width)`` of the chunk axis of a kernel run in chunks."""
        at = len(self.space) + self.ncounts
        return self.load(at), self.load(at + 1)

    def total(self) -> int | ir.Value:
        return prod(self.b, self.dims)

    def strides(self, shape) -> list:
        """Element strides of a C-contiguous ``shape`` read over the iteration space
        (0: a broadcast axis); ``shape``'s other extents are the space's."""
        space = self.space
        lead = len(space) - len(shape)
        out: list = [0] * len(space)
        step = 1
        for j in range(len(shape) - 1, -1, -1):
            if shape[j] == 1 and space[lead + j] != 1:
                continue
            if shape[j] != space[lead + j]:
                raise ValueError(f"kernel input {shape} does not broadcast to {space}")
            out[lead + j] = step
            step = mul(self.b, step, self.dims[lead + j])
        return out

    def c_strides(self, axes) -> list:
        """Element strides of a C-contiguous array of the space's ``axes``."""
        out: list = [0] * len(axes)
        step = 1
        for j in range(len(axes) - 1, -1, -1):
            out[j] = step
            step = mul(self.b, step, self.dims[axes[j]])
        return out

    def size(self, axes) -> int | ir.Value:
        """Elements of an array of the space's ``axes``."""
        return prod(self.b, [self.dims[a] for a in axes])
