"""The pooling ops (``ir.pool_ops``) of concrete arrays through the compiled kernels.

The NumPy references of the pooling ops loop over window taps with strided
views and masks (some 15-110 us per call even on tiny arrays); the
``codegen.rt_pool`` kernels (the ones compiled code calls) take one pass over
the outputs with a few microseconds per call. For float32/float64 operands with
at most 3 pooled axes (and integer ones for ``max_pool`` and
``max_pool_argmax``) the eager Tensor computes these ops (forward, and the
pooling ops of their VJPs) with the kernels, viewed and parameterised as
``codegen.pool_lower`` does; with ``FUSEGRAD_DISABLE_JIT``
(``config.DISABLE_JIT``), and otherwise, the NumPy references compute.

Measured (one thread, float32, kernels 2 and 3, strides 1 and 2, 64 to 524288
elements): ``max_pool_grad``, ``max_pool_take`` and ``max_pool_argmax`` are
1.2-19x faster by the kernel at every size; ``max_pool``, ``sum_pool`` and
``sum_pool_transpose`` 1.5-8x faster up to about 8192 input elements, but from
16384 on NumPy's whole-array passes per tap are as fast or faster (``sum_pool``
with disjoint 2x2 windows: 2.4x faster by NumPy at 524288), so those three use
the kernel only up to ``LIMIT`` elements.

The results are the references' bit for bit, except ``sum_pool_transpose``
where windows overlap: its additions come in another order (equal to rounding).
"""

from __future__ import annotations

import math

import numpy as np

from .. import config
from ..ir.pool_ops import POOL_OPS

#: Input-side elements up to which ``max_pool``, ``sum_pool`` and
#: ``sum_pool_transpose`` use a kernel (above it the NumPy references are as fast).
LIMIT = 8192
_LIMITED = frozenset(("max_pool", "sum_pool", "sum_pool_transpose"))
_DTYPES = frozenset((np.dtype(np.float64), np.dtype(np.float32)))
#: The ops whose references (and kernels) also take integer operands.
_INTEGER_OPS = frozenset(("max_pool", "max_pool_argmax"))


def _elements(name: str, x: np.ndarray, attrs) -> int:
    if name == "sum_pool_transpose":
        nd = len(attrs["kernel"])
        return math.prod(x.shape[:x.ndim - nd]) * math.prod(attrs["size"])
    return x.size


def usable(name: str, arrays, attrs) -> bool:
    """Whether ``apply`` computes op ``name`` on ``arrays`` with a kernel."""
    if name not in POOL_OPS or config.DISABLE_JIT or len(attrs["kernel"]) > 3:
        return False
    x = arrays[0]
    if type(x) is not np.ndarray or (x.dtype not in _DTYPES and not (
            name in _INTEGER_OPS and x.dtype.kind in "iu")):
        return False
    if name in _LIMITED and _elements(name, x, attrs) > LIMIT:
        return False
    return all(type(a) is np.ndarray and a.dtype == x.dtype for a in arrays[1:])


def pool_apply(name: str, arrays, attrs):
    """Op ``name`` on ``arrays`` by its kernel (``codegen.pool_lower.pool_apply``)."""
    from ..codegen.pool_lower import pool_apply as kernel  # loads Numba: not at import

    return kernel(name, arrays, attrs)


def apply(name: str, fn, arrays, attrs):
    """``fn(*arrays, **attrs)`` (op ``name``'s NumPy reference), or its kernel."""
    if usable(name, arrays, attrs):
        return pool_apply(name, arrays, attrs)
    return fn(*arrays, **attrs)


def impl(opdef):
    """``opdef``'s NumPy reference, or for a pooling op one routed through ``apply``."""
    if opdef.name not in POOL_OPS:
        return opdef.impl
    ref, name = opdef.impl, opdef.name
    return lambda *arrays, **attrs: apply(name, ref, arrays, attrs)


_GEO = ("kernel", "strides", "dilation", "pad_lo", "pad_hi")


def _call(name, arrays, kwargs):
    from ..ir.opdef import OPS

    return apply(name, OPS[name].impl, arrays, kwargs)


def _geo(kwargs):
    return {k: tuple(kwargs[k]) for k in _GEO}


def _max_pool(g, out, args, mask, types, kwargs):
    return (_call("max_pool_grad", (args[0], g), _geo(kwargs)),)


def _max_pool_grad(g, out, args, mask, types, kwargs):
    return None, _call("max_pool_take", (args[0], g), _geo(kwargs))


def _max_pool_take(g, out, args, mask, types, kwargs):
    return None, _call("max_pool_grad", (args[0], g), _geo(kwargs))


def _sum_pool(g, out, args, mask, types, kwargs):
    shape = types[0][0]
    size = tuple(shape[len(shape) - len(kwargs["kernel"]):])
    return (_call("sum_pool_transpose", (g,), dict(_geo(kwargs), size=size)),)


def _sum_pool_transpose(g, out, args, mask, types, kwargs):
    return (_call("sum_pool", (g,), _geo(kwargs)),)


#: NumPy transcriptions of the pooling ops' VJP rules (``passes.autodiff.pool_rules``),
#: for ``numpy_vjps.NUMPY_VJPS``.
POOL_VJPS = {
    "max_pool": _max_pool,
    "max_pool_grad": _max_pool_grad,
    "max_pool_take": _max_pool_take,
    "sum_pool": _sum_pool,
    "sum_pool_transpose": _sum_pool_transpose,
}
