"""Rematerialisation: recompute cheap values in the loop that reads them.

After fusion, a loop kernel (``fused`` op) ``H`` that reads a value ``v`` computed by an
earlier kernel ``G`` pays one load per element, and ``G`` one store. When ``v`` is a
few cheap arithmetic ops (``CHEAP``) away from values that exist in memory anyway (an
input of ``G``, or another result of ``G``), ``H`` can compute ``v`` itself from those:
``s = 1 - h * h`` and ``h' = s * w`` need only ``h``. The copy in ``H`` is the same
ops on the same inputs, so its values are bit for bit the ones ``G`` stored.

A read is replaced when ``H`` then reads no more arrays than before: every array the
copy needs is one ``H`` reads already, except at most one when ``v`` has no other
reader (then ``G`` stops storing ``v``: one load for one load and one store less).
Broadcast operands (weights, biases) and constants are free. Results of ``G`` nobody
reads any more are dropped, and so are ``H``'s parameters it no longer uses.
"""

from __future__ import annotations

from ..ir import Function, Op, Value
from .simplify import dce

#: ops recomputed in a reader's loop (one instruction each, no rounding-sensitive
#: choices: the copy computes exactly what the original computed)
CHEAP = frozenset({"add", "sub", "mul", "neg", "constant", "broadcast_to"})
#: the most ops one recomputed value may cost per element
MAX_OPS = 8


def _space(body: Function):
    for op in body.ops:
        if op.name in ("constant", "count"):
            continue
        if op.name.startswith("reduce_"):
            return op.operands[0].type.shape
        return op.results[0].type.shape
    return None


def _cone(G: Op, k: int):
    """The body ops computing ``G``'s result ``k`` from its params and its other results,
    in order, and those leaves (body values); None if it is not cheap."""
    body = G.regions[0]
    producer = {r: op for op in body.ops for r in op.results}
    params, results = set(body.params), set(body.results)
    target = body.results[k]
    ops: set[Op] = set()
    leaves: list[Value] = []
    stack = [target]
    seen: set[Value] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in params or (v in results and v is not target):
            leaves.append(v)
            continue
        op = producer.get(v)
        if op is None or op.name not in CHEAP or len(op.results) != 1:
            return None
        ops.add(op)
        if len(ops) > MAX_OPS:
            return None
        stack.extend(op.operands)
    return [op for op in body.ops if op in ops], leaves


def _try(fn_ops: list[Op], h: int, j: int, producer, uses) -> Op | None:
    """``fn_ops[h]`` with its operand ``j`` recomputed in its loop, or None."""
    H = fn_ops[h]
    v = H.operands[j]
    if v not in producer:
        return None
    G, k = producer[v]
    if G.name != "fused" or G is H:
        return None
    hbody = H.regions[0]
    if _space(hbody) != v.type.shape or _space(G.regions[0]) != v.type.shape:
        return None
    found = _cone(G, k)
    if found is None:
        return None
    cone, leaves = found
    gbody = G.regions[0]
    outer = dict(zip(gbody.params, G.operands))
    outer.update(zip(gbody.results, G.results))
    leaf_outer = [outer[lv] for lv in leaves]
    new = [u for u in dict.fromkeys(leaf_outer) if u not in H.operands]
    arrays = [u for u in new if u.type.shape == v.type.shape]
    if len(arrays) > (1 if uses.get(v, 0) == 1 else 0):
        return None
    # the new body: H's params, plus one per new leaf; the copied ops first
    params = list(hbody.params)
    operands = list(H.operands)
    env: dict[Value, Value] = {}
    for lv, u in zip(leaves, leaf_outer):
        if u in operands:
            env[lv] = params[operands.index(u)]
        else:
            p = Value(u.type)
            params.append(p)
            operands.append(u)
            env[lv] = p
    copied = []
    for op in cone:
        results = tuple(Value(r.type) for r in op.results)
        copied.append(op.replace(operands=tuple(env[o] for o in op.operands), results=results))
        env.update(zip(op.results, results))
    old_param, value = hbody.params[j], env[gbody.results[k]]
    body_ops = copied + [
        op.replace(operands=tuple(value if o is old_param else o for o in op.operands))
        for op in hbody.ops]
    body_results = tuple(value if r is old_param else r for r in hbody.results)
    del params[j], operands[j]
    body = hbody.replace(params=tuple(params), ops=tuple(body_ops), results=body_results)
    return H.replace(operands=tuple(operands), regions=(body,))


def _prune(fn: Function) -> Function:
    """Drop results of fused ops nobody reads and parameters their bodies do not use."""
    used = set(fn.results)
    ops = []
    for op in reversed(fn.ops):  # every use of a value comes after its definition
        if op.name == "fused":
            body = op.regions[0]
            keep = [i for i, r in enumerate(op.results) if r in used]
            if not keep:
                continue
            body = dce(body.replace(results=tuple(body.results[i] for i in keep)))
            live = {o for bop in body.ops for o in bop.operands} | set(body.results)
            pk = [i for i, p in enumerate(body.params) if p in live]
            body = body.replace(params=tuple(body.params[i] for i in pk))
            op = op.replace(operands=tuple(op.operands[i] for i in pk),
                            results=tuple(op.results[i] for i in keep), regions=(body,))
        ops.append(op)
        used.update(op.operands)
    return fn.replace(ops=tuple(reversed(ops)))


def rematerialize(fn: Function) -> Function:
    """``fn`` (after fusion) with cheap values recomputed by the kernels that read them."""
    ops = list(fn.ops)
    changed = False
    for _ in range(4):  # a recomputed value can make its own inputs candidates
        producer = {r: (op, i) for op in ops if op.name == "fused"
                    for i, r in enumerate(op.results)}
        uses: dict[Value, int] = {}
        for op in ops:
            for u in op.operands:
                uses[u] = uses.get(u, 0) + 1
        for r in fn.results:
            uses[r] = uses.get(r, 0) + 1
        step = False
        for h, H in enumerate(ops):
            if H.name != "fused":
                continue
            j = 0
            while j < len(ops[h].operands):
                new = _try(ops, h, j, producer, uses)
                if new is None:
                    j += 1
                    continue
                v = ops[h].operands[j]
                uses[v] -= 1
                for u in new.operands[len(ops[h].operands) - 1:]:
                    uses[u] = uses.get(u, 0) + 1
                ops[h] = new
                step = changed = True
        if not step:
            break
    if not changed:
        return fn
    return _prune(fn.replace(ops=tuple(ops)))


__all__ = ["CHEAP", "rematerialize"]
