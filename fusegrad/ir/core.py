"""The SSA IR: Value, Op, Function, and the Builder that makes Functions.

A Function is immutable: passes return new Functions (``fn.replace(...)``).
Values are compared by identity; names exist only in the printed text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .printer import print_function
from .types import TensorType, slotted_reduce


@dataclass(frozen=True, slots=True, eq=False)
class Value:
    """One SSA value: defined once (by a parameter or an op result), typed."""

    type: TensorType
    hint: str | None = None

    __reduce__ = slotted_reduce

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        return f"Value({self.hint or hex(id(self))}: {self.type})"


@dataclass(frozen=True, slots=True, eq=False)
class Op:
    """One operation: ``results = name(operands) {attrs}``, with optional regions.

    ``regions`` are closed sub-Functions (control flow, custom rules); ``loc`` is
    the user's ``file:line`` that produced the op, for error messages.
    """

    name: str
    operands: tuple[Value, ...]
    attrs: dict[str, Any]
    results: tuple[Value, ...]
    regions: tuple[Function, ...] = ()
    loc: str | None = None

    __reduce__ = slotted_reduce

    def replace(self, **changes) -> Op:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True, eq=False)
class Function:
    """An SSA function: typed parameters, ops in definition order, results."""

    name: str
    params: tuple[Value, ...]
    ops: tuple[Op, ...]
    results: tuple[Value, ...]

    __reduce__ = slotted_reduce

    def replace(self, **changes) -> Function:
        return dataclasses.replace(self, **changes)

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
        # the slots set directly: a frozen dataclass's __init__ sets each field through
        # object.__setattr__, a third of the cost of recording an op
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
