"""Making Tensors: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros``/``ones``/``full``/
``empty`` (and ``*_like``), ``arange``, ``linspace``, ``eye``, ``rand``/``randn``/``randint``
(seeded by ``manual_seed``), as in PyTorch.

Python floats become the default float dtype (float32), Python ints int64,
bools bool; NumPy arrays keep their dtype. ``fg.tensor`` copies its data,
``fg.from_numpy`` and ``fg.as_tensor`` (when the dtype already matches) share it.
"""

from __future__ import annotations

import numpy as np

from .. import _forksafe
from ..tracer import Tracer
from . import dtypes as D
from . import tensor_base as TB
from .device import CPU, check_cpu


def _infer(data) -> np.dtype:
    """The dtype PyTorch gives nested Python data (float32 for floats, int64 for ints)."""
    if isinstance(data, TB.TensorBase):
        return data._data.dtype
    if isinstance(data, np.ndarray | np.generic):
        return data.dtype
    flat = np.asarray(data, dtype=object).reshape(-1) if not isinstance(
        data, bool | int | float) else [data]
    kinds = set()
    for v in flat:
        if isinstance(v, TB.TensorBase):
            kinds.add(v._data.dtype.kind)
        elif isinstance(v, bool | np.bool_):
            kinds.add("b")
        elif isinstance(v, int | np.integer):
            kinds.add("i")
        elif isinstance(v, float | np.floating):
            kinds.add("f")
        else:
            raise TypeError(f"tensor(): could not infer dtype of {type(v).__name__}")
    if "f" in kinds or not kinds:
        return np.dtype(D.get_default_dtype())
    return np.dtype(np.int64) if "i" in kinds else np.dtype(np.bool_)


def _data(data):
    if isinstance(data, TB.TensorBase):
        return data.detach().numpy()
    if isinstance(data, list | tuple) and any(isinstance(v, TB.TensorBase) for v in data):
        return [_data(v) for v in data]
    return data


def _finish(t, requires_grad: bool):
    return t.requires_grad_(True) if requires_grad else t


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory=False):
    """A new leaf tensor holding a copy of ``data`` (nested lists, scalars, arrays, Tensors)."""
    _cpu(device)
    if isinstance(data, Tracer):  # an array argument of a traced eager step (fg.jit)
        t = TB.make(data)
        return _finish(t if dtype is None else t.to(dtype), requires_grad)
    dt = np.dtype(D.as_dtype(dtype)) if dtype is not None else _infer(data)
    if dtype is None and isinstance(data, np.ndarray | np.generic):
        dt = dt.newbyteorder("=")  # a copy anyway: big-endian data is converted (as PyTorch)
        D.from_numpy_dtype(dt)  # a TypeError saying what to do for unsupported dtypes
    return _finish(TB.make(np.array(_data(data), dtype=dt)), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """``data`` as a Tensor, sharing memory with a NumPy array or Tensor when no cast is needed."""
    _cpu(device)
    if isinstance(data, TB.TensorBase):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and data.dtype.isnative and (
            dtype is None or np.dtype(D.as_dtype(dtype)) == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray):
    """A tensor sharing memory with ``array``: changes to one show in the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    D.from_numpy_dtype(array.dtype)
    return TB.make(array)


def _cpu(device) -> None:
    check_cpu(device)


def _shape(size) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], tuple | list):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _dt(dtype, default=None) -> np.dtype:
    if dtype is None:
        return np.dtype(default or D.get_default_dtype())
    return np.dtype(D.as_dtype(dtype))


def _filled(fill, size, dtype, requires_grad, device):
    _cpu(device)
    return _finish(TB.make(np.full(_shape(size), fill, dtype=_dt(dtype))), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    return _filled(0, size, dtype, requires_grad, device)


def ones(*size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    return _filled(1, size, dtype, requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    _cpu(device)
    return _finish(TB.make(np.empty(_shape(size), dtype=_dt(dtype))), requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    if dtype is None and isinstance(fill_value, bool | int) and not isinstance(fill_value, float):
        dtype = D.bool if isinstance(fill_value, bool) else D.int64
    return _filled(fill_value, (size,), dtype, requires_grad, device)


def _like(t, dtype):
    return t.shape, (t.dtype if dtype is None else dtype)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    shape, dt = _like(input, dtype)
    return zeros(shape, dtype=dt, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    shape, dt = _like(input, dtype)
    return ones(shape, dtype=dt, device=device, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    shape, dt = _like(input, dtype)
    return empty(shape, dtype=dt, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
              **kwargs):
    shape, dt = _like(input, dtype)
    return full(shape, fill_value, dtype=dt, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False):
    """``arange(4.0)`` is float32 [0., 1., 2., 3.]; all-integer arguments give int64."""
    _cpu(device)
    if end is None:
        start, end = 0, start
    ints = all(isinstance(v, int | np.integer) and not isinstance(v, bool)
               for v in (start, end, step))
    dt = _dt(dtype, D.int64 if ints else None)
    n = max(0, int(np.ceil((end - start) / step)))
    data = (start + step * np.arange(n, dtype=np.float64)).astype(dt) if not ints else (
        np.arange(start, end, step, dtype=np.int64).astype(dt))
    return _finish(TB.make(data), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False):
    _cpu(device)
    dt = np.dtype(_dt(dtype))
    if dt in (np.float32, np.float64) and int(steps) > 1:
        data = _linspace_two_sided(float(start), float(end), int(steps), dt)
    else:
        data = np.linspace(float(start), float(end), int(steps)).astype(dt)
    return _finish(TB.make(data), requires_grad)


def _linspace_two_sided(start: float, end: float, steps: int, dt: np.dtype) -> np.ndarray:
    """PyTorch's CPU ``linspace`` values: the step in ``dt``; the first half counted up
    from ``start`` and the rest down from ``end``, each ``a + step * i`` rounded once
    (as a fused multiply-add), so the printed numbers of scripts agree bit for bit."""
    wide = np.float64 if dt == np.float32 else np.longdouble
    lo, hi = dt.type(start), dt.type(end)
    step = (hi - lo) / dt.type(steps - 1)
    half = steps // 2
    i = np.arange(steps, dtype=wide)
    out = np.empty(steps, dt)
    out[:half] = wide(lo) + wide(step) * i[:half]
    out[half:] = wide(hi) - wide(step) * (steps - 1 - i[half:])
    return out


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False):
    _cpu(device)
    return _finish(TB.make(np.eye(n, m, dtype=_dt(dtype))), requires_grad)


# --- random numbers -------------------------------------------------------------------


class Generator:
    """A seedable source of random numbers (``fg.Generator().manual_seed(0)``)."""

    def __init__(self, device="cpu"):
        check_cpu(device, "a generator")
        self.device = CPU
        self._rng = np.random.default_rng()
        self._lock = _forksafe.lock()
        self._seed = None
        self._key_data = np.random.SeedSequence().generate_state(2).astype(np.int64)
        self._key_tensor = None
        if TB._CLASS:
            self._key  # noqa: B018  (made now, so a jitted step finds it as existing state)

    @property
    def _key(self):
        """The key of the numbers traced code draws (``multinomial`` under ``fg.jit``): an
        int64 Tensor of 2 words advanced in place, so a jitted step holds it as state."""
        if self._key_tensor is None:
            self._key_tensor = TB.make(self._key_data)
        return self._key_tensor

    def manual_seed(self, seed: int):
        with self._lock:
            self._seed = int(seed)
            self._rng = np.random.default_rng(int(seed))
            self._key_data[...] = np.random.SeedSequence(int(seed)).generate_state(2)
            if self._key_tensor is not None:
                self._key_tensor._cell.value[...] = self._key_data
                self._key_tensor._vc.n += 1
        return self

    def initial_seed(self) -> int | None:
        return self._seed


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator: the random tensors after it are reproducible."""
    return default_generator.manual_seed(seed)


def _rng(generator=None) -> np.random.Generator:
    return (generator or default_generator)._rng


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Uniform on [0, 1)."""
    _cpu(device)
    data = _rng(generator).random(_shape(size)).astype(_dt(dtype))
    return _finish(TB.make(data), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Standard normal."""
    _cpu(device)
    data = _rng(generator).standard_normal(_shape(size)).astype(_dt(dtype))
    return _finish(TB.make(data), requires_grad)


def randint(low, high=None, size=(), *, generator=None, dtype=None, device=None,
            requires_grad: bool = False):
    """Integers uniform in [low, high); ``randint(high, size)`` draws from [0, high)."""
    _cpu(device)
    if isinstance(high, tuple | list) or (high is None and size != ()):
        low, high, size = 0, low, (size if high is None else high)
    elif high is None:
        low, high = 0, low
    data = _rng(generator).integers(low, high, _shape((size,))).astype(_dt(dtype, D.int64))
    return _finish(TB.make(data), requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None):
    _cpu(device)
    return TB.make(_rng(generator).permutation(n).astype(_dt(dtype, D.int64)))


def rand_like(input, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    shape, dt = _like(input, dtype)
    return rand(shape, dtype=dt, device=device, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    shape, dt = _like(input, dtype)
    return randn(shape, dtype=dt, device=device, requires_grad=requires_grad)


def is_tensor(obj) -> bool:
    return isinstance(obj, TB.TensorBase)


__all__ = [
    "Generator", "arange", "as_tensor", "default_generator", "empty", "empty_like", "eye",
    "from_numpy", "full", "full_like", "is_tensor", "linspace", "manual_seed", "ones",
    "ones_like", "rand", "rand_like", "randint", "randn", "randn_like", "randperm", "tensor",
    "zeros", "zeros_like",
]  # fmt: skip
