"""Row tiling: a program that treats each row of a long axis on its own runs as a loop
over tiles of rows, so a tile's intermediates stay in cache.

A physics-informed loss, a per-example gradient or an MLP over many points computes,
for every point, a chain of elementwise ops and small matrix products (``[n, 32] @
[32, 32]``), then sums over the points. Run op by op, every intermediate is an ``[n,
32]`` array written to memory and read back: megabytes per op, well beyond the L2
cache. ``tile_rows`` finds the long axis (``n``, the leading axis of a parameter) and
rewrites the program as a ``scan`` over tiles of ``T`` rows: each step computes the
row-wise ops on ``[T, ...]`` tiles (a few tens of kilobytes each) and adds the
tile's share of every sum over rows (a ``reduce_*`` over axis 0, or a product
``a^T @ b`` whose inner axis is the rows) to a carried accumulator. What does not
depend on the rows runs once before the loop; what depends on those sums runs after.

Values are classed as

- *rowed*: leading axis ``n``, row ``i`` a function of row ``i`` of rowed inputs only
  (parameters whose leading axis is ``n``, and every elementwise op, broadcast,
  reshape or transpose keeping axis 0, reduction over other axes, and product by a
  matrix not rowed, of rowed values);
- *transposed rowed*: the ``[1, 0]`` transpose of a rowed matrix, read only as the
  left operand of a product with a rowed matrix (a sum over rows);
- *summed*: a sum (max, min) over rows of a rowed value, and what is computed from
  summed values and values independent of the rows;
- *global*: independent of the rows.

A program whose rows interact any other way (a gather, a sort, a cumulative sum along
the rows, a rowed op reading a summed value such as a batch mean) is left as it is.
The sums are accumulated tile by tile, so they round differently from one pass over
all rows (to rounding; like a chunked reduction). ``FUSEGRAD_ROW_TILING=0`` turns the
pass off.
"""

from __future__ import annotations

import math

import numpy as np

from .. import config
from ..ir import Function, Op, Value
from ..ir.optable import OPS
from ..ir.types import TensorType, dtype_name

#: the shortest long axis tiled
MIN_ROWS = 1024
#: bytes of one tile of the widest rowed value (a tile's intermediates stay in L2)
TILE_BYTES = 16 << 10
#: the fewest rows in a tile
MIN_TILE = 8
#: the most columns (and inner extent) of a product of rows tiled: wider ones are BLAS's
#: work, on all rows at once
NARROW = 64

_REDUCE = {"reduce_sum": "add", "reduce_max": "maximum", "reduce_min": "minimum"}
_IDENTITY = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf}

_ROWED, _TRANSPOSED, _SUMMED, _GLOBAL = "rowed", "transposed", "summed", "global"


class _NotTiled(Exception):
    pass


def tile_rows(fn: Function) -> Function:
    """``fn`` as a loop over tiles of the rows of its long axis, where its ops allow it
    (else ``fn`` itself)."""
    if not config.ROW_TILING or not any(op.name == "matmul" for op in fn.ops):
        return fn
    sizes = sorted({p.type.shape[0] for p in fn.params
                    if p.type.ndim >= 1 and p.type.shape[0] >= MIN_ROWS}, reverse=True)
    for n in sizes:
        try:
            return _Tiler(fn, n).build()
        except _NotTiled:
            continue
    return fn


def _tile_size(n: int, row_bytes: int) -> int | None:
    most = max(MIN_TILE, TILE_BYTES // max(row_bytes, 1))
    for t in range(min(most, n // 4), MIN_TILE - 1, -1):
        if n % t == 0:
            return t
    return None


def _rows_of(t: TensorType, n: int, tile: int) -> TensorType:
    return TensorType((tile, *t.shape[1:]), t.dtype)


class _Tiler:
    def __init__(self, fn: Function, n: int):
        self.fn, self.n = fn, n
        self.kind: dict[Value, str] = {}
        for p in fn.params:
            self.kind[p] = _ROWED if p.type.ndim >= 1 and p.type.shape[0] == n else _GLOBAL
        self.combine: dict[Op, str] = {}  # a rowed -> summed op: how tiles combine
        self.promoted: list[Value] = []  # global values read a tile at a time
        for op in fn.ops:
            self._classify(op)
        if not any(op.name == "matmul" and self._rowed_operand(op) for op in fn.ops):
            raise _NotTiled
        for r in fn.results:
            if self.kind[r] == _TRANSPOSED:
                raise _NotTiled

    # -- classification -------------------------------------------------------------

    def _rowed_operand(self, op: Op) -> bool:
        return any(self.kind[v] in (_ROWED, _TRANSPOSED) for v in op.operands)

    def _classify(self, op: Op) -> None:
        kinds = [self.kind[v] for v in op.operands]
        n = self.n
        if _TRANSPOSED in kinds and not (op.name == "matmul" and kinds == [_TRANSPOSED,
                                                                          _ROWED]):
            raise _NotTiled
        if _ROWED in kinds or _TRANSPOSED in kinds:
            if _SUMMED in kinds or op.regions:
                raise _NotTiled
            out = self._rowed_op(op, kinds)
        elif (op.name == "broadcast_to" and op.results[0].type.ndim >= 1
              and op.results[0].type.shape[0] == n and _SUMMED not in kinds):
            self._aligned(op, kinds)
            out = _ROWED
        else:
            out = _SUMMED if _SUMMED in kinds else _GLOBAL
        for r in op.results:
            self.kind[r] = out

    def _aligned(self, op: Op, kinds) -> None:
        """Check that the rowed operands' axis 0 is the result's and note global ones
        that are read a tile at a time (their axis 0, ``n`` long, is the result's)."""
        rank = op.results[0].type.ndim
        for v, k in zip(op.operands, kinds):
            t = v.type
            if k == _ROWED and t.ndim != rank:
                raise _NotTiled
            if (k == _GLOBAL and t.ndim == rank and rank and t.shape[0] == self.n
                    and v not in self.promoted):
                self.promoted.append(v)

    def _rowed_op(self, op: Op, kinds) -> str:
        name, n = op.name, self.n
        out = op.results[0].type if op.results else None
        if name in _REDUCE:
            axes = tuple(op.attrs["axes"])
            if 0 in axes:
                if not np.issubdtype(out.dtype, np.floating):
                    raise _NotTiled
                self.combine[op] = _REDUCE[name]
                return _SUMMED
            return _ROWED
        if name == "matmul":
            a, b = op.operands
            if max(out.shape[-1], a.type.shape[-1] if kinds[0] == _ROWED
                   else out.shape[0]) > NARROW:
                raise _NotTiled  # a large product: BLAS on all rows at once
            if kinds == [_TRANSPOSED, _ROWED] and b.type.ndim == 2:
                if not np.issubdtype(out.dtype, np.floating):
                    raise _NotTiled
                self.combine[op] = "add"
                return _SUMMED
            if kinds == [_ROWED, _GLOBAL] and a.type.ndim == 2 and b.type.ndim == 2:
                return _ROWED
            raise _NotTiled
        if name == "transpose":
            perm = tuple(op.attrs["perm"])
            if perm == (1, 0):
                return _TRANSPOSED
            if perm and perm[0] == 0:
                return _ROWED
            raise _NotTiled
        if name == "reshape":
            src = op.operands[0].type
            if out.ndim >= 1 and out.shape[0] == n and src.shape[0] == n:
                return _ROWED
            raise _NotTiled
        if len(op.results) != 1 or out.ndim == 0 or out.shape[0] != n:
            raise _NotTiled
        if name == "broadcast_to" or (OPS[name].kind == "elementwise" and name != "constant"):
            self._aligned(op, kinds)
            return _ROWED
        raise _NotTiled

    # -- the rewrite ----------------------------------------------------------------

    def build(self) -> Function:
        fn, n = self.fn, self.n
        rowed = [v for v, k in self.kind.items() if k == _ROWED]
        row_bytes = max(math.prod(v.type.shape[1:]) * v.type.dtype.itemsize for v in rowed)
        tile = _tile_size(n, row_bytes)
        if tile is None:
            raise _NotTiled
        steps = n // tile
        pre: list[Op] = []
        post: list[Op] = []
        loop_ops: list[Op] = []
        for op in fn.ops:
            k = self.kind[op.results[0]] if op.results else _GLOBAL
            if op in self.combine or k in (_ROWED, _TRANSPOSED):
                loop_ops.append(op)
            elif k == _SUMMED:
                post.append(op)
            else:
                pre.append(op)
        xs = [p for p in fn.params if self.kind[p] == _ROWED] + self.promoted
        consts = [v for v in dict.fromkeys(v for op in loop_ops for v in op.operands)
                  if self.kind[v] == _GLOBAL and v not in self.promoted]
        sums = list(self.combine)
        ys = [r for r in fn.results if self.kind[r] == _ROWED]
        ys = list(dict.fromkeys(ys))

        # the body: (carries, tiles of xs, consts) -> (carries, ys' tiles)
        env: dict[Value, Value] = {}
        carry_in = [Value(op.results[0].type, "acc") for op in sums]
        tiles = [Value(_rows_of(v.type, n, tile), v.hint) for v in xs]
        inner = [Value(v.type, v.hint) for v in consts]
        env.update(zip(xs, tiles))
        env.update(zip(consts, inner))
        body_ops: list[Op] = []
        carry_out = {}
        for op in loop_ops:
            operands = tuple(env[v] for v in op.operands)
            if op in self.combine:
                part = Value(op.results[0].type, "part")
                body_ops.append(op.replace(operands=operands, results=(part,)))
                acc = carry_in[sums.index(op)]
                new = Value(acc.type, "acc")
                body_ops.append(Op(self.combine[op], (acc, part), {}, (new,), loc=op.loc))
                carry_out[op] = new
                continue
            attrs = dict(op.attrs)
            if op.name in ("reshape", "broadcast_to"):
                attrs["shape"] = [tile, *list(attrs["shape"])[1:]]
            results = []
            for r in op.results:
                t = r.type
                if self.kind[r] == _TRANSPOSED:
                    t = TensorType((t.shape[0], tile), t.dtype)
                else:
                    t = _rows_of(t, n, tile)
                results.append(Value(t, r.hint))
            body_ops.append(op.replace(operands=operands, attrs=attrs, results=tuple(results)))
            env.update(zip(op.results, results))
        body = Function(f"{fn.name}_tile", (*carry_in, *tiles, *inner), tuple(body_ops),
                        (*(carry_out[op] for op in sums), *(env[y] for y in ys)))

        # before the loop: the global ops, the accumulators' starting values, the xs'
        # tiles as a leading axis
        ops = list(pre)
        inits = []
        for op in sums:
            t = op.results[0].type
            c = Value(TensorType((), t.dtype), "zero")
            ops.append(Op("constant", (), {"dtype": dtype_name(t.dtype), "value":
                                          _IDENTITY[self.combine[op]]}, (c,)))
            if t.shape:
                full = Value(t, "acc")
                ops.append(Op("broadcast_to", (c,), {"shape": list(t.shape)}, (full,)))
                c = full
            inits.append(c)
        stacked = []
        for v in xs:
            s = Value(TensorType((steps, tile, *v.type.shape[1:]), v.type.dtype), v.hint)
            ops.append(Op("reshape", (v,), {"shape": list(s.type.shape)}, (s,)))
            stacked.append(s)
        finals = [Value(op.results[0].type, op.results[0].hint) for op in sums]
        stacked_ys = [Value(TensorType((steps, tile, *y.type.shape[1:]), y.type.dtype),
                            y.hint) for y in ys]
        ops.append(Op("scan", (*inits, *stacked, *consts),
                      {"length": steps, "num_carry": len(sums), "num_xs": len(xs),
                       "reverse": False}, (*finals, *stacked_ys), (body,)))
        subst = {op.results[0]: f for op, f in zip(sums, finals)}
        for y, s in zip(ys, stacked_ys):
            whole = Value(y.type, y.hint)
            ops.append(Op("reshape", (s,), {"shape": list(y.type.shape)}, (whole,)))
            subst[y] = whole
        for op in post:
            operands = tuple(subst.get(v, v) for v in op.operands)
            ops.append(op.replace(operands=operands) if operands != op.operands else op)
        results = tuple(subst.get(r, r) for r in fn.results)
        return fn.replace(ops=tuple(ops), results=results)
