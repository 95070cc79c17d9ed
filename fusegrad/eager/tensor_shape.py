"""Shape operations, indexing and matrix products of the eager Tensor.

View operations (``view``, ``reshape``, ``permute``, ``t``, ``expand``,
``unsqueeze``, basic indexing, ...) return tensors that share memory and the
version counter with their input, as PyTorch's views do. Indexing follows
PyTorch: each basic index (an int, a slice, ``None``) is its own operation
(``SelectBackward0``, ``SliceBackward0``, ``UnsqueezeBackward0``); any array
or tensor index makes the whole indexing one ``IndexBackward0``.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.indexing import getitem as _ir_getitem
from . import fast, fast_view, replay
from . import tensor_base as TB
from .names import NAMES
from .tensor_inplace import setitem
from .tensor_math import arg, composite, op


def view_op(key: str, structure, fn, *args):
    """``fn(*args)`` as the view operation ``key`` (``op(key, ..., view=True)``), replayed
    like ``composite``: ``structure`` is everything besides the arguments' types that
    decides which ops ``fn`` binds."""
    if len(args) == 1:
        return fast_view.run(NAMES[key], structure, fn, args[0])
    return replay.run(NAMES[key], structure, fn, *args, view=True)


def _sizes(args) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], tuple | list):
        args = tuple(args[0])
    return tuple(int(a) for a in args)


def _resolve(shape, numel: int) -> tuple[int, ...]:
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(d for d in shape if d != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if d == -1 else d for d in shape)
    if math.prod(shape) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _dim(d: int, nd: int) -> int:
    return TB._norm_dim(int(d), nd)


def _full(s: slice, n: int) -> bool:
    return s.indices(n) == (0, n, 1)


def _is_basic(i) -> bool:
    return i is None or i is Ellipsis or isinstance(i, slice) or (
        isinstance(i, int | np.integer) and not isinstance(i, bool | np.bool_))


class TensorShape:
    """Mixin of ``fusegrad.Tensor``: reshaping, indexing and contractions."""

    __slots__ = ()

    def _reshaped(self, key: str, shape):
        return view_op(key, ("reshape", shape), lambda x: ops.reshape(x, shape=shape), self)

    def view(self, *shape):
        """The same data with another shape (a view; one dimension may be -1)."""
        if len(shape) == 1 and not isinstance(shape[0], tuple | list | int):
            return self.to(shape[0])
        return self._reshaped("view", _resolve(_sizes(shape), self.numel()))

    def reshape(self, *shape):
        return self._reshaped("view", _resolve(_sizes(shape), self.numel()))

    def view_as(self, other):
        return self.view(tuple(other.shape))

    def reshape_as(self, other):
        return self.reshape(tuple(other.shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        s = tuple(self.shape)
        if not s:
            return self._reshaped("view", (1,))
        a, b = _dim(start_dim, len(s)), _dim(end_dim, len(s))
        if a > b:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        return self._reshaped("view", s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:])

    def unflatten(self, dim: int, sizes):
        s = tuple(self.shape)
        d = _dim(dim, len(s))
        return self._reshaped("view", s[:d] + _resolve(tuple(sizes), s[d]) + s[d + 1:])

    def unsqueeze(self, dim: int):
        s = tuple(self.shape)
        d = _dim(dim, len(s) + 1)
        return self._reshaped("unsqueeze", s[:d] + (1,) + s[d:])

    def squeeze(self, dim=None):
        s = tuple(self.shape)
        if dim is None:
            return self._reshaped("squeeze", tuple(d for d in s if d != 1))
        dims = {_dim(d, len(s)) for d in (dim if isinstance(dim, tuple | list) else (dim,))}
        key = "squeeze_dims" if isinstance(dim, tuple | list) else "squeeze_dim"
        return self._reshaped(key, tuple(d for i, d in enumerate(s) if not (i in dims and d == 1)))

    def permute(self, *dims):
        nd = self.ndim
        perm = tuple(_dim(d, nd) for d in _sizes(dims))
        if sorted(perm) != list(range(nd)):
            raise RuntimeError(f"permute(): dims {list(_sizes(dims))} are not a permutation of "
                               f"the {nd} dimensions")
        return view_op("permute", ("transpose", perm), lambda x: ops.transpose(x, perm=perm),
                       self)

    def transpose(self, dim0: int, dim1: int):
        nd = self.ndim
        perm = list(range(nd))
        if nd:
            i, j = _dim(dim0, nd), _dim(dim1, nd)
            perm[i], perm[j] = perm[j], perm[i]
        perm = tuple(perm)
        return view_op("transpose", ("transpose", perm), lambda x: ops.transpose(x, perm=perm),
                       self)

    swapaxes = swapdims = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        return op("t", lambda: ops.transpose(self, perm=tuple(reversed(range(self.ndim)))),
                  view=True)

    @property
    def T(self):
        return op("permute", lambda: ops.transpose(self, perm=tuple(reversed(range(self.ndim)))),
                  view=True)

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def expand(self, *sizes):
        sizes = _sizes(sizes)
        s = tuple(self.shape)
        lead = len(sizes) - len(s)
        if lead < 0:
            raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be "
                               f"greater or equal to the number of dimensions in the tensor "
                               f"({len(s)})")
        target = tuple(s[i - lead] if d == -1 else d for i, d in enumerate(sizes))
        return op("expand", lambda: ops.broadcast_to(self, shape=target), view=True)

    def expand_as(self, other):
        return self.expand(tuple(other.shape))

    def repeat(self, *sizes):
        reps = _sizes(sizes)
        s = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
        if len(reps) < len(s):
            raise RuntimeError("Number of dimensions of repeat dims can not be smaller than "
                               "number of dimensions of tensor")

        def tile():
            x = A.reshape(self, tuple(v for d in s for v in (1, d)))
            x = A.broadcast_to(x, tuple(v for r, d in zip(reps, s) for v in (r, d)))
            return A.reshape(x, tuple(r * d for r, d in zip(reps, s)))

        return op("repeat", tile)

    def flip(self, *dims):
        nd = self.ndim
        axes = {_dim(d, nd) for d in _sizes(dims)}
        s = tuple(self.shape)
        starts = tuple(d - 1 if i in axes else 0 for i, d in enumerate(s))
        stops = tuple(-1 if i in axes else d for i, d in enumerate(s))
        steps = tuple(-1 if i in axes else 1 for i in range(nd))
        return op("flip", lambda: ops.slice(self, starts=starts, stops=stops, steps=steps))

    # --- indexing -------------------------------------------------------------------

    def select(self, dim: int, index: int):
        s = tuple(self.shape)
        if not s:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        d = _dim(dim, len(s))
        if not -s[d] <= index < s[d]:
            raise IndexError(f"index {index} is out of bounds for dimension {d} with size {s[d]}")
        i = int(index) % s[d]

        def sel():
            sub = ops.slice(self, starts=tuple(i if k == d else 0 for k in range(len(s))),
                            stops=tuple(i + 1 if k == d else n for k, n in enumerate(s)),
                            steps=(1,) * len(s))
            return ops.reshape(sub, shape=s[:d] + s[d + 1:])

        return op("select", sel, view=True)

    def _slice(self, dim: int, sl: slice):
        s = tuple(self.shape)
        start, stop, step = sl.indices(s[dim])
        if step <= 0:
            raise ValueError("step must be greater than zero")
        stop = max(stop, start)
        after = len(s) - dim - 1
        starts = (0,) * dim + (start,) + (0,) * after
        stops = s[:dim] + (stop,) + s[dim + 1:]
        steps = (1,) * dim + (step,) + (1,) * after
        return view_op("slice", ("slice", starts, stops, steps),
                       lambda x: ops.slice(x, starts=starts, stops=stops, steps=steps), self)

    def narrow(self, dim: int, start: int, length: int):
        d = _dim(dim, self.ndim)
        start = start % self.shape[d] if start < 0 else start
        return self._slice(d, slice(start, start + length))

    def unbind(self, dim: int = 0):
        return tuple(self.select(dim, i) for i in range(self.shape[_dim(dim, self.ndim)]))

    def chunk(self, chunks: int, dim: int = 0):
        n = self.shape[_dim(dim, self.ndim)]
        return self.split(max(1, -(-n // chunks)), dim)

    def split(self, split_size, dim: int = 0):
        d = _dim(dim, self.ndim)
        n = self.shape[d]
        sizes = ([split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
                 if isinstance(split_size, int) else list(split_size))
        out, start = [], 0
        for k in sizes:
            out.append(self._slice(d, slice(start, start + k)))
            start += k
        return tuple(out)

    def __getitem__(self, idx):
        entries = idx if isinstance(idx, tuple) else (idx,)
        if not all(_is_basic(i) for i in entries):
            entries = tuple(_index_arg(i) for i in entries)
            return op("index", lambda: _ir_getitem(self, entries))
        consumed = sum(1 for i in entries if i is not None and i is not Ellipsis)
        if consumed > self.ndim:
            raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
        if sum(i is Ellipsis for i in entries) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        out, dim = self, 0
        for i in entries:
            if i is Ellipsis:
                dim += self.ndim - consumed
            elif i is None:
                out = out.unsqueeze(dim)
                dim += 1
            elif isinstance(i, slice):
                if not _full(i, out.shape[dim]):
                    out = out._slice(dim, i)
                dim += 1
            else:
                out = out.select(dim, int(i))
        if out is self:
            shape = tuple(self.shape)
            out = view_op("alias", ("reshape", shape), lambda x: ops.reshape(x, shape=shape),
                          self)
        return out

    def __setitem__(self, idx, value):
        setitem(self, idx, value)

    def index_select(self, dim: int, index):
        d = _dim(dim, self.ndim)
        return op("index_select", lambda: ops.take(self, _index_arg(index), axis=d))

    def gather(self, dim: int, index, *, sparse_grad: bool = False):
        """``out[i][j] = self[index[i][j]][j]`` (dim 0) and likewise for other dims
        (``sparse_grad`` is accepted; the gradient is always dense)."""
        index = _index_arg(index)
        d = _dim(dim, self.ndim)
        s = tuple(self.shape)

        def g():
            idx_shape = tuple(index.shape)
            strides = [math.prod(s[k + 1:]) for k in range(len(s))]
            lin = 0
            for k in range(len(s)):
                coord = index if k == d else A.reshape(
                    ops.iota(n=idx_shape[k], dtype="i64"),
                    tuple(idx_shape[k] if j == k else 1 for j in range(len(s))))
                lin = lin + coord * strides[k]
            flat = A.reshape(self, (math.prod(s),))
            return ops.take(flat, A.broadcast_to(lin, idx_shape), axis=0)

        return op("gather", g)

    # --- contraction ------------------------------------------------------------------

    def matmul(self, other):
        """PyTorch's ``matmul``: dot, mv, mm, vector-matrix or broadcast batched product."""
        if isinstance(other, TB.TensorBase):  # two matrices of one dtype: the fast path
            a, b = self._cell.value, other._cell.value
            if (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 == b.ndim
                    and a.dtype == b.dtype):
                out = fast.run2("mm", "matmul", self, other)
                if out is not None:
                    return out
        other = arg(other)
        if self.dtype != other.dtype:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{self.dtype} != {other.dtype}")
        if self.ndim == 0 or other.ndim == 0:
            raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                               f"{self.ndim}D and {other.ndim}D")
        key = {(1, 1): "dot", (2, 1): "mv", (2, 2): "mm", (1, 2): "vecmat"}.get(
            (self.ndim, other.ndim), "unsafe_view")
        if key == "mm":
            out = fast.run2("mm", "matmul", self, other)
            if out is not None:
                return out
        return composite(key, "matmul", A.matmul, self, other)

    def mm(self, mat2):
        mat2 = arg(mat2)
        if self.ndim != 2 or mat2.ndim != 2:
            raise RuntimeError(f"mm: both arguments must be matrices, got {self.ndim}D and "
                               f"{mat2.ndim}D")
        return self.matmul(mat2)

    def dot(self, other):
        other = arg(other)
        if self.ndim != 1 or other.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D "
                               "tensors")
        return self.matmul(other)

    inner = dot

    def mv(self, vec):
        vec = arg(vec)
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(f"mv: expected a matrix and a vector, got {self.ndim}D and "
                               f"{vec.ndim}D")
        return self.matmul(vec)

    def bmm(self, mat2):
        mat2 = arg(mat2)
        if self.ndim != 3 or mat2.ndim != 3:
            raise RuntimeError(f"batch1 and batch2 must be 3D tensors, got {self.ndim}D and "
                               f"{mat2.ndim}D")
        return op("bmm", A.matmul, self, mat2)

    def outer(self, vec2):
        vec2 = arg(vec2)
        return op("outer", lambda: A.reshape(self, (-1, 1)) * A.reshape(vec2, (1, -1)))

    ger = outer


def _index_arg(i):
    """Index components: lists become arrays; Tensors are used as they are."""
    if isinstance(i, list):
        return np.asarray(i)
    return i
