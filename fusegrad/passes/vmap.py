"""The batching pass with every op's rule: ``batch`` (``batching``) once the rules of
the region ops, convolution, FFT, pooling and linear algebra are registered with
``BATCH_RULES``. Those of the region ops batch their bodies with ``batch`` itself, so
``batching`` cannot import them: the transforms import the pass from here (and
``passes`` does not, so a gradient loads none of it)."""

from __future__ import annotations

from . import (  # noqa: F401  (register their rules)
    batching_control,
    batching_conv,
    batching_fft,
    batching_linalg,
    batching_pool,
)
from .batching import BatchingError, batch

__all__ = ["BatchingError", "batch"]
