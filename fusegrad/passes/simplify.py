"""Simplification: DCE, CSE, constant folding and algebraic rewrites, to a fixed point.

The adjoint IR is full of ``mul %g, 1.0``, broadcasts of scalars and sums of
zeros. ``simplify`` cleans them with rewrites written as data (``REWRITES``:
pattern -> replacement, one per line) applied by one small matcher, plus
common-subexpression elimination, folding of scalar constants and dead-code
elimination. Every rewrite preserves IEEE results exactly except the sign of
a zero (``x + 0 -> x``); ``x * 0`` is never folded (``inf * 0`` is NaN).
"""

from __future__ import annotations

import numpy as np

from ..ir import Function, Op, TensorType, Value
from ..ir.bind import eval_numpy
from ..ir.optable import OPS
from ..ir.shapes import broadcast_shapes
from ..ir.stats import timed
from ..ir.types import dtype_name, fields_repr, frozen


def dce(fn: Function) -> Function:
    """Drop ops none of whose results reach the Function's results (ops are pure)."""
    live = set(fn.results)
    kept = []
    for op in reversed(fn.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    if len(kept) == len(fn.ops):
        return fn
    return fn.replace(ops=tuple(reversed(kept)))


# --- the pattern language -----------------------------------------------------------


class Const:
    """Matches a value that is the scalar ``value`` (a constant, possibly broadcast)."""

    __slots__ = ("value",)
    value: float

    __setattr__ = __delattr__ = frozen
    __repr__ = fields_repr

    def __init__(self, value: float):
        object.__setattr__(self, "value", value)


ZERO, ONE, MINUS_ONE = Const(0), Const(1), Const(-1)


class Rule:
    """``pattern -> replacement``. Patterns: a name binds any value, ``Const`` matches a
    scalar constant, ``(op, *operand patterns)`` matches an op. Replacements: a bound
    name, ``(op, *names)``, or a function ``(bindings, op, emit) -> Value``."""

    __slots__ = ("pattern", "replacement", "broadcast_ok")  # noqa: RUF023
    pattern: object
    replacement: object
    broadcast_ok: bool

    __setattr__ = __delattr__ = frozen
    __repr__ = fields_repr

    def __init__(self, pattern: object, replacement: object, broadcast_ok: bool = False):
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "replacement", replacement)
        object.__setattr__(self, "broadcast_ok", broadcast_ok)


def _same_type_as_result(b, op, emit):
    return b["x"] if b["x"].type == op.results[0].type else None


def _reshape_x(b, op, emit):
    return emit("reshape", (b["x"],), {"shape": op.results[0].type.shape})


def _broadcast_x(b, op, emit):
    """Broadcasting composes: x -> s1 -> s2 is x -> s2."""
    return emit("broadcast_to", (b["x"],), {"shape": op.results[0].type.shape})


def _broadcast_of_reshape(b, op, emit):
    """broadcast_to(reshape(x)) -> broadcast_to(x) when the reshape only added leading 1s."""
    x, mid = b["x"], b["mid"]
    k = mid.type.ndim - x.type.ndim
    if k < 0 or mid.type.shape != (1,) * k + x.type.shape:
        return None
    return emit("broadcast_to", (x,), {"shape": op.results[0].type.shape})


def _compose_transposes(b, op, emit):
    inner = b["_producer"](b["mid"]).attrs["perm"]
    outer = op.attrs["perm"]
    perm = tuple(inner[p] for p in outer)
    if perm == tuple(range(len(perm))):
        return b["x"]
    return emit("transpose", (b["x"],), {"perm": perm})


def _square(b, op, emit):
    """``x * x`` for ``x ** 2``, but not of complex ``x``: NumPy's complex power multiplies
    without fused multiply-adds and its complex product with them (an ulp apart)."""
    x = b["x"]
    return None if x.type.dtype.kind == "c" else emit("mul", (x, x), {})


def _zeros_of_result(b, op, emit):
    t = op.results[0].type
    z = emit("constant", (), {"value": 0, "dtype": dtype_name(t.dtype)})
    return z if t.shape == () else emit("broadcast_to", (z,), {"shape": t.shape})


_UNARY = tuple(n for n, d in OPS.items() if d.kind == "elementwise" and d.arity == 1
               and not d.attrs)
_BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "remainder",
           "lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_xor")

REWRITES: list[Rule] = [
    Rule(("mul", "x", ONE), "x", broadcast_ok=True),                 # x * 1 -> x
    Rule(("mul", ONE, "x"), "x", broadcast_ok=True),                 # 1 * x -> x
    Rule(("mul", "x", MINUS_ONE), ("neg", "x"), broadcast_ok=True),  # x * -1 -> -x
    Rule(("mul", MINUS_ONE, "x"), ("neg", "x"), broadcast_ok=True),  # -1 * x -> -x
    Rule(("div", "x", ONE), "x", broadcast_ok=True),                 # x / 1 -> x
    Rule(("pow", "x", ONE), "x", broadcast_ok=True),                 # x ** 1 -> x
    Rule(("pow", "x", Const(2)), _square, broadcast_ok=True),         # x ** 2 -> x * x
    Rule(("add", "x", ZERO), "x", broadcast_ok=True),                # x + 0 -> x
    Rule(("add", ZERO, "x"), "x", broadcast_ok=True),                # 0 + x -> x
    Rule(("sub", "x", ZERO), "x", broadcast_ok=True),                # x - 0 -> x
    Rule(("sub", ZERO, "x"), ("neg", "x"), broadcast_ok=True),       # 0 - x -> -x
    Rule(("add", "x", ("neg", "y")), ("sub", "x", "y")),             # x + -y -> x - y
    Rule(("sub", "x", ("neg", "y")), ("add", "x", "y")),             # x - -y -> x + y
    Rule(("neg", ("neg", "x")), "x"),                                # --x -> x
    Rule(("select", "c", "x", "x"), "x", broadcast_ok=True),         # where(c, x, x) -> x
    Rule(("reshape", "x"), _same_type_as_result),                    # reshape to own shape -> x
    Rule(("reshape", ("reshape", "x")), _reshape_x),                 # r(r(x)) -> r(x)
    Rule(("broadcast_to", "x"), _same_type_as_result),               # broadcast to own shape -> x
    Rule(("broadcast_to", ("broadcast_to", "x")), _broadcast_x),     # bcast(bcast(x)) -> bcast(x)
    Rule(("broadcast_to", ("reshape", "x", "@mid")), _broadcast_of_reshape),  # see its doc
    Rule(("transpose", ("transpose", "x", "@mid")), _compose_transposes),  # t(t(x)) -> t(x)
    Rule(("convert", "x"), _same_type_as_result),                    # convert to own dtype -> x
    Rule(("reduce_sum", ZERO), _zeros_of_result),                    # sum(0) -> 0
    Rule(("slice", ZERO), _zeros_of_result),                         # slice(0) -> 0
    # elementwise ops broadcast their operands themselves, so broadcasts sink to the
    # end of a chain and vanish at its consumer: op(bcast(a), b) -> [bcast](op(a, b))
    *(Rule((n, ("broadcast_to", "a")), (n, "a"), broadcast_ok=True) for n in _UNARY),
    *(Rule((n, ("broadcast_to", "a"), "b"), (n, "a", "b"), broadcast_ok=True) for n in _BINARY),
    *(Rule((n, "a", ("broadcast_to", "b")), (n, "a", "b"), broadcast_ok=True) for n in _BINARY),
    Rule(("select", "c", ("broadcast_to", "a"), "b"), ("select", "c", "a", "b"), broadcast_ok=True),
    Rule(("select", "c", "a", ("broadcast_to", "b")), ("select", "c", "a", "b"), broadcast_ok=True),
]  # fmt: skip


# --- the matcher ----------------------------------------------------------------


_BY_ROOT: dict[str, list[Rule]] = {}
_INDEXED: list[int] = [-1]  # len(REWRITES) when _BY_ROOT was made


def _rules_for(name: str) -> list[Rule]:
    """The rules that can match an op named ``name`` (those whose pattern's root is that
    op, or is not an op), in ``REWRITES``' order: the first rule that matches wins."""
    if _INDEXED[0] != len(REWRITES):
        _BY_ROOT.clear()
        _INDEXED[0] = len(REWRITES)
    rules = _BY_ROOT.get(name)
    if rules is None:
        rules = _BY_ROOT[name] = [r for r in REWRITES if not isinstance(r.pattern, tuple)
                                  or r.pattern[0] == name]
    return rules


class _Rewriter:
    def __init__(self):
        self.ops: list[Op] = []
        self.producer: dict[Value, Op] = {}
        self.cse: dict[tuple, tuple[Value, ...]] = {}
        self.loc: str | None = None  # of the op being rewritten: its replacements keep it
        self.uses: dict[Value, int] = {}  # uses of each value at the start of the sweep

    def const_value(self, v: Value):
        op = self.producer.get(v)
        while op is not None and op.name in ("broadcast_to", "reshape"):
            op = self.producer.get(op.operands[0])
        return op.attrs["value"] if op is not None and op.name == "constant" else None

    def match(self, pat, v: Value, b: dict) -> bool:
        if isinstance(pat, str):
            if pat in b:
                return b[pat] is v
            b[pat] = v
            return True
        if isinstance(pat, Const):
            c = self.const_value(v)
            return c is not None and not isinstance(c, bool) and c == pat.value
        op = self.producer.get(v)
        name, *subs = pat
        if subs and isinstance(subs[-1], str) and subs[-1].startswith("@"):
            b[subs.pop()[1:]] = v
        if op is None or op.name != name or len(op.operands) != len(subs):
            return False
        return all(self.match(s, o, b) for s, o in zip(subs, op.operands))

    def emit(self, name: str, operands, attrs, loc=None) -> tuple[Value, ...]:
        key = _cse_key(name, operands, attrs)
        if key in self.cse:
            return self.cse[key]
        types = OPS[name].rule(tuple(o.type for o in operands), **attrs)
        results = tuple(Value(t) for t in types)
        self._append(Op(name, tuple(operands), dict(attrs), results, (),
                        self.loc if loc is None else loc))
        self.cse[key] = results
        return results

    def _append(self, op: Op) -> None:
        self.ops.append(op)
        for r in op.results:
            self.producer[r] = op

    def _emit1(self, name, operands, attrs):
        return self.emit(name, operands, attrs)[0]

    def rewrite(self, op: Op) -> Value | None:
        self.producer[op.results[0]] = op
        for rule in _rules_for(op.name):
            b: dict = {"_producer": self.producer.get, "_uses": self.uses}
            if not self.match(rule.pattern, op.results[0], b):
                continue
            rep = rule.replacement
            if callable(rep):
                out = rep(b, op, self._emit1)
            elif isinstance(rep, str):
                out = b[rep]
            else:
                out = self._emit1(rep[0], tuple(b[n] for n in rep[1:]), {})
            out = self._fit(out, op.results[0].type, rule.broadcast_ok)
            if out is not None:
                return out
        return None

    def _fit(self, v: Value | None, t: TensorType, broadcast_ok: bool):
        if v is None or v.type == t:
            return v
        if not broadcast_ok or v.type.dtype != t.dtype:
            return None
        if broadcast_shapes("fit", v.type.shape, t.shape) != t.shape:
            return None
        return self._emit1("broadcast_to", (v,), {"shape": t.shape})

    def fold(self, op: Op) -> Value | None:
        """An elementwise op of scalar constants becomes a constant."""
        opdef = OPS[op.name]
        if opdef.kind != "elementwise" or op.name == "constant" or len(op.results) != 1:
            return None
        vals = [self.const_value(v) for v in op.operands]
        if any(c is None for c in vals):
            return None
        args = [np.asarray(c, dtype=v.type.dtype) for c, v in zip(vals, op.operands)]
        res = np.asarray(eval_numpy(opdef, args, op.attrs))
        t = op.results[0].type
        (c,) = self.emit("constant", (), {"value": res.item(), "dtype": dtype_name(t.dtype)})
        return self._fit(c, t, True)


#: ops whose operands commute exactly (IEEE + and * are commutative): one CSE key
_COMMUTATIVE = frozenset({"add", "mul"})


def _cse_key(name: str, operands, attrs) -> tuple:
    ids = tuple(id(o) for o in operands)
    if name in _COMMUTATIVE:
        ids = tuple(sorted(ids))
    return name, ids, repr(sorted(attrs.items()))


def _one_sweep(fn: Function) -> Function:
    rw = _Rewriter()
    for op in fn.ops:
        for v in op.operands:
            rw.uses[v] = rw.uses.get(v, 0) + 1
    for v in fn.results:
        rw.uses[v] = rw.uses.get(v, 0) + 1
    subst: dict[Value, Value] = {}
    for op in fn.ops:
        operands = tuple(subst.get(v, v) for v in op.operands)
        op = op.replace(operands=operands) if operands != op.operands else op
        if not op.regions:
            key = _cse_key(op.name, operands, op.attrs)
            if key in rw.cse:
                subst.update(zip(op.results, rw.cse[key]))
                continue
            if len(op.results) == 1:
                rw.loc = op.loc
                new = rw.fold(op) or rw.rewrite(op)
                if new is not None:
                    subst[op.results[0]] = new
                    continue
            rw.cse[key] = op.results
        elif op.name == "cond" and rw.const_value(operands[0]) is not None:
            branch = op.regions[0 if rw.const_value(operands[0]) else 1]
            subst.update(zip(op.results, _inline(rw, branch, operands[1:])))
            continue
        rw._append(op)
    results = tuple(subst.get(r, r) for r in fn.results)
    return dce(fn.replace(ops=tuple(rw.ops), results=results))


def _inline(rw: _Rewriter, region: Function, operands) -> list[Value]:
    """``region``'s ops applied to ``operands`` (with fresh results); its result values."""
    env = dict(zip(region.params, operands))
    for op in region.ops:
        results = tuple(Value(r.type, r.hint) for r in op.results)
        rw._append(op.replace(operands=tuple(env[v] for v in op.operands), results=results))
        env.update(zip(op.results, results))
    return [env[r] for r in region.results]


def merge_scans(fn: Function) -> Function:
    """A ``scan`` whose results are the first results of a later ``scan`` over the same
    operands (reverse mode adds such a scan to stack the carries) is that later scan,
    moved up to its place: the loop runs once."""
    scans = [op for op in fn.ops if op.name == "scan"]
    replace: dict[Op, Op] = {}
    for i, a in enumerate(scans):
        for b in scans[i + 1:]:
            if (b not in replace.values() and a.operands == b.operands and a.attrs == b.attrs
                    and len(b.results) > len(a.results)
                    and _extends(b.regions[0], a.regions[0])):
                replace[a] = b
                break
    if not replace:
        return fn
    moved = set(replace.values())
    subst: dict[Value, Value] = {}
    ops = []
    for op in fn.ops:
        if op in moved:
            continue
        if op in replace:
            subst.update(zip(op.results, replace[op].results))
            op = replace[op]
        operands = tuple(subst.get(v, v) for v in op.operands)
        ops.append(op.replace(operands=operands) if operands != op.operands else op)
    return fn.replace(ops=tuple(ops), results=tuple(subst.get(r, r) for r in fn.results))


def _extends(big: Function, small: Function) -> bool:
    """``big`` computes ``small``'s results as its first ones (same parameters, the
    same ops up to value names)."""
    if big.in_types != small.in_types:
        return False
    table: dict = {}
    first = _canonical(big, table)[:len(small.results)]
    return first == _canonical(small, table)


def _canonical(fn: Function, table: dict) -> tuple:
    """A name-free key per result of ``fn``; ``table`` numbers op signatures."""
    from ..ir.printer import print_function

    key: dict[Value, tuple] = {p: ("param", i) for i, p in enumerate(fn.params)}
    for op in fn.ops:
        sig = (op.name, tuple(key[o] for o in op.operands), repr(sorted(op.attrs.items())),
               tuple(r.type for r in op.results),
               tuple(print_function(r) for r in op.regions))
        n = table.setdefault(sig, len(table))
        for j, r in enumerate(op.results):
            key[r] = (n, j)
    return tuple(key[r] for r in fn.results)


@timed("passes")
def simplify(fn: Function, max_sweeps: int = 20) -> Function:
    """Apply CSE, folding and ``REWRITES`` until nothing changes (or ``max_sweeps``).

    Regions (closed Functions) are simplified on their own first; CSE never merges
    region ops, and never looks into one region from another. A ``cond`` on a constant
    predicate is replaced by the branch it takes.
    """
    if any(op.regions for op in fn.ops):
        fn = fn.replace(ops=tuple(
            op.replace(regions=tuple(simplify(r, max_sweeps) for r in op.regions))
            if op.regions else op for op in fn.ops))
    for _ in range(max_sweeps):
        new = merge_scans(_one_sweep(fn))
        if _signature(new) == _signature(fn):
            return new
        fn = new
    return fn


def _signature(fn: Function):
    return tuple((op.name, tuple(map(id, op.operands)), repr(op.attrs)) for op in fn.ops), tuple(
        map(id, fn.results))


__all__ = ["REWRITES", "Const", "Rule", "dce", "merge_scans", "simplify"]
