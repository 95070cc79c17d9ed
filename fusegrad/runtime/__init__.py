"""Executors: the NumPy reference interpreter and compiled calls.

``interpreter`` runs IR with the op table's NumPy references; ``compiled`` turns a
Function into a cached native callable (simplify, fuse, generate, load) and runs it,
with ``buffer_pool`` (reused intermediates), ``donation`` (donated argument buffers),
``fastcall`` (the cached-signature fast path), ``hot_call`` (the per-call path of a
signature seen before), ``blas_threads`` and ``debug_nans``.

May import ``config``, ``ir``, ``tracer``, ``passes`` and ``codegen``; never the
transforms, the eager Tensor or the surfaces above them.
"""

from .interpreter import run

__all__ = ["run"]
