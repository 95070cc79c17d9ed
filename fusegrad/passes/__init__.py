"""IR -> IR passes: autodiff (vjp, jvp and their rule tables), batching (vmap),
simplify (DCE, CSE, folding, rewrites) and fusion.

May import ``config``, ``ir`` and ``tracer`` (passes replay a Function into a new
trace); never ``codegen``, ``runtime`` or anything above.
"""

from . import (  # noqa: F401  (register the region ops' and conv's batching rules)
    batching_control,
    batching_conv,
    batching_fft,
    batching_pool,
    matmul_rewrites,  # adds the matrix-product rules to simplify's REWRITES
)
from .batching_linalg import linalg_batch  # noqa: F401  (registers the linalg ops' rules)
