"""The array API standard's array attributes on tracers: ``__array_namespace__``,
``device``, ``to_device`` and ``mT``.

The namespace itself (``fusegrad.array_api``) lives in a higher layer and registers
itself here when it is imported; ``import fusegrad`` registers what imports it.
"""

from __future__ import annotations

from types import ModuleType

from ..ir import array as A

#: the array API versions the namespace follows
API_VERSIONS = ("2021.12", "2022.12", "2023.12")

_NAMESPACE: list = []


def register_namespace(namespace) -> None:
    """The namespace: its module, or a function that imports it and returns it (called
    by the first ``__array_namespace__``)."""
    _NAMESPACE[:] = [namespace]


class Device:
    """The one device fusegrad computes on: the CPU (``x.device``, ``device=`` arguments)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "cpu"

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) or other == "cpu"

    def __hash__(self) -> int:
        return hash("cpu")


CPU = Device()


def check_device(device, what: str) -> None:
    """``device`` must be None or the CPU."""
    if device is not None and not (device is CPU or device == "cpu"):
        raise ValueError(f"{what}: fusegrad computes on the CPU only, got device={device!r}")


class ArrayAPIMethods:
    """Mixin for the traced array class."""

    __slots__ = ()

    def __array_namespace__(self, api_version: str | None = None) -> ModuleType:
        """The array API namespace for this array: ``fusegrad.numpy.array_api``."""
        if api_version is not None and api_version not in API_VERSIONS:
            raise ValueError(f"fusegrad supports array API versions {', '.join(API_VERSIONS)}; "
                             f"got api_version={api_version!r}")
        if not _NAMESPACE:
            raise RuntimeError("import fusegrad (which registers fusegrad.array_api) to "
                               "use the array API namespace")
        namespace = _NAMESPACE[0]
        return namespace if isinstance(namespace, ModuleType) else namespace()

    @property
    def device(self) -> Device:
        return CPU

    def to_device(self, device, /, *, stream=None):
        check_device(device, "to_device")
        return self

    @property
    def mT(self):
        """The transpose of the last two axes (a stack of matrices)."""
        nd = len(self.shape)
        if nd < 2:
            raise ValueError(f"mT needs an array of rank 2 or more, got shape {self.shape}")
        return A.transpose(self, [*range(nd - 2), nd - 1, nd - 2])

    # NumPy returns new arrays from these; a write to the result must not reach ``self``
    def __pos__(self):
        return type(self)(self._trace, self.value)

    def copy(self):
        return type(self)(self._trace, self.value)

    def astype(self, dtype, copy: bool = True):
        out = A.astype(self, dtype)
        return self.copy() if copy and out is self else out
