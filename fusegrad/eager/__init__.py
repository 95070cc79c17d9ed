"""The eager face: ``fusegrad.Tensor`` and its PyTorch-style autograd.

The Tensor (``tensor``, ``tensor_base`` and its method mixins), creation functions,
dtypes, printing, the torch-style functions; autograd: ``record`` (every op binds
through ``ir.bind`` and records a node), ``node``, ``saved``, ``views``, ``engine``
(``backward()`` runs the same VJP rules as ``fg.grad``), grad modes, custom
``Function``, anomaly mode, the fast path (``fast``, ``numpy_vjps``, ``replay``,
``bigmath``, ``bigpool``); and ``fg.jit`` over eager code (``jit_eager``, ``jit_state``,
``capture``, ``compiled_node``).

May import ``config``, ``ir``, ``tracer``, ``passes``, ``codegen``, ``runtime`` and
``transforms``; never the surfaces (``nn``, ``optim``, ``numpy``, ...), which
register what it needs to know about them.
"""

from . import (  # noqa: F401
    jit_eager,  # fg.jit over eager code
    sizes,  # counts stay traced
    tensor_api,  # Tensor's methods from sorting, selection, triangles, diagonal, ...
)
from .tensor import Tensor

__all__ = ["Tensor"]
