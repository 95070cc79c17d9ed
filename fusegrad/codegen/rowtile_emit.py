"""Row-tile kernels: ``z = X @ w``, a fused loop's row-wise work, ``g = X.T @ r``, together.

For a group found by ``passes.rowtile.find``, the rows of ``X`` are taken in blocks of
``BLOCK_ROWS`` (the parallel unit, each with its own partial ``g`` and partial
reductions, added in block order at the end: the result does not depend on the thread
count) and, inside a block, in tiles of a few rows (``TILE_BYTES`` of ``X``, so the
tile is still in the L1 cache when it is read the second time). Per tile: each row's
dot product with ``w``, with a prefetch of the data ``PREFETCH_BYTES`` ahead for rows of
``PREFETCH_MIN_ITEMS`` items or more (so the core keeps asking memory for data while it
computes the loop and the update); the fused loop's statements for those rows (written by
``codegen.emit``); each row of the tile, times its ``r``, added into the block's ``g``.
``X`` is read from memory once instead of twice.
"""

from __future__ import annotations

from ..ir import Function, Op
from ..passes.rowtile import RowTile, find
from .emit import _Kernel, _py_names, _Writer, literal, np_dtype, reduce_init
from .rt_rowtile import BLOCK_ROWS, LITERAL_ROW_MAX, PREFETCH_MIN_ITEMS

#: False: the kernels prefetch nothing (for measuring what prefetching gives)
PREFETCH = True

_HELPERS = '''@rtr.fast_inline
def rowtile_dot_{d}(X, i, w, zero):
    acc = zero
    for j in range({d}):
        acc += X[i, j] * w[j]
    return acc


@rtr.fast_inline
def rowtile_axpy_{d}(g, a, X, i):
    for j in range({d}):
        g[j] += a * X[i, j]


@rtr.fast_inline
def rowtile_axpy4_{d}(g, r, k, X, i):
    r0, r1, r2, r3 = r[k], r[k + 1], r[k + 2], r[k + 3]
    for j in range({d}):
        g[j] += (r0 * X[i, j] + r1 * X[i + 1, j]) + (r2 * X[i + 2, j] + r3 * X[i + 3, j])'''


def _row_functions(w: _Writer, d: int) -> tuple[str, str, str]:
    """The names of the row dot product, the row update and the update by four rows the
    kernel calls: for rows up to
    ``LITERAL_ROW_MAX`` items, module functions with the row length in their text (one
    compile per feature count; the number of rows stays in the sizes table)."""
    if d > LITERAL_ROW_MAX:
        return "rtr.dot_row", "rtr.axpy_row", "rtr.axpy4_rows"
    if not hasattr(w, "helpers"):
        w.helpers = {}
    w.helpers.setdefault(d, _HELPERS.format(d=d))
    return f"rowtile_dot_{d}", f"rowtile_axpy_{d}", f"rowtile_axpy4_{d}"


def plan(fn: Function) -> tuple[dict, set]:
    """``({fused op: RowTile}, ops the groups absorb)`` for the top level of ``fn``:
    the groups whose fused loop needs no exact re-run for rare inputs."""
    tiles = {}
    absorbed = set()
    for t in find(fn):
        if _Kernel(None, t.kernel, 0).has_rare():
            continue
        tiles[t.kernel] = t
        absorbed |= set(t.absorbed)
    return tiles, absorbed


def rowtile_lines(w: _Writer, k: _Kernel, tile: RowTile, outer: dict, op_names) -> list[str]:
    """The statements of one group, for the entry function's body (``outer``: the entry's
    names of values; ``k``: the group's fused loop as a kernel)."""
    from .emit import _comment

    body, t = k.body, k.tag
    X, wv, g = tile.X, tile.w, tile.grad
    (n,) = k.space
    d = X.type.shape[1]
    dt = np_dtype(X.type)
    zero = literal(0, X.type)
    names = {v: t + s for v, s in _py_names(body).items()}
    dot, axpy, axpy4 = _row_functions(w, d)
    lines = [f"    # row-tile kernel {t[:-1]}: z = X @ w, the loop, X.T @ r, per tile of rows"
             + _comment(k.op, op_names)[1:],
             f"    {t}X = rt.contiguous({outer[X]})",
             f"    {t}w = rt.contiguous({outer[wv]}).ravel()",
             f"    {t}n = {w.size(n)}",
             f"    {t}nb = ({t}n + {BLOCK_ROWS - 1}) // {BLOCK_ROWS}",
             f"    {t}T = rtr.tile_rows({w.size(d)}, {X.type.dtype.itemsize})",
             f"    {t}gp = rt.empty(({t}nb, {w.size(d)}), {dt})"]
    local, pre = k._inputs(outer, names, flat=True)
    lines += pre
    i, s, e = f"{t}i", f"{t}t", f"{t}te"
    local[body.params[tile.z_operand]] = f"{t}z"
    stores, reds, tiled = {}, {}, {f"{t}z": dt}  # tiled: buffers of one tile's rows
    for at, ((r, p, kind), res) in enumerate(zip(k._kinds(), k.op.results)):
        if kind == "array":
            stores[r] = f"{t}out{len(stores)}"
            if at in tile.stored:
                lines.append(f"    {stores[r]} = rt.empty({t}n, {np_dtype(r.type)})")
            else:
                tiled[stores[r]] = np_dtype(r.type)
        else:
            j = len(reds)
            reds[r] = (p.name[7:], f"{t}part{j}", f"{t}buf{j}", f"{t}acc{j}", res)
            lines.append(f"    {t}part{j} = rt.empty({t}nb, {np_dtype(r.type)})")
    lines += k._constants(names, local)
    lines += [f"    for {t}b in numba.prange({t}nb):",
              f"        {t}lo = {t}b * {BLOCK_ROWS}",
              f"        {t}hi = min({t}lo + {BLOCK_ROWS}, {t}n)",
              f"        {t}g = {t}gp[{t}b]",
              f"        rt.fill({t}g, {zero})"]
    lines += [f"        {buf} = rt.empty({t}T, {bdt})" for buf, bdt in tiled.items()]
    for r, (kind, _, buf, acc, _) in reds.items():
        lines += [f"        {buf} = rt.empty({t}T, {np_dtype(r.type)})",
                  f"        {acc} = {reduce_init('reduce_' + kind, r.type)}"]

    def row(buf):  # the current row's item of an output or tile buffer
        return f"{buf}[{i} - {s}]" if buf in tiled else f"{buf}[{i}]"

    def to_buffer(bop, arg):
        return f"{reds[bop.results[0]][2]}[{i} - {s}] = {arg}"

    inner = k._statements(names, local, lambda shape: i, to_buffer, None,
                          at={body.params[tile.z_operand]: f"{i} - {s}"})
    inner += [f"{row(stores[r])} = {local[r]}" for r in stores]
    r_store = stores[body.results[tile.r_result]]
    r_at = f"{i} - {s}" if r_store in tiled else i
    lines += [f"        for {s} in range({t}lo, {t}hi, {t}T):",
              f"            {e} = min({s} + {t}T, {t}hi)",
              f"            for {i} in range({s}, {e}):",
              *([f"                rtr.prefetch_ahead({t}X, {i}, rtr.PREFETCH_BYTES)"]
                if PREFETCH and d >= PREFETCH_MIN_ITEMS else []),
              f"                {t}z[{i} - {s}] = {dot}({t}X, {i}, {t}w, {zero})",
              f"            for {i} in range({s}, {e}):"]
    lines += ["                " + x for x in inner]
    for r, (kind, _, buf, acc, _) in reds.items():
        part = f"rt.lanes_{kind}({buf}, {e} - {s}, {reduce_init('reduce_' + kind, r.type)})"
        lines.append(f"            {acc} " + (f"+= {part}" if kind == "sum" else
                                              f"= rt.{kind}imum({acc}, {part})"))
    lines += [f"            {t}m = {s} + ({e} - {s}) // 4 * 4",  # four rows per update of g
              f"            for {i} in range({s}, {t}m, 4):",
              f"                {axpy4}({t}g, {r_store}, {r_at}, {t}X, {i})",
              f"            for {i} in range({t}m, {e}):",
              f"                {axpy}({t}g, {row(r_store)}, {t}X, {i})"]
    for _, part, _, acc, _ in reds.values():
        lines.append(f"        {part}[{t}b] = {acc}")
    for r, (kind, part, _, _, res) in reds.items():
        lines.append(f"    {outer[res]} = rt.combine_{kind}({part}, "
                     f"{reduce_init('reduce_' + kind, r.type)})")
    for (r, _, kind), res in zip(k._kinds(), k.op.results):
        if kind == "array" and stores[r] not in tiled:
            lines.append(f"    {outer[res]} = {stores[r]}")
    lines.append(f"    {outer[g]} = rtr.block_sum({t}gp, {zero})"
                 + (f".reshape({w.shape(g.type.shape)})" if len(g.type.shape) == 2 else ""))
    return lines


def absorbed_comment(op: Op) -> str:
    """The line left where an op absorbed by a group would have been."""
    return f"    # {op.name}: computed by a row-tile kernel"
