"""More dense linear-algebra ops (kind ``"linalg"``): the general eigendecomposition, the
principal matrix square root and the Sylvester equation, registered into ``opdef.OPS``
by ``optable``. The conventions of ``linalg_ops`` hold: stacks of matrices
``(..., M, N)``, operands of one dtype with the same batch axes, integers promoted to
float64.

- ``eig(a)``: ``(w, v)`` with ``a @ v = v * w`` for a general square ``a`` (float or
  complex). Both results are complex always (``f32 -> c64``, ``f64 -> c128``): a
  traced program needs its dtypes before the values are known, so unlike
  ``np.linalg.eig`` a real matrix with a real spectrum still gives complex arrays (as in
  JAX). The values are LAPACK's (``geev``, through ``np.linalg.eig``): eigenvalues
  unordered, eigenvectors of unit 2-norm, each with its largest component real.
- ``sqrtm(a)``: the principal square root ``x`` (``x @ x = a``, eigenvalues in the open
  right half plane), as ``scipy.linalg.sqrtm``. The result has ``a``'s dtype: a real
  matrix whose principal root is not real (a negative real eigenvalue), where SciPy
  returns a complex array, gives NaN in every entry of that matrix (pass a complex
  matrix to get the complex root).
- ``sylvester(a, b, c)``: ``x`` with ``a @ x + x @ b = c``, ``a`` ``(..., M, M)``, ``b``
  ``(..., N, N)``, ``c`` ``(..., M, N)`` (Bartels-Stewart: ``scipy.linalg.solve_sylvester``).
"""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .linalg_ops import _each, _float_dtype, _matrix
from .opdef import _def
from .types import TensorType

EIG_OPS = ("eig", "sqrtm", "sylvester")

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128),
               np.dtype(np.complex64): np.dtype(np.complex64),
               np.dtype(np.complex128): np.dtype(np.complex128)}


def eig_rule(types, **_):
    (a,) = types
    dt = _COMPLEX_OF[_float_dtype("eig", types, complex_ok=True)]
    _matrix("eig", a, square=True)
    return TensorType(a.shape[:-1], dt), TensorType(a.shape, dt)


def sqrtm_rule(types, **_):
    (a,) = types
    dt = _float_dtype("sqrtm", types, complex_ok=True)
    _matrix("sqrtm", a, square=True)
    return (TensorType(a.shape, dt),)


def sylvester_rule(types, **_):
    a, b, c = types
    dt = _float_dtype("sylvester", types, complex_ok=True)
    _matrix("sylvester", a, square=True)
    _matrix("sylvester", b, "b", square=True)
    _matrix("sylvester", c, "c")
    if (a.shape[:-2] != b.shape[:-2] or c.shape[:-2] != a.shape[:-2]
            or c.shape[-2:] != (a.shape[-1], b.shape[-1])):
        raise ShapeError(f"sylvester: c must have shape (..., M, N) with the batch of a "
                         f"(..., M, M) and b (..., N, N), got a: {a}, b: {b} and c: {c}")
    return (TensorType(c.shape, dt),)


# --- NumPy reference implementations ----------------------------------------------


def eig_impl(a):
    dt = _COMPLEX_OF[a.dtype]
    w, v = np.linalg.eig(a)
    return w.astype(dt), v.astype(dt)


def _sqrtm_one(m):
    from scipy.linalg import sqrtm

    x = sqrtm(m)
    if np.iscomplexobj(x) and not np.iscomplexobj(m):  # the principal root is not real
        return np.full(m.shape, np.nan, m.dtype)
    return x.astype(m.dtype)


def sqrtm_impl(a):
    with np.errstate(all="ignore"):
        out = _each(_sqrtm_one, a, batch_ndim=a.ndim - 2)
    return np.zeros(a.shape, a.dtype) if out is None else out


def sylvester_impl(a, b, c):
    from scipy.linalg import solve_sylvester

    out = _each(lambda p, q, r: solve_sylvester(p, q, r).astype(c.dtype), a, b, c,
                batch_ndim=a.ndim - 2)
    return np.zeros(c.shape, c.dtype) if out is None else out


_def("eig", 1, eig_rule, eig_impl, "linalg", promote="float",
     doc="eig(a) -> (w, v): eigenvalues and unit right eigenvectors (complex) of a "
         "general square matrix, a @ v = v * w")
_def("sqrtm", 1, sqrtm_rule, sqrtm_impl, "linalg", promote="float",
     doc="sqrtm(a): the principal square root, of a's dtype (NaN for a real matrix "
         "whose principal root is complex)")
_def("sylvester", 3, sylvester_rule, sylvester_impl, "linalg", promote="float",
     doc="sylvester(a, b, c): x with a @ x + x @ b = c")
