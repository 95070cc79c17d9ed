"""Shape layers, containers and activations: ``Flatten``, ``Unflatten``, ``Identity``,
``ModuleList``, ``ModuleDict``, ``Softmax``, ``LogSoftmax``, ``GELU``, ``LeakyReLU``,
``ELU`` (PyTorch's names, arguments and ``repr``)."""

from __future__ import annotations

import collections

from . import functional as F
from .module import Module


class Identity(Module):
    """Returns its input (extra arguments are ignored, as PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Flatten(Module):
    """Flattens axes ``start_dim`` to ``end_dim`` (by default all but the batch axis)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """Splits axis ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)


class ModuleList(Module):
    """A list of modules, registered as children ``"0"``, ``"1"``, ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        if not -len(items) <= idx < len(items):
            raise IndexError(f"index {idx} is out of range")
        return items[idx % len(items)]

    def __setitem__(self, idx: int, module) -> None:
        self.add_module(str(idx % len(self)), module)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __iadd__(self, modules):
        return self.extend(modules)


class ModuleDict(Module):
    """An ordered dict of modules, registered as children under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __getitem__(self, key: str):
        return self._modules[key]

    def __setitem__(self, key: str, module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key: str):
        m = self._modules[key]
        del self._modules[key]
        return m

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, dict | collections.abc.Mapping |
                                              ModuleDict) else modules
        for k, m in pairs:
            self.add_module(k, m)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

    def forward(self, input):
        return input.softmax(-1 if self.dim is None else self.dim)


class LogSoftmax(Softmax):
    def forward(self, input):
        return input.log_softmax(-1 if self.dim is None else self.dim)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"

    def forward(self, input):
        return F.gelu(input, self.approximate)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")

    def forward(self, input):
        return F.elu(input, self.alpha)
