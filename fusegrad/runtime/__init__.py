"""Executors: the NumPy reference interpreter and the eager Tensor with its autograd engine."""

from .interpreter import run
from .tensor import Tensor

__all__ = ["Tensor", "run"]
