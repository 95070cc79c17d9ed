"""``ops.<name>(*operands, **attrs)``: one callable per op of the table, wrapping ``bind``.

Rules in lower layers write ``ops.sin(x)`` or ``ops.reduce_sum(g, axes=(0,))``
and run unchanged on tracers, eager Tensors and plain arrays.
"""

from __future__ import annotations

from functools import partial

from .bind import bind
from .optable import OPS


def _make(name: str):
    f = partial(bind, name)
    f.__name__ = name
    f.__doc__ = OPS[name].doc or f"The ``{name}`` op (see fusegrad.ir.optable)."
    return f


for _name in OPS:
    globals()[_name] = _make(_name)


def __getattr__(name: str):
    raise AttributeError(f"fusegrad has no op named {name!r}; ops are: {', '.join(OPS)}")
