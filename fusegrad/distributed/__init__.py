"""``fusegrad.distributed``: data-parallel gradients and training on Dask.

Install with ``pip install "fusegrad[distributed]"`` (it pulls ``dask[distributed]``).

- :func:`value_and_grad` — a loss that is a sum or a mean over examples, evaluated on
  ``dask.array`` data chunked along the example axis: every chunk's value and gradient
  is computed by compiled code on a worker, and the results are summed in a tree.
- :func:`map_grad` — independent gradients over a batch of parameter sets, spread
  over the workers.
- :func:`fit` — a training loop that keeps the parameters on the client, ships them to
  the workers each step, and brings back only the gradient.
- :func:`compile_stats` — ``fg.compile_stats()`` of every worker.

Workers never trace or pickle code: the client traces and differentiates once per
function and chunk shape, and ships the gradient as IR text; each worker parses it and
compiles it once (or loads it from fusegrad's disk cache). Everything runs on whatever
Dask scheduler is active: a ``dask.distributed.Client`` if one exists, else Dask's
local threads.
"""

from .grad import LossStructureError, value_and_grad
from .shipping import compile_stats
from .train import FitResult, fit, map_grad

__all__ = ["FitResult", "LossStructureError", "compile_stats", "fit", "map_grad",
           "value_and_grad"]
