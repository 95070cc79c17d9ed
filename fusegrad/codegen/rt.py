"""Helpers that generated modules call: NumPy semantics for scalars, gathers, scans.

Every helper is ``@njit`` so that LLVM inlines the scalar ones into the fused
loops. Gathers and scatters check their indices and raise IndexError, as the
interpreter does (the caller re-runs the interpreter for the full message).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from .inline import inline_njit

_jit = numba.njit(error_model="numpy", cache=True)
_inline = inline_njit


@_inline
def maximum(a, b):
    """np.maximum: NaN if either is NaN."""
    return a if (a >= b or a != a) else b


@_inline
def minimum(a, b):
    """np.minimum: NaN if either is NaN."""
    return a if (a <= b or a != a) else b


@_inline
def clamp(x, lo, hi):
    return minimum(maximum(x, lo), hi)


@_inline
def sign(x):
    """np.sign: -1, 0, 1, NaN for NaN, in x's type."""
    if x > 0:
        return type(x)(1)
    if x < 0:
        return type(x)(-1)
    return x - x if x != x else type(x)(0)


@_inline
def csign(z):
    """np.sign of a complex number (NumPy 2): z / |z|, 0 at 0."""
    a = abs(z)
    return z / a if a != 0 else z * 0


@_inline
def logistic(x):
    """1 / (1 + exp(-x)) without overflow in either tail."""
    if x >= 0:
        return 1 / (1 + np.exp(-x))
    e = np.exp(x)
    return e / (1 + e)


@_inline
def erf(x):
    return math.erf(x)


def floor_divide(a, b):
    """np.floor_divide. Integers: ``a // 0`` is 0 and ``MIN // -1`` wraps to MIN, as in
    NumPy; the hardware division would kill the process (SIGFPE) on both."""
    return np.floor_divide(a, b)


def remainder(a, b):
    """np.remainder. Integers: ``a % 0`` and ``MIN % -1`` are 0, as in NumPy (no SIGFPE)."""
    return np.remainder(a, b)


@_jit
def _float_floor_divide(a, b):
    """NumPy's float floor division (``npy_divmod``): ``inf // 3`` is NaN, as in NumPy."""
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    exact = (a - mod) / b
    div = exact - 1 if mod != 0 and (b < 0) != (mod < 0) else exact
    if div == 0:
        return np.copysign(div - div, a / b)
    fl = np.floor(div)
    return fl + 1 if div - fl > 0.5 else fl


@_inline
def power(a, b):
    """``a ** b`` in a fast loop. A negative integer exponent gives 0 here and sets the
    loop's rare flag (``emit._rare_flag``), so the call is redone by ``power_checked``."""
    if b < 0:
        return a - a
    return a**b


@_inline
def power_checked(a, b):
    """Integer ``a ** b``: a negative exponent raises ValueError, as in NumPy."""
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    return a**b


@_jit
def _float_remainder(a, b):
    """NumPy's float remainder (``npy_divmod``): a zero result has the divisor's sign."""
    mod = np.fmod(a, b)
    if b == 0:
        return mod
    if mod == 0:
        return np.copysign(mod - mod, b)
    return mod + b if (b < 0) != (mod < 0) else mod


def _signed_ints(a, b) -> bool:
    return isinstance(a, types.Integer) and isinstance(b, types.Integer) and b.signed


@overload(floor_divide, inline="always", jit_options={"cache": True})
def _floor_divide(a, b):
    if isinstance(a, types.Float) or isinstance(b, types.Float):
        return lambda a, b: _float_floor_divide(a, b)
    if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return lambda a, b: np.floor_divide(a, b)
    if _signed_ints(a, b):
        def impl(a, b):
            if b == 0:
                return a - a
            if b == -1:
                return -a
            return np.floor_divide(a, b)
        return impl

    def impl_unsigned(a, b):
        if b == 0:
            return a - a
        return np.floor_divide(a, b)
    return impl_unsigned


@overload(remainder, inline="always", jit_options={"cache": True})
def _remainder(a, b):
    if isinstance(a, types.Float) or isinstance(b, types.Float):
        return lambda a, b: _float_remainder(a, b)
    if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return lambda a, b: np.remainder(a, b)
    if _signed_ints(a, b):
        def impl(a, b):
            if b == 0 or b == -1:
                return a - a
            return np.remainder(a, b)
        return impl

    def impl_unsigned(a, b):
        if b == 0:
            return a - a
        return np.remainder(a, b)
    return impl_unsigned


@_inline
def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


@_inline
def threefry2x32(k0, k1, c0, c1, word):
    """Word ``word`` of Threefry-2x32-20 (as ``ir.threefry``), on int64s masked to 32 bits."""
    m = np.int64(0xFFFFFFFF)
    k0 = np.int64(k0) & m
    k1 = np.int64(k1) & m
    k2 = k0 ^ k1 ^ np.int64(0x1BD11BDA)
    x0 = (np.int64(c0) + k0) & m
    x1 = (np.int64(c1) + k1) & m
    for g in range(5):
        if g % 2 == 0:
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 13) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 15) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 26) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 6) ^ x0
        else:
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 17) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 29) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 16) ^ x0
            x0 = (x0 + x1) & m
            x1 = _rotl32(x1, 24) ^ x0
        j = (g + 1) % 3
        i = (g + 2) % 3
        x0 = (x0 + (k0 if j == 0 else (k1 if j == 1 else k2))) & m
        x1 = (x1 + (k0 if i == 0 else (k1 if i == 1 else k2)) + g + 1) & m
    return x0 if word == 0 else x1


@_jit
def bcast_index(i, out_dims, in_dims):
    """Flat index into a batch of shape ``in_dims`` broadcast to ``out_dims``."""
    idx = 0
    stride = 1
    for k in range(out_dims.size - 1, -1, -1):
        o = out_dims[k]
        coord = i % o
        i //= o
        if in_dims[k] != 1:
            idx += coord * stride
            stride *= in_dims[k]
    return idx


@_jit
def contiguous(x):
    return np.ascontiguousarray(x)


def blas_layout(a):
    """``a`` itself if BLAS can read it (C or Fortran order: a transposed view passes as
    a transpose flag, not a copy), else a C-ordered copy."""
    return np.ascontiguousarray(a)


@overload(blas_layout, jit_options={"cache": True})
def _blas_layout(a):
    if isinstance(a, types.Array) and a.layout in "CF":
        return lambda a: a
    return lambda a: np.ascontiguousarray(a)


@_jit
def matmul2(a, b):
    """2-D float product through BLAS; transposed operands are not copied."""
    return np.dot(blas_layout(a), blas_layout(b))


@_jit
def matmul_into(a, b, out):
    """``matmul2(a, b)`` written into ``out`` (C order, aliasing neither operand)."""
    np.dot(blas_layout(a), blas_layout(b), out)
    return out


@_jit
def matmul_int(a, b):
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), a.dtype)
    for i in range(m):
        for p in range(k):
            aip = a[i, p]
            for j in range(n):
                out[i, j] += aip * b[p, j]
    return out


@_jit
def take(x3, idx):
    """x3[:, idx, :] with NumPy's negative indices; out of range raises IndexError."""
    pre, n, post = x3.shape
    out = np.empty((pre, idx.size, post), x3.dtype)
    for j in range(idx.size):
        k = idx[j]
        if k < -n or k >= n:
            raise IndexError("take: index out of bounds")
        if k < 0:
            k += n
        for a in range(pre):
            for c in range(post):
                out[a, j, c] = x3[a, k, c]
    return out


@_jit
def index_update(x3, idx, v3, accumulate):
    """x3 with v3[:, j, :] written to (or added at) x3[:, idx[j], :]."""
    out = x3.copy()
    pre, n, post = x3.shape
    for j in range(idx.size):
        k = idx[j]
        if k < -n or k >= n:
            raise IndexError("index update: index out of bounds")
        if k < 0:
            k += n
        for a in range(pre):
            for c in range(post):
                if accumulate:
                    out[a, k, c] += v3[a, j, c]
                else:
                    out[a, k, c] = v3[a, j, c]
    return out


@_jit
def cumsum3(x3):
    """Running sums along axis 1, accumulated in order as np.cumsum does."""
    pre, _, post = x3.shape
    out = np.empty_like(x3)
    for a in range(pre):
        for c in range(post):
            out[a, :, c] = np.cumsum(x3[a, :, c])
    return out


@_jit
def argsort3(x3):
    """Stable ascending sort permutation along axis 1 (NaNs last, as np.argsort)."""
    pre, n, post = x3.shape
    out = np.empty((pre, n, post), np.int64)
    for a in range(pre):
        for c in range(post):
            out[a, :, c] = np.argsort(x3[a, :, c], kind="mergesort")
    return out


@_jit
def argext3(x3, largest):
    """Index of the first max (or min) along axis 1; NaN counts as the extremum."""
    pre, n, post = x3.shape
    out = np.empty((pre, post), np.int64)
    for a in range(pre):
        for c in range(post):
            best = 0
            bv = x3[a, 0, c]
            for j in range(1, n):
                v = x3[a, j, c]
                if bv != bv:
                    break
                better = v > bv if largest else v < bv
                if better or v != v:
                    best, bv = j, v
            out[a, c] = best
    return out


@_inline
def lanes_sum(buf, m, zero):
    """Sum of ``buf[:m]`` in 8 interleaved lanes (vectorisable; fixed order)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
    k = m // 8 * 8
    for j in range(0, k, 8):
        s0 += buf[j]
        s1 += buf[j + 1]
        s2 += buf[j + 2]
        s3 += buf[j + 3]
        s4 += buf[j + 4]
        s5 += buf[j + 5]
        s6 += buf[j + 6]
        s7 += buf[j + 7]
    for j in range(k, m):
        s0 += buf[j]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@_inline
def lanes_max(buf, m, init):
    acc = init
    for j in range(m):
        acc = maximum(acc, buf[j])
    return acc


@_inline
def lanes_min(buf, m, init):
    acc = init
    for j in range(m):
        acc = minimum(acc, buf[j])
    return acc


@_inline
def combine_sum(part, zero):
    """The chunks' partial sums, added in chunk order (the same bits on any thread count)."""
    acc = zero
    for c in range(part.size):
        acc += part[c]
    return acc


@_inline
def combine_max(part, init):
    return lanes_max(part, part.size, init)


@_inline
def combine_min(part, init):
    return lanes_min(part, part.size, init)


# Array stores. Numba compiles the shape-mismatch error path of every slice assignment
# with an array on the right (its message formatting: 1-2 s) into the function that makes
# it; generated modules call these instead, which compile it once per signature and keep
# it in Numba's disk cache.


@_jit
def put(dst, i, src):
    """``dst[i] = src`` for an array ``src`` (a stacked loop output or carry)."""
    dst[i] = src


@_jit
def assign(dst, src):
    """``dst[...] = src``: ``dst`` a view (a slice being updated)."""
    dst[...] = src


@_jit
def fill(dst, value):
    """``dst[...] = value`` for a scalar ``value``."""
    dst[...] = value


@_jit
def grow(stack):
    """``stack`` with its leading axis doubled (the new half uninitialised)."""
    return np.concatenate((stack, np.empty_like(stack)))


# Allocations. Numba compiles its own implementation of np.empty, np.zeros, np.full and
# ndarray.any for every new signature in every process (30-130 ms each); these keep it
# in the disk cache.


@_jit
def empty(shape, dtype):
    return np.empty(shape, dtype)


@_jit
def zeros(shape, dtype):
    return np.zeros(shape, dtype)


@_jit
def full(shape, value):
    return np.full(shape, value)


@_jit
def transpose(x, perm):
    """``x.transpose(perm)`` (Numba compiles its axis checks, with their messages, into
    the function that calls it)."""
    return x.transpose(perm)


@_jit
def iota(n, dtype):
    """``np.arange(n).astype(dtype)``."""
    return np.arange(n).astype(dtype)


@_jit
def any_true(flags):
    return flags.any()


from .incgamma_rt import (  # noqa: E402,F401  (the incomplete gamma and beta functions)
    betainc,
    betainc_grad,
    betaincc,
    gammainc,
    gammainc_da,
    gammaincc,
)
from .rt_fft import call as fft_call  # noqa: E402,F401  (the fft op's call-out, from objmode)
from .special_rt import (  # noqa: E402,F401  (scipy.special functions for generated code)
    betaln,
    digamma,
    erfc,
    erfcinv,
    erfcx,
    erfinv,
    gamma,
    i0e,
    i1e,
    iv,
    ive,
    jv,
    lgamma,
    logit,
    pdtr,
    polygamma,
    yv,
)
