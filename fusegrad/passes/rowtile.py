"""Row tiles: a matrix-vector product, row-wise work and the transposed product, in one pass.

A gradient of a generalised linear model computes ``z = X @ w`` (one value per row of
``X``), elementwise work per row (``r = f(z, y, ...)``, in one ``fused`` loop), then
``g = X.T @ r``: two full reads of ``X``, which is the large operand. ``find`` spots
this shape in a fused Function so that the code generator can compute the three
together a few rows at a time: each row of ``X`` is read from memory once, for its
dot product with ``w``, and a second time from the L1 cache, for its share of ``g``.

The match, on a fused Function (after ``passes.fusion.fuse``):

- ``z`` is ``matmul(X, w)`` with ``X`` an ``[n, d]`` matrix and ``w`` of shape ``[d]``
  (or ``[d, 1]``, then ``z`` is ``[n, 1]`` reshaped to ``[n]``), floating point;
- ``X`` is not made by a ``transpose`` (the kernel walks rows of ``X``; an ``X`` that
  arrives as a strided view at run time is copied first);
- a ``fused`` op with the one-axis iteration space ``(n,)`` takes ``z`` as an operand,
  and nothing else uses ``z`` (or the product before the reshape);
- one of its ``[n]`` results ``r`` feeds ``matmul(transpose(X), r)`` (``r`` as ``[n]``
  or reshaped to ``[n, 1]``) or ``matmul(r, X)``, with the same ``X``; the reshape of
  ``r`` has no other use (``r`` itself may have others: it is still stored).

``RowTile.stored`` names the kernel's results read after the group; the others (and
``z``) never exist whole, only a tile at a time (no per-call array of ``n`` items).

Only the analysis lives here; nothing is rewritten, so every other pass and the buffer
planner see the same Function. ``codegen.rowtile_emit`` writes the combined loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import Function, Op, Value

#: False: ``find`` matches nothing (every product is computed on its own)
ENABLED = True


@dataclass(frozen=True, eq=False)
class RowTile:
    """One matched group: the ``fused`` op ``kernel`` and what it absorbs."""

    kernel: Op  #: the fused op of the row-wise work
    X: Value  #: the [n, d] matrix
    w: Value  #: the vector of the forward product ([d] or [d, 1])
    z_operand: int  #: the kernel's operand that is the forward product
    r_result: int  #: the kernel's result that the transposed product takes
    grad: Value  #: the transposed product's result ([d], [d, 1] or [1, d])
    absorbed: frozenset  #: ops computed by the group, never on their own
    #: the kernel's row-wise ([n]) results read after the group, so stored whole; the
    #: others live a tile at a time
    stored: frozenset = frozenset()


def _uses(fn: Function) -> dict[Value, list]:
    """For each value, the ops reading it (``None`` for a use as a Function result);
    regions' reads of enclosing values count as reads by the op holding the region."""
    out: dict[Value, list] = {}

    def reads(op: Op):
        yield from op.operands
        for region in op.regions:
            for inner in region.ops:
                yield from reads(inner)

    for op in fn.ops:
        for v in set(reads(op)):
            out.setdefault(v, []).append(op)
    for r in fn.results:
        out.setdefault(r, []).append(None)
    return out


def _only_use(uses, v: Value, op: Op) -> bool:
    return uses.get(v, []) == [op]


def _float(*vs: Value) -> bool:
    dts = {v.type.dtype for v in vs}
    return len(dts) == 1 and all(v.type.dtype.kind == "f" for v in vs)


def _forward(v: Value, kernel: Op, producer, uses):
    """``(X, w, absorbed ops)`` if ``v`` (an [n] operand of ``kernel``) is ``X @ w`` used
    only by ``kernel``."""
    if not _only_use(uses, v, kernel):
        return None
    op = producer.get(v)
    absorbed = []
    if op is not None and op.name == "reshape":
        absorbed.append(op)
        inner = op.operands[0]
        if len(inner.type.shape) != 2 or inner.type.shape[1] != 1 or not _only_use(uses, inner, op):
            return None
        op = producer.get(inner)
    if op is None or op.name != "matmul" or len(op.operands) != 2:
        return None
    X, w = op.operands
    if producer.get(X) is not None and producer[X].name == "transpose":
        return None  # a transposed view: rows of X are not contiguous, the products are
    n = v.type.shape[0]
    if len(X.type.shape) != 2 or X.type.shape[0] != n or not _float(X, w, v):
        return None
    d = X.type.shape[1]
    if w.type.shape not in ((d,), (d, 1)) or (w.type.shape == (d,)) != (not absorbed):
        return None
    return X, w, [op, *absorbed]


def _transposed(r: Value, X: Value, producer, uses):
    """``(gradient value, absorbed ops)`` if ``r`` (an [n] result) feeds ``X.T @ r``."""
    d = X.type.shape[1]
    for user in uses.get(r, []):
        if user is None:
            continue
        absorbed = []
        vec = r
        if user.name == "reshape" and user.results[0].type.shape == (r.type.shape[0], 1):
            vec = user.results[0]
            users = uses.get(vec, [])
            if len(users) != 1 or users[0] is None:
                continue
            absorbed.append(user)
            user = users[0]
        if user.name != "matmul" or not _float(r, X, user.results[0]):
            continue
        a, b = user.operands
        if b is vec and a is not vec:
            t = producer.get(a)
            if (t is None or t.name != "transpose" or t.operands[0] is not X
                    or list(t.attrs.get("perm", ())) != [1, 0]):
                continue
            if _only_use(uses, a, user):
                absorbed.append(t)
        elif a is vec and b is X and vec is r:
            pass  # r @ X
        else:
            continue
        g = user.results[0]
        if g.type.shape not in ((d,), (d, 1)):
            continue
        return g, [*absorbed, user]
    return None


def find(fn: Function) -> list[RowTile]:
    """The row-tile groups of fused Function ``fn`` (top level only), in program order;
    no op belongs to two groups."""
    if not ENABLED:
        return []
    producer = {r: op for op in fn.ops for r in op.results}
    uses = _uses(fn)
    taken: set[int] = set()
    out = []
    for op in fn.ops:
        if op.name != "fused" or len(op.regions[0].params) != len(op.operands):
            continue
        body = op.regions[0]
        space = {o.operands[0].type.shape if o.name.startswith("reduce_")
                 else o.results[0].type.shape for o in body.ops
                 if o.name not in ("constant", "count")}
        if len(space) != 1 or len(next(iter(space))) != 1:
            continue
        (n,) = next(iter(space))
        inner = {r: o for o in body.ops for r in o.results}
        for k, v in enumerate(op.operands):
            if v.type.shape != (n,) or op.operands.index(v) != k:
                continue
            fwd = _forward(v, op, producer, uses)
            if fwd is None:
                continue
            X, w, absorbed = fwd
            match = None
            for j, r in enumerate(op.results):
                if r.type.shape != (n,) or body.results[j] not in inner:
                    continue
                back = _transposed(r, X, producer, uses)
                if back is not None:
                    match = (j, *back)
                    break
            if match is None:
                continue
            j, g, more = match
            group = [*absorbed, *more]
            if any(id(o) in taken for o in group) or id(op) in taken:
                continue
            taken.update(id(o) for o in (*group, op))
            inside = {id(o) for o in group}
            stored = frozenset(i for i, r in enumerate(op.results) if r.type.shape == (n,)
                               and any(u is None or id(u) not in inside for u in uses.get(r, [])))
            out.append(RowTile(op, X, w, k, j, g, frozenset(group), stored))
            break
    return out
