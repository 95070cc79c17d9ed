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
        results = tuple(Value(t) for t in result_types)
        self.ops.append(Op(name, tuple(operands), dict(attrs), results, tuple(regions), loc))
        return results

    def build(self, results) -> Function:
        return Function(self.name, tuple(self.params), tuple(self.ops), tuple(results))
