"""Lowering of control-flow ops to native branches and loops inside the generated code.

Each region becomes its own ``@numba.njit`` function in the module (``region<k>``,
taking the sizes table ``d`` and the region's parameters, returning a tuple);
the op becomes a Python ``if``/``while``/``for`` statement in the enclosing
function that calls it. Nothing is unrolled: trip counts are read at run time
(``scan`` lengths from ``d``, ``while_loop`` conditions computed each iteration).

``while_grad`` keeps its stack of carries in arrays that double in capacity
when full, starting at ``STACK0`` entries; the number of entries pushed is the
trip count its backward loop runs.
"""

from __future__ import annotations

from ..ir import Op
from ..ir.control_ops import floats
from .emit import _Writer, literal, np_dtype

#: control ops lowered here (``checkpoint`` is inlined by passes.fusion.prepare)
LOWERED = frozenset({"cond", "while_loop", "scan", "while_grad"})

#: initial capacity of while_grad's carry stacks
STACK0 = 16


def _call(fn: str, args) -> str:
    return f"{fn}({', '.join(['d', *args])})"


def _targets(names) -> str:
    return ", ".join(names) + ("," if len(names) == 1 else "") if names else "_"


def lines(w: _Writer, op: Op, names: dict, region, tag: str) -> list[str]:
    """Statements (indented for a function body) computing ``op``; ``region(fn)`` returns
    the name of the njit function generated for region ``fn``."""
    args = [names[v] for v in op.operands]
    outs = [names[r] for r in op.results]
    return _LOWER[op.name](w, op, args, outs, [region(r) for r in op.regions], tag)


def _cond(w, op, args, outs, fns, tag):
    lhs = _targets(outs)
    return [f"    if {args[0]}:",
            f"        {lhs} = {_call(fns[0], args[1:])}",
            "    else:",
            f"        {lhs} = {_call(fns[1], args[1:])}"]


def _carry(tag: str, n: int) -> list[str]:
    return [f"{tag}c{k}" for k in range(n)]


def _while_loop(w, op, args, outs, fns, tag):
    nc = op.attrs["num_carry"]
    c, consts = _carry(tag, nc), args[nc:]
    out = [f"    {ck} = {a}" for ck, a in zip(c, args)]
    out += [f"    while {_call(fns[0], [*c, *consts])}[0]:",
            f"        {_targets(c)} = {_call(fns[1], [*c, *consts])}"]
    return out + [f"    {o} = {ck}" for o, ck in zip(outs, c)]


def _scan(w, op, args, outs, fns, tag):
    nc, nx = op.attrs["num_carry"], op.attrs["num_xs"]
    length = op.attrs["length"]
    c = _carry(tag, nc)
    xs, consts = args[nc:nc + nx], args[nc + nx:]
    ys = [f"{tag}y{k}" for k in range(len(outs) - nc)]
    step = [f"{tag}r{k}" for k in range(len(ys))]
    n, t = f"{tag}n", f"{tag}t"
    out = [f"    {n} = {w.size(length)}"]
    out += [f"    {ck} = {a}" for ck, a in zip(c, args)]
    for y, r in zip(ys, op.results[nc:]):
        out.append(f"    {y} = np.empty({w.shape(r.type.shape)}, {np_dtype(r.type)})")
    index = f"{n} - 1 - {tag}it" if op.attrs["reverse"] else f"{tag}it"
    out += [f"    for {tag}it in range({n}):",
            f"        {t} = {index}",
            f"        {_targets([*c, *step])} = "
            f"{_call(fns[0], [*c, *(f'{x}[{t}]' for x in xs), *consts])}"]
    out += [f"        {y}[{t}] = {r}" for y, r in zip(ys, step)]
    return out + [f"    {o} = {v}" for o, v in zip(outs, [*c, *ys])]


def _while_grad(w, op, args, outs, fns, tag):
    nc = op.attrs["num_carry"]
    cond = op.regions[0]
    n_primal = len(cond.params)
    c, consts, cts = _carry(tag, nc), args[nc:n_primal], args[n_primal:]
    ctypes = [p.type for p in cond.params[:nc]]
    k_float = floats(p.type for p in cond.params[nc:])
    stacks = [f"{tag}s{k}" for k in range(nc)]
    g = [f"{tag}g{k}" for k in range(len(cts))]
    acc = [f"{tag}a{k}" for k in range(len(k_float))]
    step = [f"{tag}b{k}" for k in range(len(k_float))]
    n = f"{tag}n"
    out = [f"    {ck} = {a}" for ck, a in zip(c, args)] + [f"    {n} = 0"]
    for s, t in zip(stacks, ctypes):
        dims = "".join(f", {w.size(d)}" for d in t.shape)
        out.append(f"    {s} = np.empty(({STACK0}{dims}), {np_dtype(t)})")
    out.append(f"    while {_call(fns[0], [*c, *consts])}[0]:  # forward: push each carry")
    if stacks:
        out.append(f"        if {n} == {stacks[0]}.shape[0]:")
        out += [f"            {s} = np.concatenate(({s}, np.empty_like({s})))" for s in stacks]
    out += [f"        {s}[{n}] = {ck}" for s, ck in zip(stacks, c)]
    out += [f"        {n} += 1",
            f"        {_targets(c)} = {_call(fns[1], [*c, *consts])}"]
    out += [f"    {gk} = {a}" for gk, a in zip(g, cts)]
    for a, t in zip(acc, k_float):
        zero = literal(0, t)
        out.append(f"    {a} = " + (f"np.full({w.shape(t.shape)}, {zero})" if t.shape else zero))
    out += [f"    for {tag}j in range({n} - 1, -1, -1):  # backward: pop them",
            f"        {_targets([*g, *step])} = "
            f"{_call(fns[2], [*(f'{s}[{tag}j]' for s in stacks), *consts, *g])}"]
    out += [f"        {a} = {a} + {b}" for a, b in zip(acc, step)]
    return out + [f"    {o} = {v}" for o, v in zip(outs, [*g, *acc])]


_LOWER = {"cond": _cond, "while_loop": _while_loop, "scan": _scan, "while_grad": _while_grad}
