"""``fusegrad.nn.init``: PyTorch's in-place parameter initialisers.

Each fills its Tensor in place outside autograd and returns it; random numbers
come from fusegrad's default generator (``fg.manual_seed`` makes them repeat) or
the ``generator`` given. Fans follow ``_calculate_fan_in_and_fan_out``: for a
weight of shape (out, in, *kernel), ``fan_in = in * prod(kernel)`` and
``fan_out = out * prod(kernel)``.
"""

from __future__ import annotations

import math

import numpy as np

from ..eager.creation import _rng
from ..eager.grad_mode import no_grad

__all__ = ["calculate_gain", "constant_", "eye_", "kaiming_normal_", "kaiming_uniform_",
           "normal_", "ones_", "orthogonal_", "trunc_normal_", "uniform_", "xavier_normal_",
           "xavier_uniform_", "zeros_"]


def _fill(tensor, values):
    with no_grad():
        tensor.copy_(np.asarray(values, dtype=np.float64))
    return tensor


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, bool) or not isinstance(param, int | float):
            raise ValueError(f"negative_slope {param} not a valid number")
        else:
            slope = param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    field = math.prod(shape[2:])
    return shape[1] * field, shape[0] * field


def _fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Uniform on ``[a, b)``."""
    return _fill(tensor, _rng(generator).uniform(a, b, tuple(tensor.shape)))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Normal with ``mean`` and ``std``."""
    return _fill(tensor, _rng(generator).normal(mean, std, tuple(tensor.shape)))


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None):
    """Normal with ``mean`` and ``std`` conditioned on ``[a, b]`` (inverse-CDF sampling)."""
    from scipy import special

    lo = special.ndtr((a - mean) / std)
    hi = special.ndtr((b - mean) / std)
    u = _rng(generator).uniform(lo, hi, tuple(tensor.shape))
    z = special.ndtri(u) * std + mean
    return _fill(tensor, np.clip(z, a, b))


def constant_(tensor, val):
    """Every element ``val``."""
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """The identity matrix (a 2-d Tensor)."""
    if len(tensor.shape) != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tuple(tensor.shape)))


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """Uniform on ``[-b, b]``, ``b = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """Normal with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    """Uniform on ``[-b, b]``, ``b = gain * sqrt(3 / fan)`` (He et al.)."""
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    """Normal with ``std = gain / sqrt(fan)`` (He et al.)."""
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal one, signs fixed
    by ``R``'s diagonal; trailing axes are flattened into columns."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows, cols = shape[0], math.prod(shape[1:])
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(shape))
