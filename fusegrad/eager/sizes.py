"""Element counts stay traced under ``fg.jit`` of eager code.

While ``fg.jit`` traces an eager function (``eager.capture``), an op whose
operands are all concrete is computed with NumPy and enters the trace as a
constant. ``count`` (the number of elements ``Tensor.mean``/``var``/``std``
divide by) takes no operands, but its value is a size: as a constant it would
be written into the generated code, and every new batch size would compile
another module. Here it is recorded into the open trace instead, as a Tensor
holding the tracer, so the compiled code reads it from its sizes table.
"""

from __future__ import annotations

from ..ir.bind import register_ambient
from ..tracer.core import _state as _trace_state
from . import capture
from . import tensor_base as TB


def _handler(opdef, operands, attrs, regions):
    if opdef.name == "count" and _trace_state.stack:
        return TB.make(_trace_state.stack[-1].emit(opdef, operands, attrs, regions))
    return capture._concrete_handler(opdef, operands, attrs, regions)


def _ambient():
    return _handler if capture.tracing() else None


register_ambient(_ambient, first=True)
