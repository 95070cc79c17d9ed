"""``fusegrad.utils``: PyTorch's ``torch.utils`` surface (``utils.data``)."""

from . import data

__all__ = ["data"]
