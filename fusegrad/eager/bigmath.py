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
"""

from __future__ import annotations

import numpy as np

from .. import config

#: Elements from which a kernel is used (below it NumPy's per-call cost is lower).
THRESHOLD = 4096

def _scipy_erf(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erf(x)


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
