"""``torch.amp`` (and ``torch.cuda.amp``) on the CPU: ``GradScaler`` and ``autocast``.

fusegrad computes in the dtype of the Tensors (float32 by default, NumPy has no
bfloat16), so mixed precision has nothing to do, and both are what PyTorch gives
on a machine without CUDA:

* ``GradScaler`` is a pass-through: ``scale(loss)`` returns ``loss``,
  ``unscale_`` does nothing, ``step(optimizer)`` calls ``optimizer.step()``,
  ``update`` does nothing, ``get_scale()`` is 1.0. ``enabled=True`` for CUDA
  warns, as PyTorch does when CUDA is absent, and is disabled.
* ``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` is a
  context manager (and decorator) that changes no dtype: operations keep
  running in their inputs' dtype.

``set_float32_matmul_precision`` records the setting (float32 matmuls are
always computed in float32).
"""

from __future__ import annotations

import functools
import warnings

from .eager import device as _device

__all__ = ["GradScaler", "autocast", "get_float32_matmul_precision", "is_autocast_available",
           "set_float32_matmul_precision"]


class GradScaler:
    """Loss scaling for float16 training, disabled: every method passes through."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if enabled and str(device).startswith("cuda"):
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
        self._enabled = False
        self._init_scale = float(init_scale)

    def is_enabled(self) -> bool:
        return self._enabled

    def scale(self, outputs):
        return outputs

    def unscale_(self, optimizer) -> None:
        return None

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        return None

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict) -> None:
        return None


class autocast:
    """Mixed-precision region: a no-op on fusegrad's CPU (dtypes are the inputs')."""

    def __init__(self, device_type: str = "cuda", dtype=None, enabled: bool = True,
                 cache_enabled=None):
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_available(device_type: str) -> bool:
    return device_type == "cpu"


_PRECISION = ["highest"]


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: use 'highest', 'high' or "
                           "'medium'")
    _PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _PRECISION[0]


def _cuda_grad_scaler(init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                      backoff_factor: float = 0.5, growth_interval: int = 2000,
                      enabled: bool = True) -> GradScaler:
    return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                      enabled)


def _cuda_autocast(enabled: bool = True, dtype=None, cache_enabled=None) -> autocast:
    return autocast("cuda", dtype, enabled, cache_enabled)


# torch.cuda.amp's spellings, on the CUDA namespace the eager layer defines
_device.cuda.amp = _device._namespace("cuda.amp", "``torch.cuda.amp``: see ``fusegrad.amp``.",
                                      GradScaler=_cuda_grad_scaler, autocast=_cuda_autocast)
_device.cuda.is_bf16_supported = _device._false
_device.backends.cuda.matmul = _device._namespace(
    "backends.cuda.matmul", "Matmul switches: recorded, no effect on the CPU.",
    allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
    allow_bf16_reduced_precision_reduction=True)
_device.backends.cudnn.allow_tf32 = True
