"""``fusegrad.nn``: a minimal ``torch.nn`` for eager training loops.

``Module`` and ``Parameter``; the layers ``Linear``, ``Sequential``, ``ReLU``,
``Tanh``, ``Sigmoid``; the losses ``MSELoss`` and ``CrossEntropyLoss``; and
``functional`` (stable activations, ``linear`` and the losses as functions).
Convolution, pooling, normalisation, dropout and embedding layers, containers and
more activations and losses are in ``layers_conv``, ``layers_misc`` and
``loss_extra``; ``init`` holds PyTorch's parameter initialisers.

>>> import fusegrad as fg
>>> fg.nn.Sequential(fg.nn.Linear(2, 4), fg.nn.ReLU(), fg.nn.Linear(4, 1))
Sequential(
  (0): Linear(in_features=2, out_features=4, bias=True)
  (1): ReLU()
  (2): Linear(in_features=4, out_features=1, bias=True)
)
"""

from . import functional, init, parallel, utils
from .layers import Linear, ReLU, Sequential, Sigmoid, Tanh
from .layers_conv import (
    AvgPool1d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    Dropout,
    Embedding,
    LayerNorm,
    MaxPool1d,
    MaxPool2d,
)
from .layers_misc import (
    ELU,
    GELU,
    Flatten,
    Identity,
    LeakyReLU,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    Softmax,
    Unflatten,
)
from .layers_pool import AvgPool3d, MaxPool3d
from .loss import CrossEntropyLoss, MSELoss
from .loss_extra import (
    BCELoss,
    BCEWithLogitsLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .parallel import DataParallel
from .parameter import Parameter

__all__ = [
    "ELU",
    "GELU",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "CrossEntropyLoss",
    "DataParallel",
    "Dropout",
    "Embedding",
    "Flatten",
    "HuberLoss",
    "Identity",
    "KLDivLoss",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Tanh",
    "Unflatten",
    "functional",
    "init",
    "parallel",
    "utils",
]
