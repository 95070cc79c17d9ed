"""3-d pooling layers (PyTorch's ``MaxPool3d`` / ``AvgPool3d``) over ``F.max_pool3d`` /
``F.avg_pool3d``; the 1-d and 2-d ones are in ``layers_conv``."""

from __future__ import annotations

from . import functional as F
from .layers_conv import _MaxPoolNd
from .module import Module


class MaxPool3d(_MaxPoolNd):
    """The maximum of each window of (N, C, D, H, W); ``stride`` defaults to
    ``kernel_size``; ``return_indices=True`` also returns the flat indices."""

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(Module):
    """The mean of each window of (N, C, D, H, W) (PyTorch's divisor rules)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)
