"""Driver statements: the ops of a fused Function that run outside loop kernels.

Constants, scalar ops, slices and updates, reshapes and transposes, gathers and
scatters, cumulative sums, arg-extrema and matrix products are each written as
one NumPy-style statement (or a short loop over a batch of 2-D products) calling
``codegen.rt`` where Numba needs help. ``codegen.control`` places them between
the loop kernels of ``codegen.emit``.
"""

from __future__ import annotations

import math

from ..ir import Op, Value
from ..ir.pool_ops import POOL_OPS
from .emit import LoweringError, _scalar_expr, _Writer, count_expr, literal, np_dtype
from .fft_lower import fft_lines
from .linalg_lower import LOWERED as LINALG_LOWERED
from .linalg_lower import linalg_lines
from .pool_lower import pool_expr
from .templates import SCALAR


def _driver_lines(w: _Writer, op: Op, names) -> list[str]:
    """Driver statements for one op outside any loop kernel."""
    out = op.results[0]
    args = [names[v] for v in op.operands]
    lhs = f"    {names[out]} = "
    if op.name == "constant":
        return [lhs + literal(op.attrs["value"], out.type)]
    if op.name == "count":
        return [lhs + count_expr(w, op)]
    if op.name == "fft":  # a call out to scipy.fft (codegen.fft_lower)
        return fft_lines(w, op, names)
    if op.name == "convert" or (out.type.shape == () and op.name in SCALAR):
        return [lhs + _scalar_expr(op, args)]
    if op.name.startswith("reduce_") and op.operands[0].type.shape == ():
        return [lhs + args[0]]  # nothing to reduce over
    if op.name == "update_slice":
        view = f"{names[out]}[{_slices(w, op)}]"
        if op.operands[1].type.shape:
            return [lhs + f"{args[0]}.copy()", f"    rt.assign({view}, {args[1]})"]
        return [lhs + f"{args[0]}.copy()", f"    {view} = {args[1]}"]
    if op.name in LINALG_LOWERED:
        return linalg_lines(w, op, names)
    if op.name == "matmul" and op.operands[0].type.ndim + op.operands[1].type.ndim > 4:
        return _batched_matmul(w, op, names[out], args)
    return [lhs + _array_expr(w, op, args)]


def _pre_n_post(w: _Writer, shape, axis):
    axis %= len(shape)
    pre = math.prod(shape[:axis])
    post = math.prod(shape[axis + 1:])
    return f"({w.size(pre)}, {w.size(shape[axis])}, {w.size(post)})"


def _flat(x: str, v: Value) -> str:
    if v.type.shape == ():
        return f"rt.full(1, {x})"
    return f"rt.contiguous({x}).ravel()"


def _slices(w: _Writer, op: Op) -> str:
    parts = []
    for a, b, c in zip(op.attrs["starts"], op.attrs["stops"], op.attrs["steps"]):
        stop = "" if b < 0 else w.number(b)
        parts.append(f"{w.number(a)}:{stop}:{c}")
    return ", ".join(parts)


def _array_expr(w: _Writer, op: Op, args: list[str]) -> str:
    out = op.results[0]
    oshape = out.type.shape
    x = args[0] if args else None
    if op.name == "reshape":
        if op.operands[0].type.shape == ():
            return f"rt.full({w.shape(oshape)}, {x})"
        if oshape == ():
            return f"rt.contiguous({x}).ravel()[0]"
        return f"rt.contiguous({x}).reshape({w.shape(oshape)})"
    if op.name == "transpose":
        perm = tuple(op.attrs["perm"])
        if perm == tuple(range(len(perm))):
            return x
        if perm == (1, 0):
            return f"{x}.T"  # Fortran order when x is C order: BLAS reads it in place
        return f"rt.transpose({x}, {perm})"
    if op.name == "slice":
        return f"{x}[{_slices(w, op)}]"
    if op.name == "concatenate":
        return f"np.concatenate(({', '.join(args)},), axis={op.attrs['axis']})"
    if op.name == "iota":
        return f"rt.iota({w.number(op.attrs['n'])}, {np_dtype(out.type)})"
    if op.name in ("take", "index_add", "index_set"):
        return _gather(w, op, args)
    if op.name == "cumsum":
        xs = op.operands[0].type.shape
        x3 = f"rt.contiguous({x}).reshape({_pre_n_post(w, xs, op.attrs['axis'])})"
        return f"rt.cumsum3({x3}).reshape({w.shape(xs)})"
    if op.name == "argsort":
        xs = op.operands[0].type.shape
        x3 = f"rt.contiguous({x}).reshape({_pre_n_post(w, xs, op.attrs['axis'])})"
        return f"rt.argsort3({x3}).reshape({w.shape(xs)})"
    if op.name in ("argmax", "argmin"):
        xs = op.operands[0].type.shape
        x3 = f"rt.contiguous({x}).reshape({_pre_n_post(w, xs, op.attrs['axis'])})"
        call = f"rt.argext3({x3}, {op.name == 'argmax'})"
        return f"{call}.ravel()[0]" if oshape == () else f"{call}.reshape({w.shape(oshape)})"
    if op.name == "matmul":
        return _matmul(w, op, args)
    if op.name == "conv":
        return _conv(op, args)
    if op.name in POOL_OPS:
        return pool_expr(w, op, args)
    raise LoweringError(f"no lowering for op {op.name!r}")


def _gather(w: _Writer, op: Op, args) -> str:
    x, idx = op.operands[0], op.operands[1]
    axis = op.attrs["axis"] % x.type.ndim
    x3 = f"rt.contiguous({args[0]}).reshape({_pre_n_post(w, x.type.shape, axis)})"
    flat = _flat(args[1], idx)
    oshape = op.results[0].type.shape
    if op.name == "take":
        return f"rt.take({x3}, {flat}).reshape({w.shape(oshape)})"
    xs = x.type.shape
    m = math.prod(idx.type.shape)
    v3 = (f"rt.contiguous({args[2]}).reshape(({w.size(math.prod(xs[:axis]))}, {w.size(m)}, "
          f"{w.size(math.prod(xs[axis + 1:]))}))")
    acc = op.name == "index_add"
    return f"rt.index_update({x3}, {flat}, {v3}, {acc}).reshape({w.shape(xs)})"


def _matmul_fn(out: Value) -> str:
    return "rt.matmul2" if out.type.is_inexact else "rt.matmul_int"


def _matmul(w: _Writer, op: Op, args) -> str:
    slot = w.slot(op.results[0])
    if slot:
        return f"rt.matmul_into({args[0]}, {args[1]}, {slot})"
    return f"{_matmul_fn(op.results[0])}({args[0]}, {args[1]})"


def _batched_matmul(w: _Writer, op: Op, name: str, args) -> list[str]:
    """A loop over the broadcast batch, one 2-D product each."""
    a, b = op.operands
    out = op.results[0]
    ob = out.type.shape[:-2]
    m, n = out.type.shape[-2:]
    k = a.type.shape[-1]

    def operand(x, v, rows, cols):
        vb = v.type.shape[:-2]
        nb = math.prod(vb)
        x3 = f"rt.contiguous({x}).reshape(({w.size(nb)}, {w.size(rows)}, {w.size(cols)}))"
        if vb == ob:
            return x3, "ib"
        if nb == 1:
            return x3, "0"
        full = (1,) * (len(ob) - len(vb)) + vb
        return x3, f"rt.bcast_index(ib, np.array({w.shape(ob)}), np.array({w.shape(full)}))"

    a3, sa = operand(args[0], a, m, k)
    b3, sb = operand(args[1], b, k, n)
    nb = w.size(math.prod(ob))
    fn = _matmul_fn(out)
    return [
        f"    {name}_a = {a3}",
        f"    {name}_b = {b3}",
        f"    {name}_o = rt.empty(({nb}, {w.size(m)}, {w.size(n)}), {np_dtype(out.type)})",
        f"    for ib in range({nb}):",
        f"        {name}_o[ib] = {fn}({name}_a[{sa}], {name}_b[{sb}])",
        f"    {name} = {name}_o.reshape({w.shape(out.type.shape)})",
    ]


def _conv(op: Op, args) -> str:
    """``conv`` with 1 to 3 spatial axes through ``codegen.rt_conv``."""
    nd = op.operands[0].type.ndim - 2
    if nd > 3:
        raise LoweringError(f"conv: no lowering for {nd} spatial axes (at most 3)")

    def arr(v) -> str:
        return f"np.array(({', '.join(str(int(i)) for i in v)},), np.int64)"

    a = op.attrs
    name = "conv5" if nd == 3 else f"conv{nd}"  # conv5 takes the 3-d operands as they are
    return (f"rt_conv.{name}({args[0]}, {args[1]}, {arr(a['stride'])}, {arr(a['padding'])}, "
            f"{arr(a['lhs_dilation'])}, {arr(a['rhs_dilation'])}, {int(a['groups'])})")
