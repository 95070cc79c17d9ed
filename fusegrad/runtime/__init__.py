"""Executors: the NumPy reference interpreter and compiled calls.

``interpreter`` runs IR with the op table's NumPy references; ``compiled`` turns a
Function into a cached native callable (simplify, fuse, compile with the lean code
generator: ``lean_exec``) and runs it, with ``donation`` (which arguments are donated),
``fastcall`` (the cached-signature fast path), ``blas_threads`` and ``debug_nans``.

May import ``config``, ``ir``, ``tracer``, ``passes`` and ``codegen``; never the
transforms, the eager Tensor or the surfaces above them.
"""

from .interpreter import run

__all__ = ["run"]
