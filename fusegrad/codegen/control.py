"""Lowering of control-flow ops to native branches and loops inside the generated code.

The op becomes a Python ``if``/``while``/``for`` statement of the generated
function, with its regions' statements written inline in the branch or loop
body (their locals prefixed by the op's tag, so nothing collides): one Numba
function per compiled Function, however deep the nesting. Nothing is unrolled:
trip counts are read at run time (``scan`` lengths from the sizes table ``d``,
``while_loop`` conditions computed on every iteration).

``while_grad`` keeps its stack of carries in arrays that double in capacity
when full, starting at ``STACK0`` entries; the number of entries pushed is the
trip count its backward loop runs.
"""

from __future__ import annotations

from ..ir import Function, Op
from ..ir.control_ops import floats
from ..ir.printer import value_names
from .driver import _driver_lines
from .emit import _comment, _Kernel, _py_names, _Writer, literal, np_dtype
from .rowtile_emit import absorbed_comment, rowtile_lines
from .rowtile_emit import plan as rowtile_plan

#: control ops lowered here (``checkpoint`` is inlined by passes.fusion.prepare)
LOWERED = frozenset({"cond", "while_loop", "scan", "while_grad", "while_grad_vjp"})

#: initial capacity of while_grad's carry stacks
STACK0 = 16

_IN = "    "  # one level of indentation


def inline(w: _Writer, fn: Function, args: list[str], prefix: str,
           exact: bool) -> tuple[list[str], list[str], bool]:
    """``fn`` (a region) written inline: statements binding its parameters to the
    expressions ``args`` and computing it, with every local name starting with
    ``prefix``; the names of its results; whether it flags rare inputs."""
    names = _py_names(fn, prefix)
    binds = [f"    {names[p]} = {a}" for p, a in zip(fn.params, args)]
    lines, rare = statements(w, fn, exact, prefix)
    return binds + lines, [names[r] for r in fn.results], rare


def statements(w: _Writer, fn: Function, exact: bool, prefix: str) -> tuple[list[str], bool]:
    """The statements computing ``fn`` (kernels, whole-array ops, control flow with its
    regions inline), locals prefixed by ``prefix``; and whether they flag rare inputs."""
    names = _py_names(fn, prefix)
    irnames = value_names(fn)
    kernels = iter([_Kernel(w, op, i, prefix) for i, op in enumerate(o for o in fn.ops
                                                                     if o.name == "fused")])
    rare = False
    lines = []
    tiles, absorbed = rowtile_plan(fn)  # X @ w, a loop, X.T @ r: one pass (rowtile_emit)
    for i, op in enumerate(fn.ops):
        if op in absorbed:
            lines.append(absorbed_comment(op))
        elif op in tiles:
            lines += rowtile_lines(w, next(kernels), tiles[op], names, irnames)
        elif op.name == "fused":
            k = next(kernels)
            lines += k.lines(names, irnames, exact)
            rare |= not exact and k.has_rare()
        elif op.name in LOWERED:
            lines.append(f"    # {op.name}:" + _comment(op, irnames)[3:])
            sub, sub_rare = lower(w, op, names, f"{prefix}L{i}_", exact)
            lines += sub
            rare |= sub_rare
        else:
            stmt = _driver_lines(w, op, names)
            stmt[0] += _comment(op, irnames)
            lines += stmt
    return lines, rare


def _indent(lines: list[str], levels: int = 1) -> list[str]:
    return [_IN * levels + line for line in lines]


def _assign(targets, values, levels: int) -> list[str]:
    """``a, b = x, y`` (values read before any target is written)."""
    if not targets:
        return []
    comma = "," if len(targets) == 1 else ""
    return [_IN * levels + f"    {', '.join(targets)}{comma} = {', '.join(values)}{comma}"]


class _Ctx:
    """One op being lowered: its writer, tag, and whether kernels flag rare inputs."""

    def __init__(self, w: _Writer, op: Op, tag: str, exact: bool):
        self.w, self.op, self.tag, self.exact = w, op, tag, exact
        self.rare = False

    def region(self, k: int, args, levels: int) -> tuple[list[str], list[str]]:
        """Region ``k`` inline at ``levels`` extra indentation: (lines, result names)."""
        lines, outs, rare = inline(self.w, self.op.regions[k], list(args),
                                   f"{self.tag}r{k}_", self.exact)
        self.rare |= rare
        return _indent(lines, levels), outs


def lower(w: _Writer, op: Op, names: dict, tag: str, exact: bool) -> tuple[list[str], bool]:
    """Statements (indented for a function body) computing ``op``, and whether they flag
    rare inputs into ``rare_any``."""
    ctx = _Ctx(w, op, tag, exact)
    out = _LOWER[op.name](ctx, [names[v] for v in op.operands], [names[r] for r in op.results])
    return out, ctx.rare


def _cond(ctx, args, outs):
    branches = []
    for k in (0, 1):
        body, res = ctx.region(k, args[1:], 1)
        branches.append(body + _assign(outs, res, 1) or ["        pass"])
    return [f"    if {args[0]}:", *branches[0], "    else:", *branches[1]]


def _carry(tag: str, n: int) -> list[str]:
    return [f"{tag}c{k}" for k in range(n)]


def _loop_head(ctx, c, consts) -> list[str]:
    """``while True:`` and the cond region, leaving the loop when it is false."""
    cond_lines, (cond_res,) = ctx.region(0, [*c, *consts], 1)
    return ["    while True:", *cond_lines, f"        if not {cond_res}:", "            break"]


def _while_loop(ctx, args, outs):
    nc = ctx.op.attrs["num_carry"]
    c, consts = _carry(ctx.tag, nc), args[nc:]
    body_lines, body_res = ctx.region(1, [*c, *consts], 1)
    return [*_assign(c, args[:nc], 0), *_loop_head(ctx, c, consts), *body_lines,
            *_assign(c, body_res, 1), *_assign(outs, c, 0)]


def _scan(ctx, args, outs):
    op, tag = ctx.op, ctx.tag
    nc, nx = op.attrs["num_carry"], op.attrs["num_xs"]
    c = _carry(tag, nc)
    xs, consts = args[nc:nc + nx], args[nc + nx:]
    ys = [f"{tag}y{k}" for k in range(len(outs) - nc)]
    n, t = f"{tag}n", f"{tag}t"
    out = [f"    {n} = {ctx.w.size(op.attrs['length'])}", *_assign(c, args[:nc], 0)]
    for y, r in zip(ys, op.results[nc:]):
        out.append(f"    {y} = rt.empty({ctx.w.shape(r.type.shape)}, {np_dtype(r.type)})")
    index = f"{n} - 1 - {tag}it" if op.attrs["reverse"] else f"{tag}it"
    body_lines, res = ctx.region(0, [*c, *(f"{x}[{t}]" for x in xs), *consts], 1)
    out += [f"    for {tag}it in range({n}):", f"        {t} = {index}", *body_lines,
            *_assign(c, res[:nc], 1)]
    out += [_put(y, t, r, v.type) for y, r, v in zip(ys, res[nc:], op.results[nc:])]
    return out + _assign(outs, [*c, *ys], 0)


def _while_grad(ctx, args, outs):
    op, tag, w = ctx.op, ctx.tag, ctx.w
    nc = op.attrs["num_carry"]
    cond = op.regions[0]
    n_primal = len(cond.params)
    c, consts, cts = _carry(tag, nc), args[nc:n_primal], args[n_primal:]
    k_float = floats(p.type for p in cond.params[nc:])
    stacks = [f"{tag}s{k}" for k in range(nc)]
    g = [f"{tag}g{k}" for k in range(len(cts))]
    acc = [f"{tag}a{k}" for k in range(len(k_float))]
    n = f"{tag}n"
    out = [*_assign(c, args[:nc], 0), f"    {n} = 0"]
    for s, p in zip(stacks, cond.params[:nc]):
        dims = "".join(f", {w.size(d)}" for d in p.type.shape)
        out.append(f"    {s} = rt.empty(({STACK0}{dims}), {np_dtype(p.type)})")
    body_lines, body_res = ctx.region(1, [*c, *consts], 1)
    out += ["    # forward: run the loop, pushing the carry entering each iteration",
            *_loop_head(ctx, c, consts)]
    if stacks:
        out.append(f"        if {n} == {stacks[0]}.shape[0]:")
        out += [f"            {s} = rt.grow({s})" for s in stacks]
    out += [_put(s, n, ck, p.type, 0) for s, ck, p in zip(stacks, c, cond.params)]
    out += [f"        {n} += 1", *body_lines, *_assign(c, body_res, 1)]
    out += _assign(g, cts, 0)
    for a, t in zip(acc, k_float):
        zero = literal(0, t)
        out.append(f"    {a} = " + (f"rt.full({w.shape(t.shape)}, {zero})" if t.shape else zero))
    j = f"{tag}j"
    adj_lines, adj_res = ctx.region(2, [*(f"{s}[{j}]" for s in stacks), *consts, *g], 1)
    out += ["    # backward: pop the carries, running the body's VJP",
            f"    for {j} in range({n} - 1, -1, -1):", *adj_lines,
            *_assign(g + acc, adj_res[:len(g)] + [f"{a} + {b}" for a, b in
                                                  zip(acc, adj_res[len(g):])], 1)]
    return out + _assign(outs, [*g, *acc], 0)


def _put(stack: str, i: str, value: str, t, lead: int = 1) -> str:
    """The loop-body line storing ``value`` at ``stack[i]``; ``t`` is the type of the
    stack (``lead`` = 1) or of one entry (``lead`` = 0). Arrays go through ``rt.put``."""
    if len(t.shape) > lead:
        return f"        rt.put({stack}, {i}, {value})"
    return f"        {stack}[{i}] = {value}"


def _zeros(w, name: str, t) -> str:
    zero = literal(0, t)
    return f"    {name} = " + (f"rt.full({w.shape(t.shape)}, {zero})" if t.shape else zero)


def _stack(w, name: str, n: str, t) -> str:
    dims = "".join(f", {w.size(d)}" for d in t.shape)
    return f"    {name} = rt.empty(({n}{dims}), {np_dtype(t)})"


def _while_grad_vjp(ctx, args, outs):
    """The primal loop pushing carries, the adjoint loop pushing its cotangents, then the
    adjoint's VJP in forward order and the body's VJP backwards."""
    op, tag, w = ctx.op, ctx.tag, ctx.w
    nc = op.attrs["num_carry"]
    cond = op.regions[0]
    n_primal = len(cond.params)
    c, consts = _carry(tag, nc), args[nc:n_primal]
    fc = floats(p.type for p in cond.params[:nc])
    fk = floats(p.type for p in cond.params[nc:])
    nfc, nfk = len(fc), len(fk)
    g_in = args[n_primal:n_primal + nfc]
    u_g, u_acc = args[n_primal + nfc:n_primal + 2 * nfc], args[n_primal + 2 * nfc:]
    stacks = [f"{tag}s{k}" for k in range(nc)]
    gstack = [f"{tag}h{k}" for k in range(nfc)]
    ustack = [f"{tag}u{k}" for k in range(nfc)]
    g = [f"{tag}g{k}" for k in range(nfc)]
    ug = [f"{tag}q{k}" for k in range(nfc)]
    vc = [f"{tag}v{k}" for k in range(nfc)]
    acc = [f"{tag}a{k}" for k in range(nfk)]
    n, j = f"{tag}n", f"{tag}j"
    out = [*_assign(c, args[:nc], 0), f"    {n} = 0"]
    out += [_stack(w, s, str(STACK0), p.type) for s, p in zip(stacks, cond.params[:nc])]
    body_lines, body_res = ctx.region(1, [*c, *consts], 1)
    out += ["    # the loop, pushing the carry entering each iteration",
            *_loop_head(ctx, c, consts)]
    if stacks:
        out.append(f"        if {n} == {stacks[0]}.shape[0]:")
        out += [f"            {s} = rt.grow({s})" for s in stacks]
    out += [_put(s, n, ck, p.type, 0) for s, ck, p in zip(stacks, c, cond.params)]
    out += [f"        {n} += 1", *body_lines, *_assign(c, body_res, 1)]
    saved = [f"{s}[{j}]" for s in stacks]
    adj_lines, adj_res = ctx.region(2, [*saved, *consts, *g], 1)
    out += [*_assign(g, g_in, 0), *(_stack(w, h, n, t) for h, t in zip(gstack, fc)),
            "    # the adjoint loop, pushing the cotangent each step receives",
            f"    for {j} in range({n} - 1, -1, -1):",
            *(_put(h, j, gk, t, 0) for h, gk, t in zip(gstack, g, fc)), *adj_lines,
            *_assign(g, adj_res[:nfc], 1)]
    av_lines, av_res = ctx.region(3, [*saved, *consts, *(f"{h}[{j}]" for h in gstack), *ug,
                                      *u_acc], 1)
    out += [*_assign(ug, u_g, 0), *(_zeros(w, a, t) for a, t in zip(acc, fk)),
            *(_stack(w, u, n, t) for u, t in zip(ustack, fc)),
            "    # the adjoint loop reversed (forward order), through the adjoint's VJP",
            f"    for {j} in range({n}):", *av_lines,
            *(_put(u, j, r, t, 0) for u, r, t in zip(ustack, av_res[:nfc], fc)),
            *_assign(acc + ug, [f"{a} + {r}" for a, r in zip(acc, av_res[nfc:nfc + nfk])]
                     + av_res[nfc + nfk:], 1)]
    bv_lines, bv_res = ctx.region(4, [*saved, *consts, *vc], 1)
    out += [*(_zeros(w, v, t) for v, t in zip(vc, fc)),
            "    # the loop reversed, through the body's VJP",
            f"    for {j} in range({n} - 1, -1, -1):", *bv_lines,
            *_assign(vc + acc, [f"{u}[{j}] + {r}" for u, r in zip(ustack, bv_res[:nfc])]
                     + [f"{a} + {r}" for a, r in zip(acc, bv_res[nfc:])], 1)]
    return out + _assign(outs, [*vc, *acc, *ug], 0)


_LOWER = {"cond": _cond, "while_loop": _while_loop, "scan": _scan, "while_grad": _while_grad,
          "while_grad_vjp": _while_grad_vjp}
