"""``fusegrad.Tensor``: the eager tensor with PyTorch's autograd semantics.

>>> import fusegrad as fg
>>> x = fg.tensor(2.0, requires_grad=True)
>>> z = x ** 2 + 3
>>> z
tensor(7., grad_fn=<AddBackward0>)
>>> z.backward()
>>> x.grad
tensor(4.)

Every operation binds the op table's ops on the tensor's data (see
``record``); backward runs the same VJP rules as ``fg.grad`` (see ``engine``).
"""

from __future__ import annotations

import numpy as np

from ..ir import ops
from ..ir.types import dtype_name
from ..transforms.plan import register_eager_tensor
from . import dtypes as D
from . import tensor_base as TB
from .device import CPU, check_cpu, is_device_like
from .engine import backward
from .formatting import tensor_repr
from .grad_mode import is_grad_enabled
from .names import NAMES
from .node import register_tensor_hook, retain_on
from .record import operation
from .tensor_complex import TensorComplex
from .tensor_inplace import TensorInplace
from .tensor_math import TensorMath
from .tensor_reduce import TensorReduce
from .tensor_shape import TensorShape


class _TensorMeta(type):
    """``isinstance(x, fg.FloatTensor)`` checks the dtype, as PyTorch's legacy types do."""

    def __instancecheck__(cls, obj):
        want = getattr(cls, "_legacy_dtype", None)
        if want is None:
            return type.__instancecheck__(cls, obj)
        return isinstance(obj, Tensor) and obj.dtype == want


class Tensor(TensorMath, TensorReduce, TensorShape, TensorInplace, TensorComplex, TB.TensorBase,
             metaclass=_TensorMeta):
    """A multi-dimensional array that records the operations on it for autograd.

    ``fg.Tensor(3, 5)`` is an uninitialised float32 tensor of shape (3, 5);
    ``fg.Tensor([1, 2])`` copies data (as float32). Prefer ``fg.tensor(data)``.
    """

    __slots__ = ()

    def __init__(self, *args, dtype=None, requires_grad: bool = False):
        dt = D.get_default_dtype() if dtype is None else D.as_dtype(dtype)
        if all(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in args) or (
                len(args) == 1 and isinstance(args[0], TB.Size)):
            shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], TB.Size) else args
            data = np.empty(tuple(int(a) for a in shape), dtype=np.dtype(dt))
        elif len(args) == 1:
            src = args[0]
            data = np.array(src.detach().numpy() if isinstance(src, TB.TensorBase) else src,
                            dtype=np.dtype(dt))
        else:
            raise TypeError(f"Tensor(): expected sizes or one data argument, got {args!r}")
        self._init(TB._Cell(data), TB._Version(), False, None, 0)
        if requires_grad:
            self.requires_grad_(True)

    # --- hooks and printing (node, formatting) ----------------------------------------

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` during backward."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains:
            return
        self._retains = True
        retain_on(self)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a Tensor it returns
        replaces the gradient. Returns a handle whose ``remove()`` unregisters it."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        return register_tensor_hook(self, hook)

    def __repr__(self) -> str:
        return tensor_repr(self)

    # --- conversions ---------------------------------------------------------------

    def to(self, *args, dtype=None, device=None, non_blocking: bool = False,
           copy: bool = False, memory_format=None):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``: self
        when nothing changes (unless ``copy=True``), else a converted copy with history.
        Only the CPU exists: any other device raises ``RuntimeError``."""
        target = dtype
        for a in args:
            if isinstance(a, TB.TensorBase):
                target = a.dtype
            elif is_device_like(a):
                device = a
            elif a is not None:
                target = a
        check_cpu(device, "a Tensor")
        if target is None or D.as_dtype(target) == self.dtype:
            return self.clone() if copy else self
        dt = D.as_dtype(target)
        return operation(NAMES["to"], lambda: ops.convert(self, dtype=dtype_name(np.dtype(dt))))

    @property
    def device(self):
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_cpu(self) -> bool:
        return True

    def get_device(self) -> int:
        return -1

    def type(self, dtype=None, non_blocking: bool = False):
        """``x.type()`` is the legacy type name; ``x.type(fg.DoubleTensor)`` converts."""
        if dtype is None:
            return f"fusegrad.{D.TYPE_NAMES[self.dtype]}"
        if isinstance(dtype, str):
            name = dtype.rsplit(".", 1)[-1]
            match = [d for d, n in D.TYPE_NAMES.items() if n == name]
            if not match:
                raise ValueError(f"invalid type: {dtype!r}")
            dtype = match[0]
        elif isinstance(dtype, type) and getattr(dtype, "_legacy_dtype", None) is not None:
            dtype = dtype._legacy_dtype
        return self.to(dtype)

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def short(self):
        return self.to(D.int16)

    def bool(self):
        return self.to(D.bool)

    def byte(self):
        return self.to(D.uint8)

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking: bool = False, **kwargs):
        check_cpu("cuda" if device is None else device if not isinstance(device, int)
                  else f"cuda:{device}", "a Tensor")

    def contiguous(self, memory_format=None):
        return self

    def clone(self, *, memory_format=None):
        """A copy with its own memory; gradients flow back to this tensor."""
        return operation(NAMES["clone"],
                         lambda: ops.convert(self, dtype=dtype_name(self._data.dtype)))

    # --- new tensors like this one --------------------------------------------------

    def _new(self, data, dtype, requires_grad):
        dt = self.dtype if dtype is None else D.as_dtype(dtype)
        t = TB.make(np.asarray(data, dtype=np.dtype(dt)))
        return t.requires_grad_(True) if requires_grad else t

    def new_zeros(self, *size, dtype=None, requires_grad=False, **kwargs):
        return self._new(np.zeros(_size(size)), dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False, **kwargs):
        return self._new(np.ones(_size(size)), dtype, requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, requires_grad=False, **kwargs):
        return self._new(np.full(_size((size,)), fill_value), dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False, **kwargs):
        return self._new(np.empty(_size(size)), dtype, requires_grad)

    def new_tensor(self, data, dtype=None, requires_grad=False, **kwargs):
        if isinstance(data, TB.TensorBase):
            data = data.detach().numpy()
        return self._new(np.array(data), dtype, requires_grad)


def _size(size) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], tuple | list):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


TB._CLASS.append(Tensor)
TB._BACKWARD.append(backward)


def _transform_data(t: Tensor) -> np.ndarray:
    """What a transform (``fg.grad``, ``fg.jit``, ...) takes a Tensor argument as: its data,
    outside its autograd graph."""
    return t.detach()._data


register_eager_tensor(Tensor, data=_transform_data, grad_enabled=is_grad_enabled)


def _legacy(name: str, dt):
    """``fg.FloatTensor`` & co.: constructors of a fixed dtype, usable with ``isinstance``."""

    def new(cls, *args, requires_grad=False):
        return Tensor(*args, dtype=dt, requires_grad=requires_grad)

    return _TensorMeta(name, (), {"__new__": new, "_legacy_dtype": dt,
                                  "__doc__": f"A {dt} Tensor (PyTorch's legacy type)."})


FloatTensor = _legacy("FloatTensor", D.float32)
DoubleTensor = _legacy("DoubleTensor", D.float64)
HalfTensor = _legacy("HalfTensor", D.float16)
LongTensor = _legacy("LongTensor", D.int64)
IntTensor = _legacy("IntTensor", D.int32)
BoolTensor = _legacy("BoolTensor", D.bool)
ByteTensor = _legacy("ByteTensor", D.uint8)
