"""Random numbers with explicit keys (``fg.random``), in the style of ``jax.random``.

A key is an ``int64`` array of shape ``(2,)`` holding two 32-bit words (each in
``0 .. 2**32 - 1``). Every function is a pure function of its key: the same key gives
the same numbers, in every process, eagerly, under ``fg.jit`` (interpreter and
compiled code agree bit for bit), ``fg.vmap``, ``fg.scan`` and ``fg.fori_loop``.
Draw with a key once; ``split`` or ``fold_in`` it to get fresh keys::

    key = fg.random.key(0)
    key, sub = fg.random.split(key)
    x = fg.random.normal(sub, (3, 4))

All numbers come from one op, ``threefry2x32`` (the Threefry-2x32-20 hash that JAX
uses, see ``fusegrad.ir.threefry``): element ``i`` of a draw hashes the counter
``(0, i)`` under the key. ``split`` and ``fold_in`` hash ``(0, j)`` and ``(0, data)``,
as ``jax.random`` does with ``jax_threefry_partitionable`` on, so they give JAX's keys.
The samplers use only exactly rounded arithmetic (``+ - * /``, ``sqrt``, integer ops),
so no math-library difference between NumPy and compiled code can change a draw.
Random numbers carry no gradient: under ``fg.grad`` they are constants.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .ir import ops
from .ir.bind import aval
from .ir.types import dtype_name, is_float

__all__ = ["bernoulli", "bits", "dropout", "fold_in", "key", "normal", "split", "uniform"]

_MASK = 0xFFFFFFFF


def key(seed) -> np.ndarray:
    """A key from an integer seed: ``[high 32 bits, low 32 bits]`` of the seed as a
    64-bit integer (negative seeds wrap, as two's complement)."""
    seed = operator.index(seed)
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"key: seed {seed} does not fit in 64 bits")
    seed &= 2**64 - 1
    return np.array([seed >> 32, seed & _MASK], dtype=np.int64)


def _words(k):
    """The two words of key ``k`` as 0-d int64 values."""
    t = aval(k)
    if t.shape != (2,) or not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"a key is an integer array of shape (2,), got {t}; make one with "
                        "fg.random.key(seed)")
    if t.dtype != np.int64:
        k = ops.convert(k, dtype="i64")
    return tuple(
        ops.reshape(ops.slice(k, starts=(i,), stops=(i + 1,), steps=(1,)), shape=())
        for i in (0, 1)
    )


def _hash(kw, c0, c1, word):
    """Word ``word`` of the hash of counters ``(c0, c1)`` under key words ``kw``."""
    return ops.threefry2x32(*kw, c0, c1, word=word)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _counters(shape):
    """The flat indices 0 .. size - 1 of ``shape``."""
    return ops.iota(n=math.prod(shape), dtype="i64")


def _as_shape(x, shape):
    return ops.reshape(x, shape=tuple(shape))


def split(key, num: int = 2):
    """``num`` new keys, shape ``(num, 2)``: row ``j`` hashes the counter ``(0, j)``."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"split: num must be >= 0, got {num}")
    kw, j = _words(key), ops.iota(n=num, dtype="i64")
    w0 = ops.reshape(_hash(kw, 0, j, 0), shape=(num, 1))
    w1 = ops.reshape(_hash(kw, 0, j, 1), shape=(num, 1))
    return ops.concatenate(w0, w1, axis=1)


def fold_in(key, data):
    """A new key from ``key`` and an integer ``data`` (a Python int, or a 0-d integer
    array or traced value such as a loop index): the hash of the counter ``(0, data)``."""
    if isinstance(data, int | np.integer):
        data = int(data) & _MASK
    elif aval(data).shape != () or not np.issubdtype(aval(data).dtype, np.integer):
        raise TypeError(f"fold_in: data must be an integer scalar, got {aval(data)}")
    elif aval(data).dtype != np.int64:
        data = ops.convert(data, dtype="i64")
    kw = _words(key)
    w = [ops.reshape(_hash(kw, 0, data, i), shape=(1,)) for i in (0, 1)]
    return ops.concatenate(*w, axis=0)


def bits(key, shape=()):
    """Uniform 32-bit words, as ``int64`` values in ``0 .. 2**32 - 1``."""
    shape = _shape(shape)
    c = _counters(shape)
    return _as_shape(_hash(_words(key), 0, c, 0), shape)


def _unit(kw, shape, dtype, stream: int):
    """Uniform on [0, 1): 52 random mantissa bits for float64 (from both words of the
    hash of ``(stream, i)``), 23 for float32 and 10 for float16; ``m * 2**-b`` is exact."""
    c = _counters(shape)
    w0 = _hash(kw, stream, c, 0)
    name = dtype_name(dtype)
    if name == "f64":
        w1 = _hash(kw, stream, c, 1)
        m, b = ops.add(ops.mul(w0, 2**20), ops.floor_divide(w1, 2**12)), 52
    else:
        b = {"f32": 23, "f16": 10}[name]
        m = ops.floor_divide(w0, 2 ** (32 - b))
    u = ops.mul(ops.convert(m, dtype=name), float(2.0**-b))
    return _as_shape(u, shape)


def _float_dtype(dtype, fn: str) -> np.dtype:
    dt = np.dtype(dtype)
    if not is_float(dt):
        raise TypeError(f"{fn}: dtype must be a floating-point dtype, got {dt}")
    dtype_name(dt)
    return dt


def uniform(key, shape=(), dtype=np.float64, minval=0.0, maxval=1.0):
    """Uniform floats on ``[minval, maxval)``: ``minval + (maxval - minval) * u`` with
    ``u`` on [0, 1) (see ``_unit``), kept ``>= minval`` against rounding. Python number
    bounds take ``dtype``; array bounds promote with it as any operands do."""
    shape = _shape(shape)
    dt = _float_dtype(dtype, "uniform")
    u = _unit(_words(key), shape, dt, 0)
    if isinstance(minval, int | float) and isinstance(maxval, int | float) and (
        minval == 0.0 and maxval == 1.0
    ):
        return u
    if isinstance(minval, int | float):
        minval = np.asarray(minval, dtype=dt)
    if isinstance(maxval, int | float):
        maxval = np.asarray(maxval, dtype=dt)
    return ops.maximum(ops.add(ops.mul(u, ops.sub(maxval, minval)), minval), minval)


def _log_unit(u):
    """log(u) for u in (0, 1]: eight square roots bring u to [0.86, 1], then
    log y = 2 atanh z, z = (y - 1) / (y + 1), by its series to z**15; times 256.
    Absolute error below 1e-13, from exactly rounded operations only."""
    y = u
    for _ in range(8):
        y = ops.sqrt(y)
    z = ops.div(ops.sub(y, 1.0), ops.add(y, 1.0))
    s = ops.mul(z, z)
    p = 1.0 / 15.0
    for k in (13, 11, 9, 7, 5, 3, 1):
        p = ops.add(ops.mul(p, s), 1.0 / k)
    return ops.mul(ops.mul(z, p), 512.0)


def _cos_2pi(t):
    """cos(2 pi t) for t in [0, 1): -sin(2 pi (1/4 - |t - 1/2|)), the sine by its Taylor
    series to degree 21 on [-pi/2, pi/2] (error below 1e-16)."""
    c = ops.sub(0.25, ops.abs(ops.sub(t, 0.5)))
    x = ops.mul(c, 2.0 * math.pi)
    x2 = ops.mul(x, x)
    coeffs = [(-1) ** k / math.factorial(2 * k + 1) for k in range(11)]
    p = coeffs[-1]
    for a in reversed(coeffs[:-1]):
        p = ops.add(ops.mul(p, x2), a)
    return ops.neg(ops.mul(x, p))


def normal(key, shape=(), dtype=np.float64):
    """Standard normal floats by the Box-Muller transform
    ``sqrt(-2 log u1) cos(2 pi u2)``, with ``u1 = 1 - uniform`` in (0, 1] and ``u2``
    uniform from the second counter stream; computed in float64, then cast."""
    shape = _shape(shape)
    dt = _float_dtype(dtype, "normal")
    kw = _words(key)
    u1 = ops.sub(1.0, _unit(kw, shape, np.float64, 0))
    u2 = _unit(kw, shape, np.float64, 1)
    r = ops.sqrt(ops.mul(_log_unit(u1), -2.0))
    z = ops.mul(r, _cos_2pi(u2))
    return z if dt == np.float64 else ops.convert(z, dtype=dtype_name(dt))


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability ``p`` (``uniform < p``); ``shape``
    defaults to ``p``'s shape."""
    if shape is None:
        shape = aval(p).shape
    return ops.lt(uniform(key, shape), p)


def dropout(key, x, rate: float):
    """Inverted dropout: each element of ``x`` is zeroed with probability ``rate`` and the
    rest scaled by ``1 / (1 - rate)``, so the expectation is ``x``. The mask depends only
    on the key and ``x``'s shape; the gradient flows through the kept elements."""
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    if rate == 0.0:
        return x
    t = aval(x)
    keep = bernoulli(key, 1.0 - rate, t.shape)
    scale = np.asarray(1.0 / (1.0 - rate), dtype=t.dtype)
    return ops.select(keep, ops.mul(x, scale), np.zeros((), dtype=t.dtype))
