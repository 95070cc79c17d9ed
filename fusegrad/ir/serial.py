"""IR objects as tables of plain values, and back: how the pass cache keeps programs.

``pickle`` of a Function rebuilds every Value, Op and Function through a Python call
(``types.slotted_reduce``): 30 ms for a GPT training step's 2,500 ops, most of a warm
start's loading. ``encode`` instead numbers the types, values, ops and functions
reachable from some roots (each object once, so sharing survives: a segment's ops are
its program's) into tables of tuples, strings and numbers, which ``pickle`` writes and
reads in C; ``decode`` makes the objects again in one loop, setting their slots
directly (a record's ``__init__`` sets each field through ``object.__setattr__``,
three times slower).

The form: ``(VERSION, types, values, items, roots)``; ``types``: ``(shape, dtype
name)``; ``values``: ``(type number, hint)``; ``items``, in an order where everything
an item refers to comes before it: ``(OP, name, operand numbers, attrs, result
numbers, region item numbers, loc)`` or ``(FUNCTION, name, parameter numbers, op item
numbers, result numbers)``; ``roots``: item numbers. Attributes are kept as they are
(pickle writes what they hold).
"""

from __future__ import annotations

from .core import Function, Op, Value
from .types import DTYPES, TensorType, dtype_name

VERSION = 1
_OP, _FUNCTION = 0, 1


def encode(roots) -> tuple:
    """The tables of ``roots`` (Functions and Ops) and of everything they reach."""
    types: dict = {}  # TensorType -> number
    type_rows: list = []
    values: dict = {}  # Value -> number (by identity)
    value_rows: list = []
    items: dict = {}  # id(Op or Function) -> number (the objects stay alive in roots)
    rows: list = []

    def value(v: Value) -> int:
        n = values.get(v)
        if n is None:
            t = v.type
            k = types.get(t)
            if k is None:
                k = types[t] = len(type_rows)
                type_rows.append((t.shape, dtype_name(t.dtype)))
            n = values[v] = len(value_rows)
            value_rows.append((k, v.hint))
        return n

    def item(x) -> int:
        n = items.get(id(x))
        if n is not None:
            return n
        if type(x) is Op:
            regions = tuple(item(g) for g in x.regions)
            row = (_OP, x.name, tuple([value(v) for v in x.operands]), x.attrs,
                   tuple([value(v) for v in x.results]), regions, x.loc)
        elif type(x) is Function:
            params = tuple([value(v) for v in x.params])
            ops = tuple([item(op) for op in x.ops])
            row = (_FUNCTION, x.name, params, ops, tuple([value(v) for v in x.results]))
        else:
            raise TypeError(f"cannot encode {type(x).__name__}")
        n = items[id(x)] = len(rows)
        rows.append(row)
        return n

    root_numbers = tuple(item(r) for r in roots)
    return (VERSION, tuple(type_rows), tuple(value_rows), tuple(rows), root_numbers)


_new = object.__new__
_set_shape, _set_dtype = TensorType.shape.__set__, TensorType.dtype.__set__
_set_vtype, _set_hint = Value.type.__set__, Value.hint.__set__
_set_oname, _set_operands, _set_attrs = Op.name.__set__, Op.operands.__set__, Op.attrs.__set__
_set_results, _set_regions, _set_loc = Op.results.__set__, Op.regions.__set__, Op.loc.__set__
_set_fname, _set_params = Function.name.__set__, Function.params.__set__
_set_ops, _set_fresults = Function.ops.__set__, Function.results.__set__


def decode(form: tuple) -> list:
    """The roots ``encode`` was given, made again (ValueError for a form it did not
    write)."""
    version, type_rows, value_rows, rows, roots = form
    if version != VERSION:
        raise ValueError(f"IR tables of version {version}, not {VERSION}")
    types = []
    for shape, name in type_rows:
        t = _new(TensorType)
        _set_shape(t, tuple(shape))
        _set_dtype(t, DTYPES[name])
        types.append(t)
    values = []
    for k, hint in value_rows:
        v = _new(Value)
        _set_vtype(v, types[k])
        _set_hint(v, hint)
        values.append(v)
    made: list = []
    value, item = values.__getitem__, made.__getitem__
    for row in rows:
        if row[0] == _OP:
            _, name, operands, attrs, results, regions, loc = row
            x = _new(Op)
            _set_oname(x, name)
            _set_operands(x, tuple(map(value, operands)))
            _set_attrs(x, attrs)
            _set_results(x, tuple(map(value, results)))
            _set_regions(x, tuple(map(item, regions)))
            _set_loc(x, loc)
        elif row[0] == _FUNCTION:
            _, name, params, ops, results = row
            x = _new(Function)
            _set_fname(x, name)
            _set_params(x, tuple(map(value, params)))
            _set_ops(x, tuple(map(item, ops)))
            _set_fresults(x, tuple(map(value, results)))
        else:
            raise ValueError(f"unknown IR table row {row[0]!r}")
        made.append(x)
    return [made[i] for i in roots]
