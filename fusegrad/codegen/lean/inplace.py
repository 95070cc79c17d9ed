"""Which results of a fused Function may be written over a donated parameter.

``fg.jit(f, donate_argnums=...)`` gives up the donated arrays: the compiled entry may
write a result into a donated parameter's array instead of a new one (the parameters
-> new parameters of a training step: ``w - lr * g`` written over ``w``). The entry
writes each result where its caller says (its "home"), so the caller passes the donated
array as that result's array; this module says where that is safe:

- the result has the parameter's shape and dtype and is computed by a loop kernel
  (``fused``) as its own elements (not a reduction), once among the results;
- the kernel reads the parameter, if at all, element by element at the index it writes
  (a kernel input of the loop's full shape, no broadcast): each element is read before
  it is overwritten, in the same iteration;
- nothing after that kernel reads the parameter (nor a view of it: a reshape, a
  transpose products read in place), and the parameter is not itself a result (that
  result would be copied from it at the end).

The caller still checks each call's arrays (``runtime.lean_exec``): a donated array
that is a view, or shares its memory with another argument, gets a new result array.
"""

from __future__ import annotations

from ...ir import Function
from .kernel import Unsupported, space_of

#: ops whose result may be the operand's memory in an entry (views, read-in-place
#: transposes)
_ALIASING = ("reshape", "stop_gradient", "transpose")


def donatable(fused: Function, donated) -> tuple[tuple[int, int], ...]:
    """``(result index, parameter index)`` pairs: result written over donated parameter
    (indices into ``fused.results`` and ``fused.params``), each at most once."""
    if not donated:
        return ()
    position = {op: i for i, op in enumerate(fused.ops)}
    producer = {r: op for op in fused.ops for r in op.results}
    # each parameter's aliases (views of views included) and the last op reading any
    aliases = {p: {p} for i, p in enumerate(fused.params) if i in donated}
    owner = {p: p for p in aliases}
    last: dict = {p: -1 for p in aliases}
    for op in fused.ops:
        for v in op.operands:
            p = owner.get(v)
            if p is None:
                continue
            last[p] = position[op]
            if op.name in _ALIASING:
                for r in op.results:
                    owner[r] = p
                    aliases[p].add(r)
    counts: dict = {}
    for r in fused.results:
        counts[r] = counts.get(r, 0) + 1
    out, taken = [], set()
    for j, r in enumerate(fused.results):
        op = producer.get(r)
        if op is None or op.name != "fused" or counts[r] != 1:
            continue
        k = op.results.index(r)
        body = op.regions[0]
        try:
            if space_of(op) != r.type.shape or _reduced(body, k):
                continue
        except Unsupported:
            continue
        for i, p in enumerate(fused.params):
            if (p in aliases and p not in taken and p.type == r.type
                    and last[p] <= position[op] and not (aliases[p] & set(fused.results))
                    and _elementwise_read(op, aliases[p], last[p] == position[op])):
                out.append((j, i))
                taken.add(p)
                break
    return tuple(out)


def _reduced(body: Function, k: int) -> bool:
    """Whether result ``k`` of a kernel's region is a reduction's."""
    producer = {r: op for op in body.ops for r in op.results}
    op = producer.get(body.results[k])
    return op is None or op.name.startswith("reduce_")


def _elementwise_read(op, aliases: set, reads: bool) -> bool:
    """Whether kernel ``op`` reads the values ``aliases`` only at the index it writes:
    as inputs of its loop's full shape (``reads``: whether it reads them at all)."""
    if not reads:
        return True
    body, space = op.regions[0], space_of(op)
    for v, p in zip(op.operands, body.params):
        if v in aliases:
            if v.type.shape != space or p.type.shape != space:
                return False
            if any(o.name == "broadcast_to" and p in o.operands for o in body.ops):
                return False
    return True
