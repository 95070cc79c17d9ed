"""The schema of a primitive op (``OpDef``) and the table every op registers into.

``optable`` fills ``OPS`` (and, through it, ``control_ops``); ``bind`` reads it. It is
its own module so that ``bind`` depends on the table, not on the modules that fill it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OpDef:
    """Schema of one primitive op.

    ``promote``: how ``bind`` makes operand dtypes agree before the rule runs:
    ``"same"`` (common NumPy 2 dtype, Python scalars weak), ``"float"`` (the
    same, then integers -> f64), ``"select"`` (like ``same`` for all operands
    but the boolean condition) or ``None`` (operands taken as they are).
    """

    name: str
    arity: int | None
    attrs: tuple[str, ...]
    rule: Callable
    impl: Callable
    kind: str
    promote: str | None = None
    doc: str = ""


OPS: dict[str, OpDef] = {}


def _def(name, arity, rule, impl, kind, *, attrs=(), promote=None, doc=""):
    OPS[name] = OpDef(name, arity, tuple(attrs), rule, impl, kind, promote, doc)
