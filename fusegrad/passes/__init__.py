"""IR -> IR passes: autodiff (vjp, jvp and their rule tables), batching (vmap),
simplify (DCE, CSE, folding, rewrites) and fusion.

May import ``config``, ``ir`` and ``tracer`` (passes replay a Function into a new
trace); never ``codegen``, ``runtime`` or anything above.
"""

from . import (
    batching_control,  # noqa: F401  (registers the region ops' batching rules)
    batching_fft,  # noqa: F401  (the fft op's batching rule)
)
