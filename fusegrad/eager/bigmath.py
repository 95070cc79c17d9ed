"""sin, cos and erf of large concrete arrays through the math library's vectorised kernels.

NumPy's float64 ``sin``/``cos`` take 10-14 ns per element; the math library
(``fusegrad.codegen.mathlib``, within ``mathlib.ULP_BOUND`` ulp of the exact
result) takes about 1.4 ns in a compiled loop; SciPy's ``erf`` takes about 70 ns,
the math library's a few. For arrays of at least
``THRESHOLD`` elements the eager Tensor computes these two functions (forward,
and the ``cos``/``sin`` their VJPs read) with small Numba kernels, compiled
once and cached on disk (``bigmath_kernels``); below it, and for every other
function (where NumPy is as fast), NumPy (or SciPy) computes; also with
``FUSEGRAD_DISABLE_JIT`` (``config.DISABLE_JIT``). Measured: docs/eager_speed.md.

float32 ``erf`` (the GELU node's) is NumPy at every size (``erf_f32``: the math
library's float32 polynomials in float64), so a first GELU does not import Numba and
load a kernel (seconds) for a few hundred microseconds saved per call.
"""

from __future__ import annotations

import numpy as np

from .. import config

#: Elements from which a kernel is used (below it NumPy's per-call cost is lower).
THRESHOLD = 4096

def _scipy_erf(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erf(x)


#: erf's float32 polynomials (the math library's, ``codegen.mathlib.coeffs``, whose import
#: loads Numba): ``x * A(x**2)`` for ``|x| < 1`` (error 1.2e-9), ``1 - exp(-x**2) *
#: G(1/|x| - 5/8)`` for ``1 <= |x| < 4`` (error 2.6e-10); erf rounds to 1 in float32 beyond.
_ERF_SMALL_F32 = (1.1283791065216064, -0.3761262595653534, 0.1128358542919159,
                  -0.026853810995817184, 0.00518832728266716, -0.000801019137725234,
                  7.85385345807299e-05)
_ERF_LARGE_F32 = (0.3059529960155487, 0.3822838366031647, -0.17239587008953094,
                  0.04376089200377464, 0.023446107283234596, -0.04715954512357712,
                  0.04117143526673317, -0.0180484838783741)


def _horner(x: np.ndarray, coeffs) -> np.ndarray:
    r = np.multiply(x, coeffs[-1])
    r += coeffs[-2]
    for c in coeffs[-3::-1]:
        r *= x
        r += c
    return r


def erf_f32(x: np.ndarray) -> np.ndarray:
    """``erf`` of a float32 array with NumPy alone (no kernel to load): the math library's
    float32 polynomials evaluated in float64, rounded once to float32 (within an ulp of
    the exact value). The small-argument polynomial runs on every element (its variable
    clamped to 1, so nothing overflows; NaN stays NaN), the other only where
    ``|x| >= 1``. Written in place where it can: fresh arrays of this size cost more
    than the arithmetic."""
    a = np.abs(x, dtype=np.float64)
    z = np.multiply(a, a)
    idx = np.flatnonzero(a >= 1.0)
    if idx.size:
        with np.errstate(all="ignore"):  # exp(-x**2) underflows to 0 for large |x|
            ab = a.reshape(-1)[idx]
            t = 1.0 / ab
            t -= 0.625
            large = _horner(t, _ERF_LARGE_F32)
            large *= np.exp(-z.reshape(-1)[idx])
            large = 1.0 - large
            large[ab >= 4.0] = 1.0
    np.minimum(z, 1.0, out=z)
    res = _horner(z, _ERF_SMALL_F32)
    res *= a
    if idx.size:
        res.reshape(-1)[idx] = large
    out = res.astype(np.float32)  # rounding is symmetric: the sign can follow
    np.copysign(out, x, out=out)
    return out


_NUMPY = {"sin": np.sin, "cos": np.cos, "erf": _scipy_erf}
#: The IR ops ``apply`` may compute with a kernel (``erf`` is called by the fused GELU
#: node, ``eager.fused``, not by the op dispatch).
FUNCTIONS = frozenset(("sin", "cos"))
_DTYPES = frozenset((np.dtype(np.float64), np.dtype(np.float32)))
_kernels: dict | None = None


def _kernel(name: str, dtype: np.dtype):
    global _kernels
    if _kernels is None:
        from . import bigmath_kernels

        _kernels = bigmath_kernels.KERNELS
    return _kernels[(name, dtype)]


def call(name: str, x: np.ndarray) -> np.ndarray:
    """``np.<name>(x)`` for ``name`` in sin/cos/erf, by a kernel when ``x`` is large."""
    if name == "erf" and x.dtype == np.float32:
        return erf_f32(x)
    if x.size < THRESHOLD or x.dtype not in _DTYPES or config.DISABLE_JIT:
        return _NUMPY[name](x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _kernel(name, x.dtype)(flat, out)
    return out.reshape(x.shape)


def apply(name: str, fn, arrays: list):
    """``fn(*arrays)``, the NumPy reference of IR op ``name``, or its kernel when large."""
    if name in FUNCTIONS and type(arrays[0]) is np.ndarray:
        return call(name, arrays[0])
    return fn(*arrays)
