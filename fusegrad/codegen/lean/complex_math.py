"""Element rules of complex division, modulus, sign, powers and transcendental functions,
each computing NumPy's bits (NumPy 2 on Linux, its loops as measured against them).

- ``div``: NumPy's complex divide loop, Smith's algorithm (scale by the ratio of the
  divisor's smaller part to its larger); a zero divisor divides each part by ``|0|``.
- ``abs``: NumPy's vectorised modulus, ``max * sqrt(1 + (min / max)**2)`` (a fused
  multiply-add where the host has one, as its SIMD loops), an infinite part giving
  ``inf`` and otherwise a NaN part NaN; not the C library's ``hypot``.
- ``exp``, ``log``, ``sqrt``, the trigonometric and hyperbolic functions and their
  inverses: the C library's ``cexp``, ``clog``, ... (what NumPy's build calls), by the
  SysV x86-64 ABI: ``double complex f(double complex)`` is ``{double, double}
  f(double, double)``, ``float complex f(float complex)`` is ``<2 x float> f(<2 x
  float>)``.
- ``expm1`` and ``log1p``: NumPy's own formulas on the real C functions.
- ``pow``: NumPy's ``nc_pow``: ``z ** 0`` is 1, ``0 ** w`` is 0 where ``w`` has a positive
  real part and NaN otherwise, a real integer exponent below 100 in magnitude multiplies
  (binary powers with unfused products, a negative one then ``1 / z**n`` by ``div``),
  anything else the C library's ``cpow``.
- ``sign``: NumPy 2's ``z / |z|`` with ``hypot``, 0 at 0, a unit on an axis for one
  infinite part, NaN for two or a NaN.

Added to ``complexes.OPS`` when this module is imported (from the end of that one).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from . import complexes, symbols
from .complexes import F64, _muladd, _operands, make, parts

#: IR op -> the C library's complex function (``f`` appended for complex64)
LIBC = {
    "exp": "cexp", "log": "clog", "sqrt": "csqrt", "sin": "csin", "cos": "ccos",
    "tan": "ctan", "sinh": "csinh", "cosh": "ccosh", "tanh": "ctanh", "arcsin": "casin",
    "arccos": "cacos", "arctan": "catan", "arcsinh": "casinh", "arccosh": "cacosh",
    "arctanh": "catanh",
}  # fmt: skip
#: every C library function the rules here may call
SYMBOLS = tuple(n + s for n in (*LIBC.values(), "cpow", "hypot") for s in ("", "f"))
symbols.add_libc(SYMBOLS)


def _c(x, value: float) -> ir.Constant:
    return ir.Constant(x.type, value)


def _declare(b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, args), name)
        fn.attributes.add("nounwind")
    return fn


def _real_call(b, name: str, args: list) -> ir.Value:
    """The C library's real ``name`` (``namef`` for float)."""
    wide = args[0].type == F64
    return b.call(_declare(b, name if wide else name + "f", args[0].type,
                           [a.type for a in args]), args)


def _libc_call(b, name: str, zs: list) -> ir.Value:
    """The C library's complex ``name`` of complex registers ``zs``, by the ABI above."""
    re0, _ = parts(b, zs[0])
    if re0.type == F64:
        args = [p for z in zs for p in parts(b, z)]
        out = b.call(_declare(b, name, ir.LiteralStructType([F64, F64]), [F64] * len(args)),
                     args)
        return make(b, b.extract_value(out, 0), b.extract_value(out, 1))
    vec = ir.VectorType(re0.type, 2)
    args = []
    for z in zs:
        re, im = parts(b, z)
        v = b.insert_element(ir.Constant(vec, ir.Undefined), re, ir.Constant(ir.IntType(32), 0))
        args.append(b.insert_element(v, im, ir.Constant(ir.IntType(32), 1)))
    out = b.call(_declare(b, name + "f", vec, [vec] * len(args)), args)
    return make(b, b.extract_element(out, ir.Constant(ir.IntType(32), 0)),
                b.extract_element(out, ir.Constant(ir.IntType(32), 1)))


def _libc(name: str):
    def rule(b, op, a):
        return _libc_call(b, name, a)
    rule.__name__ = name
    return rule


def _fabs(b, x):
    fn = _declare(b, "llvm.fabs." + ("f64" if x.type == F64 else "f32"), x.type, [x.type])
    return b.call(fn, [x])


def _quotient(b, xr, xi, yr, yi):
    """``(xr + i xi) / (yr + i yi)`` as NumPy's complex divide loop."""
    ar, ai = _fabs(b, yr), _fabs(b, yi)
    one = _c(yr, 1.0)
    real_larger = b.fcmp_ordered(">=", ar, ai)
    # |yr| >= |yi|: rat = yi/yr, scl = 1/(yr + yi*rat), ((xr + xi*rat)*scl, (xi - xr*rat)*scl)
    rat = b.fdiv(yi, yr)
    scl = b.fdiv(one, b.fadd(yr, b.fmul(yi, rat)))
    first = (b.fmul(b.fadd(xr, b.fmul(xi, rat)), scl),
             b.fmul(b.fsub(xi, b.fmul(xr, rat)), scl))
    # else: rat = yr/yi, scl = 1/(yi + yr*rat), ((xr*rat + xi)*scl, (xi*rat - xr)*scl)
    rat2 = b.fdiv(yr, yi)
    scl2 = b.fdiv(one, b.fadd(yi, b.fmul(yr, rat2)))
    second = (b.fmul(b.fadd(b.fmul(xr, rat2), xi), scl2),
              b.fmul(b.fsub(b.fmul(xi, rat2), xr), scl2))
    zero = b.and_(b.fcmp_ordered("==", ar, _c(ar, 0.0)), b.fcmp_ordered("==", ai, _c(ai, 0.0)))
    by_zero = (b.fdiv(xr, ar), b.fdiv(xi, ar))
    return tuple(b.select(real_larger, b.select(zero, z, f), s)
                 for z, f, s in zip(by_zero, first, second))


def div(b, op, a):
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return make(b, *_quotient(b, xr, xi, yr, yi))


def abs_(b, op, a):
    re, im = (_fabs(b, p) for p in parts(b, a[0]))
    inf, nan = _c(re, math.inf), _c(re, math.nan)
    re_inf, im_inf = b.fcmp_ordered("==", re, inf), b.fcmp_ordered("==", im, inf)
    im = b.select(re_inf, inf, im)
    re = b.select(im_inf, inf, re)
    re_nan, im_nan = b.fcmp_unordered("uno", re, re), b.fcmp_unordered("uno", im, im)
    im = b.select(re_nan, nan, im)
    re = b.select(im_nan, nan, re)
    larger = b.select(b.fcmp_ordered(">", re, im), re, im)  # (neither is NaN, or both)
    smaller = b.select(b.fcmp_ordered("<", re, im), re, im)
    plain = b.not_(b.or_(b.fcmp_ordered("==", larger, _c(re, 0.0)),
                         b.fcmp_ordered("==", larger, inf)))
    ratio = b.select(plain, b.fdiv(smaller, b.select(plain, larger, _c(re, 1.0))),
                     _c(re, 0.0))
    root = _intrinsic_sqrt(b, _muladd(b, ratio, ratio, _c(re, 1.0)))
    return b.fmul(root, larger)


def _intrinsic_sqrt(b, x):
    fn = _declare(b, "llvm.sqrt." + ("f64" if x.type == F64 else "f32"), x.type, [x.type])
    return b.call(fn, [x])


def sign(b, op, a):
    re, im = parts(b, a[0])
    zero, one, nan = _c(re, 0.0), _c(re, 1.0), _c(re, math.nan)
    r = _real_call(b, "hypot", [re, im])
    inf = _c(re, math.inf)

    def unit(x):
        return b.select(b.fcmp_ordered(">", x, zero), one, _c(x, -1.0))

    re_inf, im_inf = (b.fcmp_ordered("==", _fabs(b, x), inf) for x in (re, im))
    out_re = b.select(re_inf, unit(re), zero)
    out_im = b.select(re_inf, zero, unit(im))
    both = b.and_(re_inf, im_inf)
    out_re, out_im = b.select(both, nan, out_re), b.select(both, nan, out_im)
    finite = b.fcmp_ordered("<", r, inf)  # false for an infinite or NaN modulus
    nonzero = b.fcmp_unordered("!=", r, zero)
    out_re = b.select(finite, b.select(nonzero, b.fdiv(re, r), zero), out_re)
    out_im = b.select(finite, b.select(nonzero, b.fdiv(im, r), zero), out_im)
    is_nan = b.fcmp_unordered("uno", r, r)
    return make(b, b.select(is_nan, nan, out_re), b.select(is_nan, nan, out_im))


def expm1(b, op, a):
    # (expm1(x) cos(y) - 2 sin(y/2)^2) + i exp(x) sin(y)
    x, y = parts(b, a[0])
    h = _real_call(b, "sin", [b.fdiv(y, _c(y, 2.0))])
    re = b.fsub(b.fmul(_real_call(b, "expm1", [x]), _real_call(b, "cos", [y])),
                b.fmul(b.fmul(_c(h, 2.0), h), h))
    return make(b, re, b.fmul(_real_call(b, "exp", [x]), _real_call(b, "sin", [y])))


def log1p(b, op, a):
    # log(hypot(x + 1, y)) + i atan2(y, x + 1)
    x, y = parts(b, a[0])
    x1 = b.fadd(x, _c(x, 1.0))
    return make(b, _real_call(b, "log", [_real_call(b, "hypot", [x1, y])]),
                _real_call(b, "atan2", [y, x1]))


def _plain_mul(b, x, y):
    """``x * y`` of ``(re, im)`` pairs without fused multiply-adds (NumPy's ``cmul``)."""
    (xr, xi), (yr, yi) = x, y
    return (b.fsub(b.fmul(xr, yr), b.fmul(xi, yi)), b.fadd(b.fmul(xr, yi), b.fmul(xi, yr)))


def _select(b, cond, x, y):
    """``x if cond else y`` of ``(re, im)`` pairs; ``cond`` an i1 register or a bool known
    when the kernel is built."""
    if isinstance(cond, bool):
        return x if cond else y
    return tuple(b.select(cond, p, q) for p, q in zip(x, y))


def _is(b, n, k: int):
    """``n == k`` of an i64 register or a Python int ``n``."""
    return n == k if isinstance(n, int) else b.icmp_signed("==", n, ir.Constant(n.type, k))


def _integer_power(b, z, n):
    """``z ** n`` for an integer ``|n| < 100`` (an i64 register, or an int known when the
    kernel is built) as NumPy's ``nc_pow``: ``z``, ``z * z`` and ``z * (z * z)`` for 1, 2
    and 3; else the product ``aa`` of the squares ``p`` of ``z`` whose bit is set in
    ``|n|``, in that order, then ``1 / aa`` by the complex divide if ``n < 0``."""
    re = z[0]
    negative = n < 0 if isinstance(n, int) else b.icmp_signed("<", n, ir.Constant(n.type, 0))
    m = abs(n) if isinstance(n, int) else b.select(negative, b.neg(n), n)
    aa, p = (_c(re, 1.0), _c(re, 0.0)), z
    for bit in range(7):
        has = (bool(m & (1 << bit)) if isinstance(m, int) else
               b.icmp_unsigned("!=", b.and_(m, ir.Constant(m.type, 1 << bit)),
                               ir.Constant(m.type, 0)))
        if has is not False:
            aa = _select(b, has, _plain_mul(b, aa, p), aa)
        if bit < 6 and not (isinstance(m, int) and m < 2 << bit):
            p = _plain_mul(b, p, p)
    if negative is not False:
        aa = _select(b, negative, _quotient(b, _c(re, 1.0), _c(re, 0.0), *aa), aa)
    square = _plain_mul(b, z, z)
    out = _select(b, _is(b, n, 3), _plain_mul(b, z, square), aa)
    out = _select(b, _is(b, n, 2), square, out)
    return _select(b, _is(b, n, 1), z, out)


def _constant_parts(y) -> tuple[float, float] | None:
    """The parts of a complex constant register, rounded to its part type; else None."""
    if not isinstance(y, ir.Constant) or not isinstance(y.constant, list | tuple):
        return None
    rnd = float if y.type.elements[0] == F64 else np.float32
    return tuple(float(rnd(c.constant)) for c in y.constant)


def pow_(b, op, a):
    """NumPy's ``nc_pow`` (the module's docstring); with a constant exponent, only its
    branch is built."""
    x, y = _operands(b, op, a)
    (xr, xi), (yr, yi) = parts(b, x), parts(b, y)
    z, zero, nan = (xr, xi), _c(xr, 0.0), _c(xr, math.nan)
    known = _constant_parts(y)
    if known is not None:
        cr, ci = known
        if cr == 0 and ci == 0:
            return make(b, _c(xr, 1.0), zero)
        integer = ci == 0 and abs(cr) < 100 and cr == int(cr)
        out = (_integer_power(b, z, int(cr)) if integer
               else parts(b, _libc_call(b, "cpow", [x, y])))
        at_zero = (zero, zero) if cr > 0 else (nan, nan)
    else:
        i64 = ir.IntType(64)
        # an integer exponent below 100 in magnitude (fptosi of larger ones is not used)
        small = b.fcmp_ordered("<", _fabs(b, yr), _c(yr, 100.0))
        n = b.fptosi(b.select(small, yr, zero), i64)
        integer = b.and_(b.and_(small, b.fcmp_ordered("==", b.sitofp(n, yr.type), yr)),
                         b.fcmp_ordered("==", yi, zero))
        powers = _integer_power(b, z, n)
        start = b.block
        with b.if_then(b.not_(integer)):  # cpow only where it is needed
            general, block = parts(b, _libc_call(b, "cpow", [x, y])), b.block
        out = []
        for g, p in zip(general, powers):
            phi = b.phi(g.type)
            phi.add_incoming(g, block)
            phi.add_incoming(p, start)
            out.append(phi)
        at_zero = _select(b, b.fcmp_ordered(">", yr, zero), (zero, zero), (nan, nan))
    base_zero = b.and_(b.fcmp_ordered("==", xr, zero), b.fcmp_ordered("==", xi, zero))
    out = _select(b, base_zero, at_zero, out)
    if known is not None:
        return make(b, *out)
    exp_zero = b.and_(b.fcmp_ordered("==", yr, zero), b.fcmp_ordered("==", yi, zero))
    return make(b, *_select(b, exp_zero, (_c(xr, 1.0), zero), out))


def eq(b, op, a):
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return b.and_(b.fcmp_ordered("==", xr, yr), b.fcmp_ordered("==", xi, yi))


def ne(b, op, a):
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return b.or_(b.fcmp_unordered("!=", xr, yr), b.fcmp_unordered("!=", xi, yi))


def isnan(b, op, a):
    re, im = parts(b, a[0])
    return b.fcmp_unordered("uno", re, im)


def isfinite(b, op, a):
    re, im = parts(b, a[0])
    inf = _c(re, math.inf)
    return b.and_(b.fcmp_ordered("<", _fabs(b, re), inf), b.fcmp_ordered("<", _fabs(b, im), inf))


OPS = {
    "div": div, "abs": abs_, "sign": sign, "expm1": expm1, "log1p": log1p, "pow": pow_,
    "eq": eq, "ne": ne, "isnan": isnan, "isfinite": isfinite,
    **{name: _libc(c) for name, c in LIBC.items()},
}  # fmt: skip

complexes.OPS.update(OPS)
