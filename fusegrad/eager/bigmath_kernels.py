"""The compiled loops of ``bigmath``: ``kernel(x, out)`` over 1-d contiguous arrays.

Each loop is the math library's pattern (``mathlib.make_loop``): a vectorised
pass that also flags the rare inputs the vector path gets wrong (finite
``|x|`` beyond ``mathlib.trig.TRIG_LIMIT``), then a scalar fix-up pass over
those only when one was seen. Defined at module level so Numba caches them
on disk: only the first process compiles.
"""

from __future__ import annotations

import numba
import numpy as np

from ..codegen import mathlib as ml

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


@_jit
def sin_f64(x, out):
    bad = False
    for i in range(x.shape[0]):
        bad |= ml.trig_rare_f64(x[i])
        out[i] = ml.sin_f64(x[i])
    if bad:
        for i in range(x.shape[0]):
            if ml.trig_rare_f64(x[i]):
                out[i] = ml.sin_full_f64(x[i])


@_jit
def cos_f64(x, out):
    bad = False
    for i in range(x.shape[0]):
        bad |= ml.trig_rare_f64(x[i])
        out[i] = ml.cos_f64(x[i])
    if bad:
        for i in range(x.shape[0]):
            if ml.trig_rare_f64(x[i]):
                out[i] = ml.cos_full_f64(x[i])


@_jit
def sin_f32(x, out):
    bad = False
    for i in range(x.shape[0]):
        bad |= ml.trig_rare_f32(x[i])
        out[i] = ml.sin_f32(x[i])
    if bad:
        for i in range(x.shape[0]):
            if ml.trig_rare_f32(x[i]):
                out[i] = ml.sin_full_f32(x[i])


@_jit
def cos_f32(x, out):
    bad = False
    for i in range(x.shape[0]):
        bad |= ml.trig_rare_f32(x[i])
        out[i] = ml.cos_f32(x[i])
    if bad:
        for i in range(x.shape[0]):
            if ml.trig_rare_f32(x[i]):
                out[i] = ml.cos_full_f32(x[i])


@_jit
def erf_f64(x, out):
    for i in range(x.shape[0]):
        out[i] = ml.erf_f64(x[i])


@_jit
def erf_f32(x, out):
    for i in range(x.shape[0]):
        out[i] = ml.erf_f32(x[i])


KERNELS = {
    ("sin", np.dtype(np.float64)): sin_f64,
    ("cos", np.dtype(np.float64)): cos_f64,
    ("sin", np.dtype(np.float32)): sin_f32,
    ("cos", np.dtype(np.float32)): cos_f32,
    ("erf", np.dtype(np.float64)): erf_f64,
    ("erf", np.dtype(np.float32)): erf_f32,
}
