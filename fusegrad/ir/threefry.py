"""The ``threefry2x32`` op: the Threefry-2x32 counter-based hash (Salmon et al., 2011).

``threefry2x32(k0, k1, c0, c1, *, word)`` hashes the counter ``(c0, c1)`` under the
key ``(k0, k1)`` with 20 rounds (the variant Random123 calls ``threefry2x32_20`` and
JAX uses) and returns word ``word`` (0 or 1) of the result. Operands are ``int64``
arrays that broadcast against each other; only their low 32 bits are read, and the
result holds a uint32 value in an ``int64`` (0 <= r < 2**32). The IR has no unsigned
32-bit dtype, so that is how fusegrad carries 32-bit words.

The op has no gradient (``passes.autodiff.NON_DIFFERENTIABLE``), batches as any
elementwise op, and compiles to 32-bit integer arithmetic in native kernels
(``codegen/lean/scalar.py``). This module holds the NumPy reference.
"""

from __future__ import annotations

import numpy as np

from . import shapes as S
from .types import TensorType

#: rotation distances of rounds 0-3 (even groups) and 4-7 (odd groups)
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
#: the key-schedule parity constant
PARITY = 0x1BD11BDA
MASK = 0xFFFFFFFF


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def hash_words(k0, k1, c0, c1):
    """Both result words of Threefry-2x32-20, as ``uint32`` arrays (the reference)."""
    with np.errstate(over="ignore"):
        k0, k1, c0, c1 = (np.asarray(a).astype(np.uint32) for a in (k0, k1, c0, c1))
        ks = (k0, k1, k0 ^ k1 ^ np.uint32(PARITY))
        x0 = c0 + ks[0]
        x1 = c1 + ks[1]
        for group in range(5):
            for r in ROTATIONS[group % 2]:
                x0 = x0 + x1
                x1 = _rotl(x1, r) ^ x0
            x0 = x0 + ks[(group + 1) % 3]
            x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def threefry2x32(k0, k1, c0, c1, *, word):
    out = hash_words(k0, k1, c0, c1)[word]
    return np.asarray(out).astype(np.int64)


def threefry_rule(types, *, word):
    if word not in (0, 1):
        raise S.ShapeError(f"threefry2x32: word must be 0 or 1, got {word!r}")
    if any(t.dtype != np.int64 for t in types):
        raise S.ShapeError(f"threefry2x32: expects int64 operands, got {S.fmt(types)}")
    shape = S.broadcast_shapes("threefry2x32", *(t.shape for t in types))
    return (TensorType(shape, np.int64),)
