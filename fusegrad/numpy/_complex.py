"""Complex-number functions of ``fusegrad.numpy``: real, imag, conj, angle, and tests.

``real``/``imag``/``conj`` of a real array behave as NumPy's (the array, zeros, the
array); ``complex(re, im)`` builds ``re + 1j * im`` from two real arrays.
"""

from __future__ import annotations

import numpy as np

from ..ir import array as A
from ..ir import complex_ops as C
from ..ir import ops
from ..ir.array import implements as _implements
from ..ir.bind import aval as _aval
from ..ir.types import is_complex as _is_complex

complex64, complex128 = np.complex64, np.complex128


@_implements(np.real)
def real(val):
    return C.real(A.asarray(val) if A.is_weak(val) else val)


@_implements(np.imag)
def imag(val):
    return C.imag(A.asarray(val) if A.is_weak(val) else val)


@_implements(np.conj, np.conjugate)
def conj(x):
    return C.conj(A.asarray(x) if A.is_weak(x) else x)


conjugate = conj


@_implements(np.angle)
def angle(z, deg=False):
    return C.angle(A.asarray(z) if A.is_weak(z) else z, deg)


def complex(re, im):
    """``re + 1j * im`` from real arrays (f32 -> complex64, otherwise complex128)."""
    return C.make_complex(re, im)


@_implements(np.iscomplexobj)
def iscomplexobj(x):
    return _is_complex(_aval(x).dtype)


@_implements(np.isrealobj)
def isrealobj(x):
    return not iscomplexobj(x)


@_implements(np.iscomplex)
def iscomplex(x):
    return imag(x) != 0


@_implements(np.isreal)
def isreal(x):
    return imag(x) == 0


@_implements(np.real_if_close)
def real_if_close(a, tol=100):
    """The real part of a complex ``a`` whose imaginary parts are all within ``tol``
    machine epsilons of 0 (``tol`` itself if it is at most 1), else ``a``, as NumPy.
    The choice reads the values: on a traced ``a`` it is a Python ``if``, decided where
    the transform knows its arguments' values (fg.grad called on arrays) and an error
    under fg.jit."""
    a = A.asarray(a)
    dt = _aval(a).dtype
    if not _is_complex(dt):
        return a
    if tol > 1:
        tol = tol * np.finfo(dt).eps
    if A.max(ops.abs(C.imag(a))) < tol:
        return C.real(a)
    return a
