"""Buffer planning for a fused Function: which arrays a call may reuse instead of allocating.

Only the top-level results of loop kernels (``fused``) and of 2-D float products
(``matmul``) are planned, except those a row-tile kernel computes (``rowtile_emit``:
they never exist whole); everything else allocates as before. Each planned value
gets a *slot*, an array passed to the generated entry as an extra argument:

- an **arena** slot holds an intermediate: it lives from the op producing it to the
  last op reading it (or reading any view of it), and two intermediates whose lives do
  not overlap and have the same shape and dtype share one slot. Arena arrays are kept
  by the runtime between calls (``runtime.compiled``), so a steady-state call
  allocates no intermediates;
- **scratch** slots hold the per-chunk partial results of a flat kernel's total
  reductions, for the duration of that kernel only;
- a **donated** slot is a donated parameter reused for a result of the same shape and
  dtype, once nothing reads the parameter any more (or the kernel producing the
  result reads it at the very element it writes, as in ``p - lr * g``).

A value escapes when a result of the function is it or a view of it: it never gets an
arena slot (the caller keeps it), only a donated one. Views are followed
conservatively: every op that is neither a kernel nor a product is assumed to return
views of all its operands, unless its result is a scalar.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..ir import Function, Op, Value


@dataclass
class Slot:
    shape: tuple
    dtype: np.dtype
    #: index of the donated parameter filling this slot, or None (an arena array)
    param: int | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass
class BufferPlan:
    slots: list[Slot] = field(default_factory=list)
    #: value -> index of its slot
    of: dict = field(default_factory=dict)

    def names(self) -> list[str]:
        return [f"s{i}" for i in range(len(self.slots))]

    def name(self, v: Value) -> str | None:
        i = self.of.get(v)
        return None if i is None else f"s{i}"

    @property
    def arena(self) -> list[Slot]:
        return [s for s in self.slots if s.param is None]


def _plannable(op: Op) -> list[Value]:
    """Results of ``op`` that can be written into a given array."""
    if op.name == "fused":
        body = op.regions[0]
        producer = {r: o for o in body.ops for r in o.results}
        out = []
        for r, res in zip(body.results, op.results):
            p = producer.get(r)
            if res.type.shape == ():
                continue
            if p is not None and p.name.startswith("reduce_") and r.type.shape == ():
                continue
            out.append(res)
        return out
    if (op.name == "matmul" and op.results[0].type.is_inexact
            and op.operands[0].type.ndim == 2 and op.operands[1].type.ndim == 2):
        return [op.results[0]]
    return []


def _scratch(op: Op) -> list[tuple]:
    """Scratch arrays of a flat kernel's total reductions: per reduction, its chunks'
    partial results ``(res, "part")`` and one row of lanes per thread ``(res, "buf")``
    (a chunk fills its thread's row, then sums it into its part: the scratch is a few
    kilobytes whatever the input's size); of a loop nest's reductions over its innermost
    axis, one row ``(res, "row")``."""
    if op.name != "fused":
        return []
    import numba

    from .emit import CHUNK, _Kernel

    k = _Kernel(None, op, 0)
    if not k._flat():  # a loop nest: a row buffer per innermost-axis reduction
        return [((res, "row"), (k.space[-1],), np.dtype(r.type.dtype))
                for (r, p, kind), res in zip(k._kinds(), op.results)
                if kind == "partial" and tuple(p.attrs["axes"]) == (len(k.space) - 1,)]
    chunks = -(-math.prod(k.space) // CHUNK)
    out = []
    for (r, _, kind), res in zip(k._kinds(), op.results):
        if kind == "full":
            dt = np.dtype(r.type.dtype)
            out += [((res, "part"), (chunks,), dt),
                    ((res, "buf"), (numba.config.NUMBA_NUM_THREADS, CHUNK), dt)]
    return out


def _uses(op: Op):
    """Every value ``op`` reads, its regions' reads of enclosing values included."""
    yield from op.operands
    for region in op.regions:
        for inner in region.ops:
            yield from _uses(inner)


def _full_shape_reads(op: Op, v: Value) -> bool:
    """Whether kernel ``op`` reads ``v`` only at the element it writes (full-shape operands
    of a kernel whose results all have its iteration shape)."""
    if op.name != "fused":
        return False
    shape = v.type.shape
    body = op.regions[0]
    if any(r.type.shape != shape for r in op.results if r.type.shape != ()):
        return False
    if any(o.name.startswith("reduce_") for o in body.ops):
        return False
    return all(p.type.shape == shape for p, o in zip(body.params, op.operands) if o is v)


def plan(fn: Function, donated: frozenset[int] = frozenset(), arena: bool = True) -> BufferPlan:
    """Slots for ``fn``'s kernel and product results; ``donated`` are parameter indices
    whose arrays the caller gives up; ``arena=False`` plans donations only."""
    from .rowtile_emit import plan as rowtile_plan

    tiles, absorbed = rowtile_plan(fn)
    elsewhere = set(tiles) | absorbed  # a row-tile kernel makes its own few buffers

    def plannable(op: Op) -> list[Value]:
        return [] if op in elsewhere else _plannable(op)

    ops = fn.ops
    root: dict[Value, set] = {p: {p} for p in fn.params}
    end: dict[Value, int] = {}
    planned: dict[Value, int] = {}
    for i, op in enumerate(ops):
        reads = set()
        for v in _uses(op):
            for r in root.get(v, ()):
                end[r] = i
                reads.add(r)
        mine = plannable(op)
        for r in op.results:
            if r in mine:
                root[r] = {r}
                planned[r] = i
            elif r.type.shape == () or op.name == "fused":
                root[r] = set()  # a scalar, or a kernel's total reduction: a value, no view
            else:
                root[r] = set(reads)
    escaping = set()
    for v in fn.results:
        escaping |= root.get(v, set())
    result = BufferPlan()
    free: dict[tuple, list[int]] = {}
    releases: dict[int, list[Value]] = {}
    for v, i in planned.items():
        if v not in escaping:
            releases.setdefault(end.get(v, i), []).append(v)
    donors = {}
    for k in sorted(donated):
        p = fn.params[k]
        if p.type.shape != () and p not in escaping:
            donors[p] = k
    for i, op in enumerate(ops):
        for v in plannable(op):
            key = (v.type.shape, np.dtype(v.type.dtype))
            if v in escaping:
                donor = next((p for p in donors
                              if (p.type.shape, np.dtype(p.type.dtype)) == key
                              and (end.get(p, -1) < i or (end.get(p) == i and all(
                                  r is p or p not in root.get(r, ())
                                  for r in op.operands) and _full_shape_reads(op, p)))),
                             None)
                if donor is not None:
                    result.slots.append(Slot(v.type.shape, key[1], donors.pop(donor)))
                    result.of[v] = len(result.slots) - 1
                continue
            if not arena:
                continue
            pool = free.get(key)
            if pool:
                result.of[v] = pool.pop()
            else:
                result.slots.append(Slot(v.type.shape, key[1]))
                result.of[v] = len(result.slots) - 1
        if arena and op not in elsewhere:
            scratch = _scratch(op)
            for key, shape, dtype in scratch:
                pool = free.get((shape, dtype))
                if pool:
                    result.of[key] = pool.pop()
                else:
                    result.slots.append(Slot(shape, dtype))
                    result.of[key] = len(result.slots) - 1
            for key, shape, dtype in scratch:  # needed during this op only
                free.setdefault((shape, dtype), []).append(result.of[key])
        # values whose last read is this op free their slots for the ops after it
        for v in releases.get(i, ()):
            if v in result.of:
                free.setdefault((v.type.shape, np.dtype(v.type.dtype)), []).append(
                    result.of[v])
    return result
