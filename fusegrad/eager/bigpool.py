"""The pooling ops (``ir.pool_ops``) of large concrete arrays through the compiled kernels.

The NumPy references of the pooling ops loop over window taps with strided
views and masks; the ``codegen.rt_pool`` kernels (the ones compiled code calls)
take one pass over the outputs. For operands of at least ``THRESHOLD`` elements,
at most 3 pooled axes and a float32/float64 dtype, the eager Tensor computes
these ops (forward, and ``max_pool_grad`` / ``sum_pool_transpose`` in their
VJPs) with the kernels, viewed and parameterised as ``codegen.pool_lower``
does; otherwise, and with ``FUSEGRAD_DISABLE_JIT`` (``config.DISABLE_JIT``),
the NumPy references compute. The results are the references' bit for bit,
except ``sum_pool_transpose`` where windows overlap: its additions come in
another order (equal to rounding).
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..codegen.pool_lower import POOL_OPS, pool_apply

#: Elements (of the pooled operand) from which a kernel is used.
THRESHOLD = 2048

_DTYPES = frozenset((np.dtype(np.float64), np.dtype(np.float32)))


def usable(name: str, arrays, attrs) -> bool:
    """Whether ``apply`` computes op ``name`` on ``arrays`` with a kernel."""
    if name not in POOL_OPS or config.DISABLE_JIT or len(attrs["kernel"]) > 3:
        return False
    x = arrays[0]
    if type(x) is not np.ndarray or x.dtype not in _DTYPES or x.size < THRESHOLD:
        return False
    return all(type(a) is np.ndarray and a.dtype == x.dtype for a in arrays[1:])


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
