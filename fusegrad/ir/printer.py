"""The text form of a Function: one op per line, stable, readable, parseable.

>>> from fusegrad.ir.core import Builder
>>> from fusegrad.ir.types import TensorType
>>> b = Builder("f")
>>> x = b.param(TensorType((3,), "float64"), "x")
>>> (y,) = b.emit("sin", (x,), {}, (TensorType((3,), "float64"),))
>>> print(print_function(b.build((y,))))
func @f(%x: f64[3]) -> f64[3] {
  %0 = sin %x : f64[3]
  return %0
}

Layout (``parser.parse_function`` reads exactly this):

- Header ``func @name(%p: type, ...) -> type {``; several results are written
  ``-> (t1, t2)``, none ``-> ()``. A name that is not an identifier is quoted:
  ``@"<lambda>"``.
- Parameters are named by their ``hint`` when it is an ASCII identifier not
  used yet, else ``%arg<i>``; op results are numbered ``%0, %1, ...`` in order
  of definition. Names are local to one function (and to each region).
- Op line ``%r0, %r1 = name %a, %b {k1=v1, k2=v2} : t0, t1``; attributes sorted
  by key; zero-result ops drop ``%r = `` and the ``: types`` part.
- Attribute values: ints, floats by ``repr`` (``inf``, ``-inf``, ``nan``),
  ``true``/``false``, ``none``, identifier strings bare (``f64``), other
  strings double-quoted with JSON escapes, sequences as ``[a, b]`` (nested).
- Regions (closed sub-Functions) follow the type list as `` (``, then each
  region as a ``func`` block indented two more spaces, then ``)`` on its own
  line at the op's indentation. As in MLIR, ``loc("file.py:12")`` (with
  ``locs=True``) comes last: after the type list, or after the ``)``.
- Last line ``return %a, %b`` (``return`` alone for no results), then ``}``.

A value used but not defined by the function (invalid IR, shown in verifier
messages) prints as ``%?0``, ``%?1``, ...; such text does not parse.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: core imports this module for Function.__str__
    from .core import Function, Op, Value

#: Names the text form writes bare: ASCII identifiers.
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Bare words that mean something else as attribute values, so strings equal to them are quoted.
RESERVED = frozenset({"true", "false", "none", "inf", "nan"})
INDENT = "  "


def value_names(fn: Function) -> dict[Value, str]:
    """The printed name (with ``%``) of every value ``fn`` defines, params first.

    A value defined twice (invalid IR) keeps its first name.
    """
    names: dict[Value, str] = {}
    used: set[str] = set()
    for i, p in enumerate(fn.params):
        if p in names:
            continue
        name = p.hint if p.hint and IDENT.fullmatch(p.hint) and p.hint not in used else None
        if name is None:
            name, k = f"arg{i}", 0
            while name in used:
                k += 1
                name = f"arg{i}_{k}"
        used.add(name)
        names[p] = "%" + name
    n = 0
    for op in fn.ops:
        for r in op.results:
            if r not in names:
                names[r] = f"%{n}"
                n += 1
    return names


def _name(v: Value, names: dict[Value, str]) -> str:
    if v not in names:
        names[v] = f"%?{sum(1 for s in names.values() if s.startswith('%?'))}"
    return names[v]


def format_attr_value(v: Any) -> str:
    """One attribute value in the text form; TypeError for a kind it cannot print."""
    if isinstance(v, bool | np.bool_):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    if isinstance(v, complex | np.complexfloating):
        return json.dumps(repr(complex(v)))  # a string; complex(text) reads it back
    if isinstance(v, str):
        bare = IDENT.fullmatch(v) and v not in RESERVED
        return v if bare else json.dumps(v)
    if isinstance(v, tuple | list):
        return "[" + ", ".join(format_attr_value(e) for e in v) + "]"
    if v is None:
        return "none"
    raise TypeError(
        f"attribute value {v!r} of type {type(v).__name__} has no text form "
        "(use int, float, bool, str, None or a tuple of those)"
    )


def format_symbol(name: str) -> str:
    """``@name``, quoted when ``name`` is not an identifier."""
    return "@" + (name if IDENT.fullmatch(name) else json.dumps(name))


def format_op_header(op: Op, names: dict[Value, str]) -> str:
    """The first line of ``op`` without indentation, regions or loc."""
    parts = []
    if op.results:
        parts.append(", ".join(_name(r, names) for r in op.results) + " =")
    parts.append(op.name)
    head = " ".join(parts)
    if op.operands:
        head += " " + ", ".join(_name(v, names) for v in op.operands)
    if op.attrs:
        items = (f"{k}={format_attr_value(op.attrs[k])}" for k in sorted(op.attrs))
        head += " {" + ", ".join(items) + "}"
    if op.results:
        head += " : " + ", ".join(str(r.type) for r in op.results)
    return head


def _loc(op: Op, locs: bool) -> str:
    return f" loc({json.dumps(op.loc)})" if locs and op.loc is not None else ""


def _function_lines(fn: Function, indent: str, locs: bool) -> list[str]:
    names = value_names(fn)
    params = ", ".join(f"{_name(p, names)}: {p.type}" for p in fn.params)
    outs = [str(t) for t in fn.out_types]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    lines = [f"{indent}func {format_symbol(fn.name)}({params}) -> {ret} {{"]
    inner = indent + INDENT
    for op in fn.ops:
        head = inner + format_op_header(op, names)
        if not op.regions:
            lines.append(head + _loc(op, locs))
            continue
        lines.append(head + " (")
        for region in op.regions:
            lines.extend(_function_lines(region, inner + INDENT, locs))
        lines.append(inner + ")" + _loc(op, locs))
    returned = ", ".join(_name(r, names) for r in fn.results)
    lines.append(f"{inner}return {returned}".rstrip())
    lines.append(indent + "}")
    return lines


def print_function(fn: Function, *, locs: bool = False) -> str:
    """The text form of ``fn`` (see the module docstring); ``locs`` adds source locations."""
    return "\n".join(_function_lines(fn, "", locs))
