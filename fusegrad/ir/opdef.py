"""The schema of a primitive op (``OpDef``) and the table every op registers into.

``optable`` fills ``OPS`` (and, through it, ``control_ops``); ``bind`` reads it. It is
its own module so that ``bind`` depends on the table, not on the modules that fill it.
"""

from __future__ import annotations

from collections.abc import Callable

from .types import fields_repr, frozen, slotted_reduce


class OpDef:
    """Schema of one primitive op.

    ``promote``: how ``bind`` makes operand dtypes agree before the rule runs:
    ``"same"`` (common NumPy 2 dtype, Python scalars weak), ``"float"`` (the
    same, then integers -> f64), ``"select"`` (like ``same`` for all operands
    but the boolean condition) or ``None`` (operands taken as they are).
    """

    __slots__ = ("name", "arity", "attrs", "rule", "impl", "kind", "promote", "doc")  # noqa: RUF023
    name: str
    arity: int | None
    attrs: tuple[str, ...]
    rule: Callable
    impl: Callable
    kind: str
    promote: str | None
    doc: str

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce
    __repr__ = fields_repr

    def __init__(self, name: str, arity: int | None, attrs: tuple[str, ...], rule: Callable,
                 impl: Callable, kind: str, promote: str | None = None, doc: str = ""):
        for field, value in zip(self.__slots__, (name, arity, attrs, rule, impl, kind,
                                                 promote, doc)):
            object.__setattr__(self, field, value)

    def _fields(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())


OPS: dict[str, OpDef] = {}


def _def(name, arity, rule, impl, kind, *, attrs=(), promote=None, doc=""):
    OPS[name] = OpDef(name, arity, tuple(attrs), rule, impl, kind, promote, doc)
