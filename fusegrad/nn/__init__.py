"""``fusegrad.nn``: a minimal ``torch.nn`` for eager training loops.

``Module`` and ``Parameter``; the layers ``Linear``, ``Sequential``, ``ReLU``,
``Tanh``, ``Sigmoid``; the losses ``MSELoss`` and ``CrossEntropyLoss``; and
``functional`` (stable activations, ``linear`` and the losses as functions).

>>> import fusegrad as fg
>>> fg.nn.Sequential(fg.nn.Linear(2, 4), fg.nn.ReLU(), fg.nn.Linear(4, 1))
Sequential(
  (0): Linear(in_features=2, out_features=4, bias=True)
  (1): ReLU()
  (2): Linear(in_features=4, out_features=1, bias=True)
)
"""

from . import functional
from .layers import Linear, ReLU, Sequential, Sigmoid, Tanh
from .loss import CrossEntropyLoss, MSELoss
from .module import Module
from .parameter import Parameter

__all__ = ["CrossEntropyLoss", "Linear", "MSELoss", "Module", "Parameter", "ReLU", "Sequential",
           "Sigmoid", "Tanh", "functional"]
