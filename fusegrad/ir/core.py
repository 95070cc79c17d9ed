"""The SSA IR: Value, Op, Function, and the Builder that makes Functions.

A Function is immutable: passes return new Functions (``fn.replace(...)``).
Values are compared by identity; names exist only in the printed text.
"""

from __future__ import annotations

from typing import Any

from .printer import print_function
from .types import TensorType, fields_repr, frozen, replaced, slotted_reduce

_setattr = object.__setattr__


class Value:
    """One SSA value: defined once (by a parameter or an op result), typed."""

    __slots__ = ("type", "hint")  # noqa: RUF023
    type: TensorType
    hint: str | None

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce

    def __init__(self, type: TensorType, hint: str | None = None):
        _setattr(self, "type", type)
        _setattr(self, "hint", hint)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        return f"Value({self.hint or hex(id(self))}: {self.type})"


class Op:
    """One operation: ``results = name(operands) {attrs}``, with optional regions.

    ``regions`` are closed sub-Functions (control flow, custom rules); ``loc`` is
    the user's ``file:line`` that produced the op, for error messages.
    """

    __slots__ = ("name", "operands", "attrs", "results", "regions", "loc")  # noqa: RUF023
    name: str
    operands: tuple[Value, ...]
    attrs: dict[str, Any]
    results: tuple[Value, ...]
    regions: tuple[Function, ...]
    loc: str | None

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce
    __repr__ = fields_repr

    def __init__(self, name: str, operands: tuple[Value, ...], attrs: dict[str, Any],
                 results: tuple[Value, ...], regions: tuple[Function, ...] = (),
                 loc: str | None = None):
        _setattr(self, "name", name)
        _setattr(self, "operands", operands)
        _setattr(self, "attrs", attrs)
        _setattr(self, "results", results)
        _setattr(self, "regions", regions)
        _setattr(self, "loc", loc)

    def replace(self, **changes) -> Op:
        return replaced(self, changes)


class Function:
    """An SSA function: typed parameters, ops in definition order, results."""

    __slots__ = ("name", "params", "ops", "results")  # noqa: RUF023
    name: str
    params: tuple[Value, ...]
    ops: tuple[Op, ...]
    results: tuple[Value, ...]

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce
    __repr__ = fields_repr

    def __init__(self, name: str, params: tuple[Value, ...], ops: tuple[Op, ...],
                 results: tuple[Value, ...]):
        _setattr(self, "name", name)
        _setattr(self, "params", params)
        _setattr(self, "ops", ops)
        _setattr(self, "results", results)

    def replace(self, **changes) -> Function:
        return replaced(self, changes)

    @property
    def in_types(self) -> tuple[TensorType, ...]:
        return tuple(p.type for p in self.params)

    @property
    def out_types(self) -> tuple[TensorType, ...]:
        return tuple(r.type for r in self.results)

    def __str__(self) -> str:
        return print_function(self)

    def _repr_pretty_(self, p, cycle):  # IPython
        p.text(str(self))


class Builder:
    """Accumulates params and ops, then ``build(results)`` makes a Function."""

    def __init__(self, name: str = "f"):
        self.name = name
        self.params: list[Value] = []
        self.ops: list[Op] = []

    def param(self, type: TensorType, hint: str | None = None) -> Value:
        v = Value(type, hint)
        self.params.append(v)
        return v

    def emit(
        self,
        name: str,
        operands: tuple[Value, ...],
        attrs: dict[str, Any],
        result_types: tuple[TensorType, ...],
        regions: tuple[Function, ...] = (),
        loc: str | None = None,
    ) -> tuple[Value, ...]:
        # the slots set directly: __init__ sets each field through object.__setattr__, a
        # third of the cost of recording an op
        results = []
        for t in result_types:
            v = _new(Value)
            _set_type(v, t)
            _set_hint(v, None)
            results.append(v)
        results = tuple(results)
        op = _new(Op)
        _set_name(op, name)
        _set_operands(op, tuple(operands))
        _set_attrs(op, dict(attrs))
        _set_results(op, results)
        _set_regions(op, tuple(regions))
        _set_loc(op, loc)
        self.ops.append(op)
        return results

    def build(self, results) -> Function:
        return Function(self.name, tuple(self.params), tuple(self.ops), tuple(results))


_new = object.__new__
_set_type, _set_hint = Value.type.__set__, Value.hint.__set__
_set_name, _set_operands, _set_attrs = Op.name.__set__, Op.operands.__set__, Op.attrs.__set__
_set_results, _set_regions, _set_loc = Op.results.__set__, Op.regions.__set__, Op.loc.__set__
