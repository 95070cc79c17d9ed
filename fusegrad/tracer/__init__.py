"""Python function -> IR: Tracer, trace levels, trace(), pytrees."""

from . import pytree
from .core import Trace, Tracer, user_location
from .trace import Traced, trace, trace_pytree

__all__ = ["Trace", "Traced", "Tracer", "pytree", "trace", "trace_pytree", "user_location"]
