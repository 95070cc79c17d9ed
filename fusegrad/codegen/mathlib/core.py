"""Building blocks of the math library: the jit decorator and bit-level LLVM intrinsics.

Every intrinsic here is generic over float32/float64 and works at the width of
its float argument (int32 bits for float32, int64 for float64), so a float32
loop never widens to double or to 64-bit integers. Each emits a handful of
plain LLVM instructions that the loop vectoriser turns into SIMD code; none
calls libm.

``fma`` is ``llvm.fmuladd``: fused where the CPU has FMA, a multiply and an add
elsewhere; the polynomials are accurate either way. ``two_prod`` must be exact,
so it uses ``llvm.fma`` where the target CPU has FMA and Dekker's splitting
where it does not (both give the same, exact, result).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.core.codegen import get_host_cpu_features
from numba.core.extending import intrinsic

from ..inline import inline_njit

__all__ = [
    "HAS_FMA",
    "bit_set",
    "copysign",
    "exp2i",
    "fma",
    "mathfn",
    "poly",
    "rint",
    "split_exponent",
    "sqrt",
    "two_prod",
]


def _target_has_fma() -> bool:
    """Whether Numba compiles for a CPU with fused multiply-add (it targets the host
    unless ``NUMBA_CPU_NAME`` says otherwise)."""
    if config.CPU_NAME:
        features = config.CPU_FEATURES or ""
        return "+fma" in features.split(",")
    return "+fma" in get_host_cpu_features().split(",")


HAS_FMA: bool = _target_has_fma()

#: The decorator of every math-library function. ``error_model="numpy"``: no
#: zero-division checks (which would put a branch in the loop). No fastmath flag:
#: the code relies on IEEE rounding (the round-to-integer shifter, exact Cody-Waite
#: products, compensated sums) and on NaN/inf propagating. Every function is inlined
#: into its callers by LLVM (``codegen.inline``: LLVM's own heuristics would leave
#: composites such as softplus, arcsinh and pow as calls, and a loop with a call does
#: not vectorise), and compiled once per machine into Numba's disk cache.
mathfn = inline_njit


def _float_width(ty) -> int:
    if ty == types.float64:
        return 64
    if ty == types.float32:
        return 32
    return 0


def _fconst(lty, value: float):
    return ir.Constant(lty, float(np.float32(value)) if lty == ir.FloatType() else value)


def _call_intrinsic(builder, name: str, args):
    """Call the overloaded LLVM intrinsic ``name`` on same-typed float ``args``."""
    lty = args[0].type
    fnty = ir.FunctionType(lty, [lty] * len(args))
    suffix = "f64" if lty == ir.DoubleType() else "f32"
    fn = cgutils.get_or_insert_function(builder.module, fnty, f"{name}.{suffix}")
    return builder.call(fn, list(args))


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c``, fused where the CPU has FMA (``llvm.fmuladd``)."""
    if not (_float_width(a) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.fmuladd", args)

    return a(a, b, c), codegen


@intrinsic
def rint(typingctx, x):
    """``x`` rounded to the nearest integer, ties to even (``llvm.rint``)."""
    if not _float_width(x):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.rint", args)

    return x(x), codegen


@intrinsic
def sqrt(typingctx, x):
    """The correctly rounded square root (``llvm.sqrt``: one instruction, NaN for
    negative ``x``, no errno, so LLVM vectorises it everywhere)."""
    if not _float_width(x):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.sqrt", args)

    return x(x), codegen


@intrinsic
def copysign(typingctx, x, s):
    """``|x|`` with the sign of ``s`` (``llvm.copysign``)."""
    if not (_float_width(x) and x == s):
        return None

    def codegen(context, builder, sig, args):
        return _call_intrinsic(builder, "llvm.copysign", args)

    return x(x, s), codegen


@intrinsic
def poly(typingctx, x, coeffs):
    """``coeffs[0] + x * (coeffs[1] + x * (...))`` by Horner's rule with ``fma``.

    ``coeffs`` is a tuple of constants of ``x``'s type (a closure variable), lowest
    order first; LLVM folds the tuple into immediate constants.
    """
    if not (_float_width(x) and isinstance(coeffs, types.UniTuple) and coeffs.dtype == x):
        return None

    def codegen(context, builder, sig, args):
        r, cs = args
        n = sig.args[1].count
        acc = builder.extract_value(cs, n - 1)
        for i in range(n - 2, -1, -1):
            acc = _call_intrinsic(builder, "llvm.fmuladd", [acc, r, builder.extract_value(cs, i)])
        return acc

    return x(x, coeffs), codegen


def _dekker_two_prod(builder, a, b):
    """The exact error ``a*b - fl(a*b)`` by Veltkamp/Dekker splitting. Operands
    above ``2**(emax - 28)`` (2**(emax - 13) for float32), whose split would
    overflow, are scaled down by ``2**-28`` (``2**-13``) first and the error
    scaled back, exactly."""
    lty = a.type
    f64 = lty == ir.DoubleType()
    split = _fconst(lty, 134217729.0 if f64 else 4097.0)
    big = _fconst(lty, 2.0**995 if f64 else 2.0**114)
    down, one = _fconst(lty, 2.0**-28 if f64 else 2.0**-13), _fconst(lty, 1.0)

    def scaled(v):
        large = builder.fcmp_unordered(">", _call_intrinsic(builder, "llvm.fabs", [v]), big)
        factor = builder.select(large, down, one)
        return builder.fmul(v, factor), factor

    def halves(v):
        c = builder.fmul(v, split)
        hi = builder.fsub(c, builder.fsub(c, v))
        return hi, builder.fsub(v, hi)

    (a, fa), (b, fb) = scaled(a), scaled(b)
    p = builder.fmul(a, b)
    ah, al = halves(a)
    bh, bl = halves(b)
    e = builder.fsub(builder.fmul(ah, bh), p)
    e = builder.fadd(e, builder.fmul(ah, bl))
    e = builder.fadd(e, builder.fmul(al, bh))
    e = builder.fadd(e, builder.fmul(al, bl))
    return builder.fdiv(e, builder.fmul(fa, fb))


@intrinsic
def two_prod(typingctx, a, b):
    """``(p, e)`` with ``p = fl(a*b)`` and ``p + e == a*b`` exactly (barring overflow
    and underflow): one FMA where the CPU has it, Dekker's product elsewhere."""
    if not (_float_width(a) and a == b):
        return None
    ret = types.UniTuple(a, 2)

    def codegen(context, builder, sig, args):
        x, y = args
        p = builder.fmul(x, y)
        if HAS_FMA:
            e = _call_intrinsic(builder, "llvm.fma", [x, y, builder.fneg(p)])
        else:
            e = _dekker_two_prod(builder, x, y)
        return context.make_tuple(builder, ret, [p, e])

    return ret(a, b), codegen


def _layout(width: int):
    """(int type, mantissa bits, exponent bias, shifter) for a float width."""
    if width == 64:
        return ir.IntType(64), 52, 1023, 6755399441055744.0  # 1.5 * 2**52
    return ir.IntType(32), 23, 127, 12582912.0  # 1.5 * 2**23


@intrinsic
def exp2i(typingctx, k):
    """``2**k`` for an integer-valued float ``k`` in the normal range
    ``[1 - bias, bias]``; built from bits (no ``fptosi``, so a NaN ``k`` gives a
    finite power of two, never poison). Outside that range the result is a
    wrong power of two: callers clamp or split ``k``."""
    width = _float_width(k)
    if not width:
        return None

    def codegen(context, builder, sig, args):
        ity, mbits, bias, shifter = _layout(width)
        t = builder.fadd(args[0], _fconst(args[0].type, shifter))
        i = builder.add(builder.bitcast(t, ity), ir.Constant(ity, bias))
        i = builder.and_(i, ir.Constant(ity, 2 * bias + 1))
        return builder.bitcast(builder.shl(i, ir.Constant(ity, mbits)), args[0].type)

    return k(k), codegen


@intrinsic
def split_exponent(typingctx, x):
    """``(m, e)`` with ``x == m * 2**e``, ``m`` in ``[sqrt(1/2), sqrt(2))`` and
    ``e`` an integer-valued float, for positive normal ``x`` (other inputs give
    finite garbage that callers replace with a select)."""
    width = _float_width(x)
    if not width:
        return None
    ret = types.UniTuple(x, 2)

    def codegen(context, builder, sig, args):
        ity, mbits, _, _ = _layout(width)
        sqrt_half = np.float64(np.sqrt(0.5)) if width == 64 else np.float32(np.sqrt(0.5))
        offset = int(sqrt_half.view(np.int64 if width == 64 else np.int32))
        i = builder.bitcast(args[0], ity)
        e = builder.ashr(builder.sub(i, ir.Constant(ity, offset)), ir.Constant(ity, mbits))
        m = builder.sub(i, builder.shl(e, ir.Constant(ity, mbits)))
        m = builder.bitcast(m, args[0].type)
        return context.make_tuple(builder, ret, [m, builder.sitofp(e, args[0].type)])

    return ret(x), codegen


@intrinsic
def bit_set(typingctx, t, n):
    """Whether bit ``n`` (a literal int) of the bits of float ``t`` is set: reads
    the integer that the round-to-integer shifter left in ``t``'s low bits."""
    width = _float_width(t)
    if not (width and isinstance(n, types.IntegerLiteral)):
        return None
    bit = n.literal_value

    def codegen(context, builder, sig, args):
        ity = ir.IntType(width)
        i = builder.and_(builder.bitcast(args[0], ity), ir.Constant(ity, 1 << bit))
        return builder.icmp_unsigned("!=", i, ir.Constant(ity, 0))

    return types.boolean(t, n), codegen
