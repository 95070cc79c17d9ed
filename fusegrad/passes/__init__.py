"""IR -> IR passes: autodiff (vjp, jvp and their rule tables), batching (vmap),
simplify (DCE, CSE, folding, rewrites) and fusion.

May import ``config``, ``ir`` and ``tracer`` (passes replay a Function into a new
trace); never ``codegen``, ``runtime`` or anything above.
"""

from . import matmul_rewrites  # noqa: F401  (adds the matrix-product rules to simplify's REWRITES)
