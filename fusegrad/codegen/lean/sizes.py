"""An entry's sizes as run-time data: the arena's size table.

An entry reads the sizes of its work (arena places, copy extents and strides,
product dimensions, chunk counts, kernels' size tables, scan lengths, gathers'
layouts) from a table its caller writes into the arena, so its text holds its
structure only: a function called at a new shape of the same structure reuses the
entry's machine code as it reuses its kernels' (what a new shape costs is then
tracing and emitting IR, no LLVM).

The arena is laid out as::

    [0, 8)                 the byte offset of the size table (int64)
    [8, 16)                what made a C entry fail (``ERROR_AT``: an int64 code)
    [HEADER, table)        places of intermediates (``_scratch``)
    [table, table + 8 n)   the size table: ``n`` int64 values

Each size is one slot of the table, read where it is used (through the table's
address, found once at the start of each function: ``_open_table``); a table of values (a
kernel's, a copy's strides) is a run at the table's end whose first index is a slot
(so runs of any length leave the slots where they are). ``size_values`` and
``table_offset`` say what the caller writes (``arena_bytes`` covers it all): into
the compiled call's arenas (``runtime.lean_exec``), or into the arena a ``.njit``
dispatcher allocates per call (``transforms.export``). Sizes that decide structure
(whether the call releases the GIL, which kernels run in chunks, extents of 1) stay
in the text, so the text of a new shape differs where, and only where, its code
must.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

I64 = ir.IntType(64)
I32 = ir.IntType(32)
#: bytes before the first place of an entry's arena (its first word: the table's offset)
HEADER = 64
ALIGN = 64
#: bytes left after every place, so that places of a multiple of 4 KiB do not start at
#: the same offset in their pages: a loop reading one and writing the next would
#: otherwise have its loads wait on unrelated stores (4K aliasing), and their lines
#: compete for the same cache sets (three lines: 21 such places differ mod 4 KiB)
STAGGER = 3 * ALIGN
#: the arena's byte where a failing entry writes what failed (``indexing.INDEX_ERROR``,
#: ``lapack.ERRORS``): a C entry's caller has no exception to read
ERROR_AT = 8


class SizeTable:
    """Mixed into ``entry.Entry`` (uses ``b``, ``arena``, ``mod`` and ``tables``)."""

    def _start_sizes(self) -> None:
        self.arena_bytes = HEADER
        self.sizes: list[int | None] = []
        self.runs: list[tuple[int, list[int]]] = []  # (slot of its start, values)
        self.size_values = np.zeros(0, np.int64)
        self.table_offset = 0
        self.table: ir.Value | None = None
        #: ``(slot, bytes)`` of each place, in arena order (a standalone module computes
        #: the places from the bytes: ``standalone``)
        self.places: list[tuple[int, int]] = []

    def _open_table(self) -> None:
        """Find the size table's address in the function the builder is starting
        (after ``self.arena`` is known), for the size reads of that function."""
        b = self.b
        head = b.bitcast(self.arena, I64.as_pointer())
        self.table = b.bitcast(b.gep(self.arena, [b.load(head)]), I64.as_pointer())

    def _size(self, n: int) -> ir.Value:
        """Size ``n`` as an i64, read from a slot of its own where the builder stands."""
        self.sizes.append(int(n))
        b = self.b
        return b.load(b.gep(self.table, [ir.Constant(I64, len(self.sizes) - 1)]))

    def _size32(self, n: int) -> ir.Value:
        return self.b.trunc(self._size(n), I32)

    def _scratch(self, nbytes: int) -> ir.Value:
        """A new place of ``nbytes`` in the arena."""
        off = self.arena_bytes
        self.arena_bytes += -(-max(nbytes, 1) // ALIGN) * ALIGN + STAGGER
        at = self._size(off)
        self.places.append((len(self.sizes) - 1, max(nbytes, 1)))
        return self.b.gep(self.arena, [at])

    def _table(self, values: list[int]) -> ir.Value:
        """A pointer to ``values`` (i64): a run of the size table."""
        b = self.b
        self.sizes.append(None)  # the run's first index, known once every slot is
        k = len(self.sizes) - 1
        self.runs.append((k, [int(v) for v in values]))
        return b.gep(self.table, [b.load(b.gep(self.table, [ir.Constant(I64, k)]))])

    def _global_array(self, kind: str, arr: ir.ArrayType, init) -> ir.Value:
        """A pointer to the first element of a constant array ``arr`` holding ``init``,
        one internal global per distinct ``(kind, init)`` in the module."""
        key = (kind, bytes(init) if isinstance(init, bytearray) else tuple(init))
        g = self.tables.get(key)
        if g is None:
            g = ir.GlobalVariable(self.mod, arr, f"{kind}{len(self.tables)}")
            g.global_constant = True
            g.linkage = "internal"
            g.initializer = ir.Constant(arr, init)
            self.tables[key] = g
        return self.b.gep(g, [ir.Constant(I32, 0), ir.Constant(I32, 0)])

    def _finish_sizes(self) -> None:
        """Lay the table out after the places: the slots, then the runs."""
        table = list(self.sizes)
        for k, values in self.runs:
            table[k] = len(table)
            table.extend(values)
        self.table_offset = -(-self.arena_bytes // ALIGN) * ALIGN
        self.size_values = np.array(table, dtype=np.int64)
        self.arena_bytes = self.table_offset + 8 * max(len(table), 1)


def fill(arena: np.ndarray, code) -> np.ndarray:
    """Write ``code``'s size table (a ``Compiled``'s ``sizes`` at ``table_offset``) into
    a new ``arena``; returns it."""
    if code.sizes is not None:
        arena[:8].view(np.int64)[0] = code.table_offset
        end = code.table_offset + 8 * len(code.sizes)
        arena[code.table_offset:end].view(np.int64)[:] = code.sizes
    return arena
