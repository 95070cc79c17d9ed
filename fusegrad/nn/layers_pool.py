"""3-d pooling layers (PyTorch's ``MaxPool3d`` / ``AvgPool3d``) over ``F.max_pool3d`` /
``F.avg_pool3d``; the 1-d and 2-d ones are in ``layers_conv``."""

from __future__ import annotations

from . import functional as F
from .layers_conv import _AvgPoolNd, _MaxPoolNd


class MaxPool3d(_MaxPoolNd):
    """The maximum of each window of (N, C, D, H, W); ``stride`` defaults to
    ``kernel_size``; ``return_indices=True`` also returns the flat indices."""

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(_AvgPoolNd):
    """The mean of each window of (N, C, D, H, W) (PyTorch's divisor rules)."""

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)
