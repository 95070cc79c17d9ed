"""Gradient rules of the complex ops (``real``, ``imag``, ``conj``, ``complex``) and the
complex case of ``abs``, in JAX's convention.

A VJP rule here is the *linear transpose* of the JVP, never the conjugate transpose:
the cotangent of ``mul(a, b)`` w.r.t. ``a`` is ``g * b``. With that convention and a
real seed, ``grad`` of a real-valued ``f`` at complex ``z = x + iy`` is
``df/dx - i df/dy``, what ``jax.grad`` returns; for holomorphic ``f`` and seed 1 it is
``f'(z)`` (docs/complex.md). Every other rule is complex-correct as it stands, since
each is written as a product with the (holomorphic) partial derivative.

The transposes of the real-linear maps: ``real: t -> re(t)`` transposes to
``c -> c + 0i``; ``imag: t -> im(t)`` to ``c -> -ic`` (so ``im(z)`` has gradient ``-i``);
``conj`` to ``conj``; ``complex(a, b) = a + ib`` to ``c -> (re(c), -im(c))``.
"""

from __future__ import annotations

from ...ir import ops
from ...ir.bind import aval
from ...ir.types import dtype_name
from .jvp_rules import JVP_RULES
from .vjp_rules import VJP_RULES


def _zeros_real(x):
    return x * 0


@lambda f: VJP_RULES.__setitem__("real", f)
def real_vjp(g, out, x):
    return (ops.complex(g, _zeros_real(g)),)


@lambda f: VJP_RULES.__setitem__("imag", f)
def imag_vjp(g, out, x):
    return (ops.complex(_zeros_real(g), -g),)


@lambda f: VJP_RULES.__setitem__("conj", f)
def conj_vjp(g, out, x):
    return (ops.conj(g),)


@lambda f: VJP_RULES.__setitem__("complex", f)
def complex_vjp(g, out, re, im):
    return ops.real(g), -ops.imag(g)


@lambda f: JVP_RULES.__setitem__("real", f)
def real_jvp(tangents, out, x):
    return ops.real(tangents[0])


@lambda f: JVP_RULES.__setitem__("imag", f)
def imag_jvp(tangents, out, x):
    return ops.imag(tangents[0])


@lambda f: JVP_RULES.__setitem__("conj", f)
def conj_jvp(tangents, out, x):
    return ops.conj(tangents[0])


@lambda f: JVP_RULES.__setitem__("complex", f)
def complex_jvp(tangents, out, re, im):
    tr, ti = tangents
    tr = _zeros_real(re) if tr is None else tr
    ti = _zeros_real(im) if ti is None else ti
    return ops.complex(tr, ti)


# --- abs of a complex number: |z|' in direction t is re(conj(z) t) / |z| (0 at z = 0) ----

_REAL_ABS_VJP = VJP_RULES["abs"]
_REAL_ABS_JVP = JVP_RULES["abs"]


def _safe(out):
    return ops.select(out == 0, ops.constant(value=1, dtype=dtype_name(aval(out).dtype)), out)


def abs_vjp(g, out, x):
    if not aval(x).is_complex:
        return _REAL_ABS_VJP(g, out, x)
    return (ops.conj(x) * (g / _safe(out)),)


def abs_jvp(tangents, out, x):
    if not aval(x).is_complex:
        return _REAL_ABS_JVP(tangents, out, x)
    return ops.real(ops.conj(x) * tangents[0]) / _safe(out)


VJP_RULES["abs"] = abs_vjp
JVP_RULES["abs"] = abs_jvp
