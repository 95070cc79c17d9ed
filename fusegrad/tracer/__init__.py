"""Python function -> IR: Tracer, trace levels, trace(), pytrees.

May import ``config`` and ``ir``; never ``passes`` or anything above.
"""

from . import pytree
from .core import Trace, Tracer, user_location
from .trace import Traced, trace, trace_pytree

__all__ = ["Trace", "Traced", "Tracer", "pytree", "trace", "trace_pytree", "user_location"]
