"""Devices, as PyTorch names them, on a machine with the CPU only.

``fg.device("cuda:0")`` parses like ``torch.device`` (``.type``, ``.index``, its
repr), so device-selection code runs unchanged; *using* any device but the CPU
(a tensor created on it, ``.to("cuda")``, ``.cuda()``) raises ``RuntimeError``
saying that fusegrad runs on the CPU only. ``fg.cuda``, ``fg.accelerator`` and
``fg.backends.mps`` answer as PyTorch does on a machine without an accelerator.

>>> import fusegrad as fg
>>> fg.device("cuda", 1)
device(type='cuda', index=1)
>>> "cuda" if fg.cuda.is_available() else "cpu"
'cpu'
"""

from __future__ import annotations

import builtins
import types

#: The device types PyTorch's parser knows (in its error message's order).
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")


class device:
    """A device: ``device("cpu")``, ``device("cuda:0")``, ``device("cuda", 0)``."""

    __slots__ = ("_index", "_type")

    def __init__(self, type, index: builtins.int | None = None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): an index cannot be given with a device object")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, builtins.int):  # device(0): PyTorch's current accelerator
            raise RuntimeError("fusegrad runs on the CPU only: there is no accelerator device "
                               f"{type}")
        if not isinstance(type, str):
            raise TypeError(f"device() expected a string or device, got {builtins.type(type)}")
        name, sep, idx = type.partition(":")
        if name not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                               f"of device string: {type}")
        if sep:
            if index is not None or not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = builtins.int(idx)
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self._type, self._index = name, index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> builtins.int | None:
        return self._index

    def __eq__(self, other) -> builtins.bool:
        # as PyTorch: a device equals devices only (device("cpu") == "cpu" is False)
        return isinstance(other, device) and (self._type, self._index) == (other._type,
                                                                          other._index)

    def __hash__(self) -> builtins.int:
        return hash((self._type, self._index))

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return (device, (self._type, self._index))


CPU = device("cpu")


def is_device_like(obj) -> builtins.bool:
    """``obj`` names a device (a ``device``, or a string starting with a device type)."""
    return isinstance(obj, device) or (isinstance(obj, str)
                                       and obj.partition(":")[0] in DEVICE_TYPES)


def check_cpu(dev, what: str = "tensors") -> None:
    """Raise unless ``dev`` is None or the CPU (parses it first: a typo says so)."""
    if dev is None:
        return
    d = dev if isinstance(dev, device) else device(dev)
    if d.type != "cpu":
        raise RuntimeError(f"fusegrad runs on the CPU only: cannot put {what} on device "
                           f"'{d}'. Select the device with `\"cuda\" if fg.cuda.is_available() "
                           "else \"cpu\"` (or use \"cpu\")")


def set_default_device(dev) -> None:
    """Only the CPU can be the default device (None resets it, also to the CPU)."""
    check_cpu(dev, "the default device")


def get_default_device() -> device:
    return CPU


def _namespace(name: str, doc: str, **functions) -> types.ModuleType:
    mod = types.ModuleType(f"fusegrad.{name}", doc)
    for key, value in functions.items():
        setattr(mod, key, value)
    return mod


def _false(*args, **kwargs) -> builtins.bool:
    return False


def _zero(*args, **kwargs) -> builtins.int:
    return 0


def _none(*args, **kwargs):
    return None


def _no_device(*args, **kwargs):
    raise RuntimeError("fusegrad runs on the CPU only: no CUDA device is available")


cuda = _namespace(
    "cuda", "CUDA, absent: ``is_available()`` is False, ``device_count()`` is 0.",
    is_available=_false, device_count=_zero, is_initialized=_false, synchronize=_none,
    manual_seed=_none, manual_seed_all=_none, empty_cache=_none, current_device=_no_device,
    get_device_name=_no_device, set_device=_no_device)

accelerator = _namespace(
    "accelerator", "The current accelerator: none (``current_accelerator()`` is None).",
    is_available=_false, device_count=_zero, current_accelerator=_none,
    current_device_index=_no_device, synchronize=_none)

backends = _namespace(
    "backends", "Backend switches: ``backends.mps`` and ``backends.cuda`` are unavailable.",
    mps=_namespace("backends.mps", "Apple's Metal, absent.", is_available=_false,
                   is_built=_false),
    cuda=_namespace("backends.cuda", "CUDA, absent.", is_built=_false),
    cudnn=_namespace("backends.cudnn", "cuDNN, absent.", is_available=_false, enabled=False,
                     deterministic=False, benchmark=False))
