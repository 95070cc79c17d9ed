"""The source location given to ops while a pass re-emits them.

Ops made by tracing record the user's ``file:line`` that called them. A pass that
emits ops on behalf of another op (the adjoint ops of reverse mode, the tangent
ops of forward mode, the batched ops of ``vmap``) wraps the emission in
``with at(op.loc):`` so the new ops carry the location of the op they derive
from, not the line that called the transform. The override is per thread.
"""

from __future__ import annotations

import contextlib
import threading


class _Override(threading.local):
    def __init__(self):
        self.loc: str | None = None
        self.active = False


_override = _Override()


def override() -> tuple[bool, str | None]:
    """``(active, loc)``: whether a pass set the location, and to what."""
    return _override.active, _override.loc


@contextlib.contextmanager
def at(loc: str | None):
    """Ops emitted inside the block get location ``loc`` (``None``: no location)."""
    prev = _override.active, _override.loc
    _override.active, _override.loc = True, loc
    try:
        yield
    finally:
        _override.active, _override.loc = prev
