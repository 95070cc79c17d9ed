"""Check that a Function is valid IR: SSA, op schemas, types and shapes.

Passes promise valid IR in, valid IR out; tests call ``verify`` after every
pass so a broken pass fails where it broke the IR, not later in codegen.

Checked, in straight-line order: each value is defined once (a parameter or
one op result, not both, not twice); each operand is defined before its use;
each op is in the op table with the table's arity and attribute names,
attribute values have a text form, and its result types are those of the op's
shape rule; region ops (``OpDef.kind == "region"``) get ``regions=op.regions``
as an extra keyword of their rule, and each region is verified as a closed
Function that sees no value of the enclosing ones; the returned values are
defined. The first problem found raises ``VerifyError`` naming the function,
the op's index and name, and its printed line.
"""

from __future__ import annotations

from collections.abc import Set

from . import optable
from .core import Function, Op, Value
from .errors import ShapeError, VerifyError
from .printer import format_attr_value, format_op_header, value_names


def verify(fn: Function) -> None:
    """Raise ``VerifyError`` for the first way ``fn`` is not valid IR; return None if valid.

    >>> from fusegrad.ir.parser import parse_function
    >>> verify(parse_function("func @f(%x: f64[2]) -> f64[2] { %0 = sin %x : f64[2] return %0 }"))
    """
    _verify_function(fn, f"@{fn.name}", frozenset())


def _verify_function(fn: Function, where: str, outer: Set[Value]) -> None:
    names = value_names(fn)
    defined: set[Value] = set()
    for p in fn.params:
        if p in defined or p in outer:
            whose = "this" if p in defined else "an enclosing"
            raise VerifyError(
                f"{where}: parameter {names[p]} is already defined in {whose} "
                "function; every value is defined once"
            )
        defined.add(p)
    for i, op in enumerate(fn.ops):
        _verify_op(op, _OpContext(where, i, op, names), defined, outer)
        defined.update(op.results)
    for k, r in enumerate(fn.results):
        if r not in defined:
            what = "a value of an enclosing function" if r in outer else "an undefined value"
            raise VerifyError(
                f"{where}: result {k} is {what}; return only parameters and "
                "results of this function's ops"
            )


class _OpContext:
    """Where an op sits, to name it in messages: function path, index, printed line."""

    def __init__(self, where: str, index: int, op: Op, names: dict[Value, str]):
        self.where, self.index, self.op, self.names = where, index, op, names

    def name(self, v: Value) -> str:
        return self.names.get(v, "an undefined value")

    def error(self, msg: str, *, line: bool = True) -> VerifyError:
        text = f"{self.where}: op #{self.index} '{self.op.name}': {msg}"
        if line:
            text += f"\n    {format_op_header(self.op, dict(self.names))}"
        return VerifyError(text)


def _verify_op(op: Op, ctx: _OpContext, defined: set[Value], outer: Set[Value]) -> None:
    for key, v in op.attrs.items():
        try:
            format_attr_value(v)
        except TypeError as e:
            raise ctx.error(f"attribute {key!r}: {e}", line=False) from None
    opdef = optable.OPS.get(op.name)
    if opdef is None:
        raise ctx.error(f"unknown op {op.name!r} (not in the op table)")
    _verify_operands(op, ctx, defined, outer)
    seen: set[Value] = set()
    for k, r in enumerate(op.results):
        if r in defined or r in seen or r in outer:
            raise ctx.error(
                f"result {k} ({ctx.name(r)}) is already defined; every value is defined once"
            )
        seen.add(r)
    if opdef.arity is not None and len(op.operands) != opdef.arity:
        raise ctx.error(f"takes {opdef.arity} operands, got {len(op.operands)}")
    if set(op.attrs) != set(opdef.attrs):
        raise ctx.error(
            f"attributes are {tuple(sorted(op.attrs))}, but the op table says "
            f"{tuple(sorted(opdef.attrs))}"
        )
    kwargs = dict(op.attrs)
    if opdef.kind == "region":
        kwargs["regions"] = op.regions
        for k, region in enumerate(op.regions):
            inner = f"{ctx.where} > op #{ctx.index} '{op.name}' region {k} @{region.name}"
            _verify_function(region, inner, outer | defined)
    elif op.regions:
        raise ctx.error(f"has {len(op.regions)} regions, but {op.name} is not a region op")
    want = _rule_types(opdef, op, ctx, kwargs)
    got = tuple(r.type for r in op.results)
    if got != want:
        raise ctx.error(f"result types ({_fmt(got)}) differ from the shape rule's ({_fmt(want)})")


def _verify_operands(op: Op, ctx: _OpContext, defined: set[Value], outer: Set[Value]) -> None:
    for k, v in enumerate(op.operands):
        if v in defined:
            continue
        if v in outer:
            why = (
                "is a value of an enclosing function; regions are closed, "
                "pass it in as a region parameter"
            )
        elif v in ctx.names:
            why = f"({ctx.names[v]}) is used before its definition"
        else:
            why = "is not defined in this function"
        raise ctx.error(f"operand {k} {why}")


def _rule_types(opdef: optable.OpDef, op: Op, ctx: _OpContext, kwargs: dict) -> tuple:
    in_types = tuple(v.type for v in op.operands)
    try:
        return tuple(opdef.rule(in_types, **kwargs))
    except ShapeError as e:
        raise ctx.error(f"the shape rule rejects it: {e}") from e
    except (TypeError, ValueError, KeyError, IndexError) as e:
        raise ctx.error(f"the shape rule failed with {type(e).__name__}: {e}") from e


def _fmt(types) -> str:
    return ", ".join(str(t) for t in types)
