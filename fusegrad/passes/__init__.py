"""IR -> IR passes: autodiff (vjp and its rules), simplification."""

from . import batching_control  # noqa: F401  (registers the control-flow batching rules)
