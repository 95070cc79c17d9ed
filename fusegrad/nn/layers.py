"""Layers: ``Linear``, ``Sequential`` and the activations ``ReLU``, ``Tanh``, ``Sigmoid``."""

from __future__ import annotations

import collections
import math

from ..eager import dtypes as D
from ..eager.creation import _cpu, empty
from ..eager.grad_mode import no_grad
from . import functional as F
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features).

    Initialised as PyTorch does (Kaiming-uniform with ``a=sqrt(5)``): weight and
    bias uniform on ``[-1/sqrt(in_features), 1/sqrt(in_features)]``, drawn from
    fusegrad's default generator (reproducible after ``fg.manual_seed``).

    >>> import fusegrad as fg
    >>> fg.nn.Linear(3, 2)
    Linear(in_features=3, out_features=2, bias=True)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        _cpu(device)
        dt = D.get_default_dtype() if dtype is None else D.as_dtype(dtype)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = Parameter(empty(self.out_features, self.in_features, dtype=dt))
        if bias:
            self.bias = Parameter(empty(self.out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw weight, then bias, uniformly on ``[-1/sqrt(in), 1/sqrt(in)]``."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Sequential(Module):
    """Modules applied in order: ``Sequential(Linear(2, 8), ReLU(), Linear(8, 1))``.

    Children are named ``"0"``, ``"1"``, ... (or by the keys of one
    ``OrderedDict`` argument); indexing with an int or a slice, assigning to an int index, ``len``,
    iteration and ``append`` work as in PyTorch.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(collections.OrderedDict(items[idx]))
        n = len(items)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return items[idx % n][1]

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules)
        if not -len(keys) <= idx < len(keys):
            raise IndexError(f"index {idx} is out of range")
        setattr(self, keys[idx % len(keys)], module)

    def append(self, module: Module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ReLU(Module):
    """``max(x, 0)`` elementwise (relu'(0) = 0); ``inplace=True`` overwrites the input."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else input.relu()

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """``tanh(x)`` elementwise."""

    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise, exact in both tails."""

    def forward(self, input):
        return input.sigmoid()
