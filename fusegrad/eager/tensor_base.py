"""The eager Tensor's core: its data, its autograd state, conversions to Python.

A Tensor's data is whatever ``bind`` accepts: a NumPy array, or a tracer when
the eager engine runs inside a trace (a compiled training step). Nothing here
assumes concrete data except the conversions that need values (``item()``,
``numpy()``), which raise a clear error on traced data. ``repr``, ``retain_grad`` and
``register_hook`` are ``tensor.Tensor``'s (they use ``formatting`` and ``node``, which
import this module).

Data lives in a ``_Cell`` that ``detach()`` and ``.data`` share (so they see
each other's in-place writes) and versions in a ``_Version`` counter that
``detach()`` and views share with their base, as PyTorch's version counter.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np

from ..ir.errors import TracerError
from . import dtypes as D
from .capture import _state as _capture
from .capture import note_created
from .grad_mode import _mode


class _Cell:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Version:
    __slots__ = ("n",)

    def __init__(self, n: int = 0):
        self.n = n


class Size(tuple):
    """A tensor's shape: a tuple that prints as ``fusegrad.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"fusegrad.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n


#: The concrete class ``make`` builds (set by ``tensor.py``, which defines it).
_CLASS: list[type] = []
#: ``engine.backward`` (set by ``tensor.py``; ``engine`` imports this module).
_BACKWARD: list = []


def make(data, requires_grad: bool = False, grad_fn=None, output_nr: int = 0):
    """A new Tensor over ``data`` (NumPy array or tracer), bypassing ``__init__``."""
    if isinstance(data, np.generic):
        data = np.asarray(data)
    t = object.__new__(_CLASS[0])
    t._init(_Cell(data), _Version(), requires_grad, grad_fn, output_nr)
    return t


def is_concrete(data) -> bool:
    return isinstance(data, np.ndarray)


_NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead."
)


class TensorBase:
    """Data, version counter and autograd state of a Tensor (see ``fusegrad.Tensor``)."""

    __slots__ = ("__dict__", "__weakref__", "_acc", "_base", "_base_version", "_cell",
                 "_grad", "_grad_fn", "_hooks", "_inference", "_out_nr", "_retains", "_rg",
                 "_vc")
    __array_priority__ = 1000

    def _init(self, cell, vc, requires_grad, grad_fn, output_nr):
        self._cell = cell
        self._vc = vc
        self._rg = requires_grad
        self._grad_fn = grad_fn
        self._out_nr = output_nr
        self._grad = None
        self._retains = False
        self._hooks = None
        self._base = None
        self._base_version = 0
        self._acc = None
        self._inference = _mode.inference
        if _capture.stack:
            note_created(self)

    @property
    def _data(self):
        return self._cell.value

    # --- metadata -----------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return Size(self._cell.value.shape)

    @property
    def dtype(self) -> D.dtype:
        return D.from_numpy_dtype(self._cell.value.dtype)

    @property
    def ndim(self) -> int:
        return len(self._cell.value.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        """The shape (``fusegrad.Size``), or the length of dimension ``dim``."""
        s = self._cell.value.shape
        if dim is None:
            return Size(s)
        return s[_norm_dim(dim, len(s))]

    def numel(self) -> int:
        n = 1
        for d in self._cell.value.shape:
            n *= d
        return n

    nelement = numel

    def element_size(self) -> int:
        return self._cell.value.dtype.itemsize

    @property
    def device(self) -> str:
        return "cpu"

    is_cuda = False
    is_sparse = False
    is_quantized = False
    is_meta = False

    def is_floating_point(self) -> bool:
        return self._cell.value.dtype.kind == "f"

    def is_contiguous(self, memory_format=None) -> bool:
        return True

    def is_inference(self) -> bool:
        return self._inference

    def _is_view(self) -> bool:
        return self._base is not None

    # --- autograd state -----------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` in place (leaves only, floating dtypes only); returns self."""
        flag = bool(requires_grad)
        if self._grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return self
        if flag and self._cell.value.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               f"gradients (this one is {self.dtype})")
        if flag and self._inference and not _mode.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._rg = flag
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors that do not require grad and for those the user created."""
        return self._grad_fn is None

    @property
    def grad_fn(self):
        """The node that made this tensor (None for leaves)."""
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        return self._out_nr

    @property
    def retains_grad(self) -> bool:
        return self._retains

    @property
    def _version(self) -> int:
        return self._vc.n

    @property
    def grad(self):
        """The accumulated gradient (leaves and ``retain_grad()`` tensors), else None."""
        if self._grad_fn is not None and not self._retains:
            warnings.warn(_NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, TensorBase):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"{type(value).__name__}")
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(f"assigned grad has data of a different size: "
                                   f"{list(value.shape)} for a tensor of size {list(self.shape)}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"assigned grad has data of a different type: {value.dtype} "
                                   f"for a tensor of type {self.dtype}")
        self._grad = value

    @property
    def data(self):
        """This tensor's data as a new leaf that does not require grad and shares storage.

        In-place changes through ``.data`` are not tracked by autograd (as in
        PyTorch); prefer ``detach()``. Assigning ``x.data = y`` makes ``x`` use
        ``y``'s storage.
        """
        t = make(None)
        t._cell = self._cell
        return t

    @data.setter
    def data(self, other) -> None:
        if not isinstance(other, TensorBase):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(other).__name__}")
        self._cell = other._cell

    def detach(self):
        """A new leaf sharing this tensor's data and version counter, with no history."""
        t = make(None)
        t._cell = self._cell
        t._vc = self._vc
        return t

    def detach_(self):
        """Make this tensor a leaf that does not require grad; returns self."""
        if self._base is not None and self._rg:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._out_nr = 0
        self._rg = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the leaves' ``.grad`` (see
        ``fusegrad.autograd.backward``)."""
        _BACKWARD[0]((self,), None if gradient is None else (gradient,), retain_graph, create_graph,
                 inputs=inputs)

    # --- Python conversions (need concrete data) -------------------------------------

    def _concrete(self, what: str):
        data = self._cell.value
        if not is_concrete(data):
            raise TracerError(f"{what} needs the Tensor's value, but its data is traced "
                              f"({data!r}); it is only known when the compiled function runs")
        return data

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array sharing memory with this tensor."""
        if self._rg and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._concrete("numpy()")

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        data = self._concrete("item()")
        if data.size != 1:
            raise RuntimeError(f"a Tensor with {data.size} elements cannot be converted to Scalar")
        return data.reshape(()).item()

    def tolist(self):
        return self._concrete("tolist()").tolist()

    def _scalar(self, what: str):
        data = self._concrete(what)
        if data.size != 1:
            raise RuntimeError(f"only one element tensors can be converted to Python scalars "
                               f"(this one has shape {list(data.shape)})")
        return data.reshape(()).item()

    def __bool__(self) -> bool:
        data = self._concrete("bool()")
        if data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {list(data.shape)}); use .any() or .all()")
        return bool(data.reshape(()).item())

    def __float__(self) -> float:
        return float(self._scalar("float()"))

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def __index__(self) -> int:
        if self.is_floating_point() or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self._scalar("index"))

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and is_concrete(self._data):
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment")
        if id(self) in memo:
            return memo[id(self)]
        new = object.__new__(type(self))
        data = self._data
        new._init(_Cell(np.array(data) if is_concrete(data) else data), _Version(), self._rg,
                  None, 0)
        memo[id(self)] = new
        if self._grad is not None:
            new._grad = copy.deepcopy(self._grad, memo)
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    @classmethod
    def _make_subclass(cls, subclass, data, require_grad: bool = False):
        """A ``subclass`` instance sharing ``data``'s storage (for ``nn.Parameter``)."""
        new = object.__new__(subclass)
        new._init(data._cell, data._vc, False, None, 0)
        new.requires_grad_(require_grad)
        return new


def _norm_dim(dim: int, nd: int) -> int:
    n = max(nd, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n
