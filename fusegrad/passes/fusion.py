"""Fusion: partition a Function into loop kernels.

After differentiation and simplification, ``fuse`` groups ops into ``fused``
region ops, each one loop nest for the code generator:

- a group is a maximal set of elementwise ops over one iteration space (the
  shape of their results), plus broadcasts (index arithmetic in the loop) and
  reductions of values of that shape (accumulated in the same loop);
- every other op (``matmul``, gathers, shape changes, cumsum, ...) is a
  boundary between groups, and so are reduction results: a value computed by
  a group and needed by another op is the only thing written to memory;
- scalar (shape ``()``) arithmetic stays outside loops;
- groups never form a cycle through a boundary op: an op joins a group only if
  none of its operands depends on that group through an op outside it.

``prepare`` first removes what only matters to differentiation: it inlines
``custom_vjp_call`` (its forward region) and ``checkpoint`` and drops
``stop_gradient``. Control-flow ops (``cond``, ``while_loop``, ``scan``,
``while_grad``) are boundaries; each of their regions is fused on its own and
becomes a function of the generated module.
"""

from __future__ import annotations

from ..ir import Function, Op, Value
from ..ir.optable import OPS
from ..ir.stats import timed
from .remat import rematerialize
from .simplify import dce
from .tiling import tile_rows

#: ops a loop can compute per element (broadcast_to is index arithmetic)
LOOP_OPS = frozenset(
    n for n, d in OPS.items() if d.kind == "elementwise" and n not in ("constant",)
) | {"broadcast_to"}
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})


#: region ops prepare replaces by their first region's ops
INLINED = ("custom_vjp_call", "checkpoint")


def prepare(fn: Function) -> Function:
    """Inline ``custom_vjp_call`` and ``checkpoint`` regions, drop ``stop_gradient``; the
    same inside the regions of control-flow ops."""
    if not any(op.name in (*INLINED, "stop_gradient") or op.regions for op in fn.ops):
        return fn
    subst: dict[Value, Value] = {}
    ops: list[Op] = []
    for op in fn.ops:
        operands = tuple(subst.get(v, v) for v in op.operands)
        if op.name == "stop_gradient":
            subst[op.results[0]] = operands[0]
        elif op.name in INLINED:
            body = prepare(op.regions[0])
            inner = dict(zip(body.params, operands[: len(body.params)]))
            for bop in body.ops:  # fresh results: one region may be inlined more than once
                results = tuple(Value(r.type, r.hint) for r in bop.results)
                ops.append(bop.replace(operands=tuple(inner[v] for v in bop.operands),
                                       results=results))
                inner.update(zip(bop.results, results))
            subst.update(zip(op.results, (inner[r] for r in body.results)))
        else:
            if op.regions:
                op = op.replace(regions=tuple(prepare(r) for r in op.regions))
            ops.append(op.replace(operands=operands) if operands != op.operands else op)
    return fn.replace(ops=tuple(ops), results=tuple(subst.get(r, r) for r in fn.results))


class _Groups:
    """Union-find over group ids, each with an iteration space and its direct
    dependencies (``deps``: the groups whose results it reads, directly or through ops
    outside every group) and their inverse (``users``). Ids in either set may have been
    merged since they were recorded: ``find`` them."""

    def __init__(self):
        self.parent: list[int] = []
        self.space: list[tuple[int, ...]] = []
        self.deps: list[set[int]] = []
        self.users: list[set[int]] = []

    def new(self, space) -> int:
        self.parent.append(len(self.parent))
        self.space.append(space)
        self.deps.append(set())
        self.users.append(set())
        return len(self.parent) - 1

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def union(self, gs: list[int]) -> int:
        root = gs[0]
        for g in gs[1:]:
            self.parent[g] = root
            self.deps[root] |= self.deps[g]
            self.users[root] |= self.users[g]
        return root

    def depend(self, g: int, h: int) -> None:
        """Record that group ``g`` reads a result of group ``h``."""
        self.deps[g].add(h)
        self.users[h].add(g)

    def feeds(self, target: int, start: set[int]) -> bool:
        """Whether group ``target`` is one of the (root) groups ``start`` or one they
        depend on, transitively: a search from ``target`` through its users, which
        stays among the few groups recorded after it in the common case."""
        if target in start:
            return True
        seen = {target}
        stack = [target]
        while stack:
            for x in self.users[stack.pop()]:
                x = self.find(x)
                if x not in seen:
                    if x in start:
                        return True
                    seen.add(x)
                    stack.append(x)
        return False


def _partition(fn: Function) -> dict[Op, int]:
    groups = _Groups()
    member: dict[Op, int] = {}
    producer: dict[Value, Op] = {op_r: op for op in fn.ops for op_r in op.results}
    # the groups a value outside every loop depends on directly (through ops outside)
    front: dict[Value, set[int]] = {}
    no_groups: set[int] = set()

    def group_output(v):
        """The group whose loop produces ``v`` element by element, if any."""
        op = producer.get(v)
        if op is None or op not in member or op.name in REDUCTIONS:
            return None
        return groups.find(member[op])

    for op in fn.ops:
        reads: set[int] = set()  # groups read through ops outside them, or reductions
        for u in op.operands:
            reads |= front.get(u, no_groups)
            uop = producer.get(u)
            if uop is not None and uop in member and uop.name in REDUCTIONS:
                reads.add(groups.find(member[uop]))
        outputs = [g for g in map(group_output, op.operands) if g is not None]
        space = _space(op)
        if space is None:
            here = reads.union(outputs)
            if here:
                for r in op.results:
                    front[r] = here
            continue
        # joining a group the operands depend on through ops outside it would close a
        # cycle (it feeds a boundary op whose result reaches this op)
        upstream = {groups.find(x) for x in reads}
        for g in outputs:
            upstream.update(groups.find(x) for x in groups.deps[g])
        candidates = []
        for g in outputs:
            if groups.space[g] == space and g not in candidates \
                    and not groups.feeds(g, upstream):
                candidates.append(g)
        g = groups.union(candidates) if candidates else groups.new(space)
        member[op] = g
        for h in reads.union(outputs):
            h = groups.find(h)
            if h != g:
                groups.depend(g, h)
    _merge_siblings(fn, groups, member)
    return {op: groups.find(g) for op, g in member.items()}


def _merge_siblings(fn: Function, groups: _Groups, member: dict[Op, int]) -> None:
    """Merge groups over one iteration space that read the same array of that shape
    (from outside both) and neither of which depends on the other, so the array is read
    in one loop instead of two: sibling kernels (a gradient's reductions of one
    cotangent, say). Neither depending on the other, the merge closes no cycle."""
    inputs: dict[Value, list[int]] = {}  # array inputs of a group's full shape -> groups
    made: dict[int, set[Value]] = {}
    for op in fn.ops:
        if op in member:
            made.setdefault(groups.find(member[op]), set()).update(op.results)
    for op in fn.ops:
        g = member.get(op)
        if g is None:
            continue
        g = groups.find(g)
        for v in op.operands:
            if v.type.shape == groups.space[g] and v not in made[g]:
                seen = inputs.setdefault(v, [])
                if g not in seen:
                    seen.append(g)
    for readers in inputs.values():
        roots: list[int] = []
        for g in readers:
            g = groups.find(g)
            for i, h in enumerate(roots):
                h = groups.find(h)
                if h == g:
                    break
                if (groups.space[h] == groups.space[g] and not groups.feeds(g, {h})
                        and not groups.feeds(h, {g})):
                    roots[i] = groups.union([h, g])
                    break
            else:
                roots.append(g)


def _space(op: Op):
    """The iteration space of a loop op, or None if it is not computed in a loop."""
    if op.name in REDUCTIONS:
        shape = op.operands[0].type.shape
    elif op.name in LOOP_OPS and len(op.results) == 1:
        shape = op.results[0].type.shape
    else:
        return None
    return shape if len(shape) > 0 else None


@timed("passes")
def fuse(fn: Function, tile: bool = True) -> Function:
    """``fn`` with each group of loop ops replaced by one ``fused`` op; with ``tile``,
    first run as a loop over tiles of rows where it can (``tiling.tile_rows``: the loop's
    length and tiles depend on the shapes, so code meant for other shapes is not)."""
    fn = prepare(fn)
    if tile:
        fn = tile_rows(fn)
    if any(op.regions and op.name != "fused" for op in fn.ops):
        fn = fn.replace(ops=tuple(  # control-flow regions are fused on their own
            op.replace(regions=tuple(fuse(r, tile) for r in op.regions))
            if op.regions and op.name != "fused" else op for op in fn.ops))
    member = _partition(fn)
    if not member:
        return fn
    producer = {r: op for op in fn.ops for r in op.results}
    by_group: dict[int, list[Op]] = {}
    for op in fn.ops:
        if op in member:
            by_group.setdefault(member[op], []).append(op)
    used_outside: set[Value] = set(fn.results)
    for op in fn.ops:
        for u in op.operands:
            uop = producer.get(u)
            if uop in member and (op not in member or member[op] != member[uop]):
                used_outside.add(u)
    units: list[tuple[int, object]] = []  # (first position, op or group id)
    seen: set[int] = set()
    for i, op in enumerate(fn.ops):
        if op not in member:
            units.append((i, op))
        elif member[op] not in seen:
            seen.add(member[op])
            units.append((i, member[op]))
    new_ops: list[Op] = []
    subst: dict[Value, Value] = {}
    for unit in _toposort(units, by_group, producer, member):
        if isinstance(unit, Op):
            operands = tuple(subst.get(v, v) for v in unit.operands)
            new_ops.append(unit.replace(operands=operands) if operands != unit.operands else unit)
            continue
        body, inputs, outputs = _kernel(by_group[unit], producer, used_outside, len(new_ops))
        results = tuple(Value(v.type) for v in outputs)
        new_ops.append(Op("fused", tuple(subst.get(v, v) for v in inputs), {}, results, (body,)))
        subst.update(zip(outputs, results))
    return rematerialize(dce(fn.replace(ops=tuple(new_ops),
                                        results=tuple(subst.get(r, r) for r in fn.results))))


def _kernel(ops: list[Op], producer, used_outside, index: int):
    """The region of one group: params are its inputs, results the values used outside."""
    inside = {r for op in ops for r in op.results}
    inputs: list[Value] = []
    consts: dict[Value, Op] = {}
    for op in ops:
        for u in op.operands:
            if u in inside or u in consts or u in inputs:
                continue
            uop = producer.get(u)
            if uop is not None and uop.name in ("constant", "count"):
                consts[u] = uop
            else:
                inputs.append(u)
    params = tuple(Value(v.type) for v in inputs)
    env = dict(zip(inputs, params))
    body_ops = [Op(c.name, (), dict(c.attrs), (env.setdefault(v, Value(v.type)),))
                for v, c in consts.items()]
    for op in ops:
        results = tuple(env.setdefault(r, Value(r.type)) for r in op.results)
        body_ops.append(Op(op.name, tuple(env[u] for u in op.operands), op.attrs, results,
                           op.regions, op.loc))
    outputs = [r for op in ops for r in op.results if r in used_outside]
    body = Function(f"kernel{index}", params, tuple(body_ops), tuple(env[r] for r in outputs))
    return body, inputs, outputs


def _toposort(units, by_group, producer, member):
    """Units (boundary ops and group ids) in dependency order, stable by first position."""

    def key(unit):
        return ("group", unit) if isinstance(unit, int) else ("op", id(unit))

    def unit_of(op):
        return member.get(op, op)

    needs: dict = {}
    for _, unit in units:
        deps = set()
        for op in by_group[unit] if isinstance(unit, int) else [unit]:
            for v in op.operands:
                p = producer.get(v)
                if p is not None and key(unit_of(p)) != key(unit):
                    deps.add(key(unit_of(p)))
        needs[key(unit)] = deps
    done: set = set()
    order = []
    pending = [unit for _, unit in sorted(units, key=lambda pu: pu[0])]
    while pending:
        ready = next((u for u in pending if needs[key(u)] <= done), None)
        if ready is None:  # pragma: no cover - the partition never forms cycles
            raise RuntimeError("internal error: fusion formed a cycle")
        order.append(ready)
        done.add(key(ready))
        pending.remove(ready)
    return order
