"""Capture: which modules, optimizers and tensors an eager call touches.

``fg.jit`` of a function written with eager Tensors, ``fg.nn`` modules and
``fg.optim`` optimizers runs that function inside a ``capturing()`` context.
Modules note themselves when called, optimizers when they step or zero
gradients, and the in-place write path notes every tensor it writes. The
compiler then knows which objects hold the state the compiled function must
read (inputs) and write back (outputs).

Inside a capture that is tracing (``tracing=True``), an op whose operands
are all concrete (constants such as the class indices a loss builds, zeros for
new optimizer state, concrete Tensors) is computed with NumPy, as the eager
engine would, and enters the trace as a constant; an op on concrete Tensors
returns a Tensor, never a bare tracer, so the eager engine keeps running on it.
"""

from __future__ import annotations

import contextlib
import threading

from ..ir.bind import eval_numpy, register_ambient


class Capture:
    """Objects one call touched, in first-touch order (dicts keyed by ``id``)."""

    __slots__ = ("created", "modules", "optimizers", "tracing", "written")

    def __init__(self, tracing: bool):
        self.tracing = tracing
        self.modules: dict[int, object] = {}
        self.optimizers: dict[int, object] = {}
        self.written: dict[int, tuple] = {}  # id -> (tensor, storage before, version)
        self.created: dict[int, object] = {}  # tensors made inside the capture


class _State(threading.local):
    def __init__(self):
        self.stack: list[Capture] = []


_state = _State()


def active() -> Capture | None:
    """The innermost open capture, or None."""
    return _state.stack[-1] if _state.stack else None


def tracing() -> bool:
    """True inside a capture that traces (its tensors may hold tracers)."""
    return bool(_state.stack) and _state.stack[-1].tracing


@contextlib.contextmanager
def capturing(tracing: bool = False):
    """Record what the enclosed code touches; yields the ``Capture``."""
    cap = Capture(tracing)
    _state.stack.append(cap)
    try:
        yield cap
    finally:
        _state.stack.pop()


def note_module(module) -> None:
    if _state.stack:
        _state.stack[-1].modules.setdefault(id(module), module)


def note_optimizer(optimizer) -> None:
    if _state.stack:
        _state.stack[-1].optimizers.setdefault(id(optimizer), optimizer)


def note_created(tensor) -> None:
    if _state.stack:
        _state.stack[-1].created[id(tensor)] = tensor


def note_write(tensor) -> None:
    """Called before ``tensor``'s storage is written: keeps what it held first."""
    if _state.stack:
        written = _state.stack[-1].written
        if id(tensor) not in written:
            written[id(tensor)] = (tensor, tensor._cell.value, tensor._vc.n)


def _concrete_handler(opdef, operands, attrs, regions):
    return eval_numpy(opdef, operands, attrs, regions)


def _ambient():
    return _concrete_handler if tracing() else None


register_ambient(_ambient, first=True)
