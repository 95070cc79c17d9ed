"""Complex elements: ``complex64`` and ``complex128`` in registers and their element rules.

A complex element is an LLVM literal struct ``{float, float}`` / ``{double, double}``
(real part first), the layout NumPy stores it in, so loads, stores, arena places and
copies treat it as any other element type and LLVM's scalar replacement splits it
into its two parts. ``OPS`` maps an op name to its element rule for operands or
results of a complex dtype, with ``scalar.SCALAR_OPS``'s signature
``(b, op, args) -> value``; an op with a complex operand or result and no rule here is
not lowered (``scalar.supports``), so it runs with NumPy between native segments.
Division, modulus, powers and transcendental functions are in ``complex_math``, which
adds its rules to ``OPS`` (``scalar`` imports it).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import engine

F64, F32 = ir.DoubleType(), ir.FloatType()
C128, C64 = ir.LiteralStructType([F64, F64]), ir.LiteralStructType([F32, F32])
#: IR dtype name -> register type
TYPES = {"c128": C128, "c64": C64}


def is_complex_type(ty: ir.Type) -> bool:
    return isinstance(ty, ir.LiteralStructType) and ty in (C128, C64)


def part_type(ty: ir.Type) -> ir.Type:
    """The real type of a complex register type's parts."""
    return ty.elements[0]


def constant(value, ty: ir.Type) -> ir.Constant:
    z = complex(value)
    part = part_type(ty)
    return ir.Constant(ty, [ir.Constant(part, z.real), ir.Constant(part, z.imag)])


def parts(b: ir.IRBuilder, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    return b.extract_value(z, 0), b.extract_value(z, 1)


def make(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
    ty = C128 if re.type == F64 else C64
    return b.insert_value(b.insert_value(ir.Constant(ty, ir.Undefined), re, 0), im, 1)


def _widen(b: ir.IRBuilder, x: ir.Value, part: ir.Type) -> ir.Value:
    """A real float register as the float type ``part``."""
    if x.type == part:
        return x
    return b.fpext(x, part) if part == F64 else b.fptrunc(x, part)


def promote(b: ir.IRBuilder, x: ir.Value, ty: ir.Type) -> ir.Value:
    """``x`` (complex or real float) as the complex register type ``ty``."""
    part = part_type(ty)
    if is_complex_type(x.type):
        if x.type == ty:
            return x
        re, im = parts(b, x)
        return make(b, _widen(b, re, part), _widen(b, im, part))
    return make(b, _widen(b, x, part), ir.Constant(part, 0.0))


def _operands(b, op, args):
    """The complex operands of a binary op, both of the result's complex type."""
    ty = args[0].type if is_complex_type(args[0].type) else args[1].type
    return [promote(b, a, ty) for a in args]


def real(b, op, a):
    return b.extract_value(a[0], 0)


def imag(b, op, a):
    return b.extract_value(a[0], 1)


def conj(b, op, a):
    re, im = parts(b, a[0])
    return make(b, re, b.fneg(im))


def complex_(b, op, a):
    return make(b, a[0], a[1])


def add(b, op, a):
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return make(b, b.fadd(xr, yr), b.fadd(xi, yi))


def sub(b, op, a):
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return make(b, b.fsub(xr, yr), b.fsub(xi, yi))


def _muladd(b, x, y, z):
    """``x * y + z``, fused where the host fuses multiply-adds, as NumPy's loops do."""
    if engine.host_has_fma():
        name = "llvm.fma.f64" if x.type == F64 else "llvm.fma.f32"
        fma = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(x.type, [x.type] * 3), name)
        return b.call(fma, [x, y, z])
    return b.fadd(b.fmul(x, y), z)


def mul(b, op, a):
    # (a + bi)(c + di) = (ac - bd) + (ad + bc)i as NumPy's SIMD loops compute it:
    # a*c + -(b*d) and a*d + (b*c), each a fused multiply-add on a host with them
    (xr, xi), (yr, yi) = (parts(b, v) for v in _operands(b, op, a))
    return make(b, _muladd(b, xr, yr, b.fneg(b.fmul(xi, yi))),
                _muladd(b, xr, yi, b.fmul(xi, yr)))


def accumulate(b: ir.IRBuilder, acc: ir.Value, x: ir.Value) -> ir.Value:
    """``acc + x`` of a sum, each part reassociable as a float sum's (``kernel``)."""
    (ar, ai), (xr, xi) = parts(b, acc), parts(b, x)
    return make(b, b.fadd(ar, xr, flags=("reassoc",)), b.fadd(ai, xi, flags=("reassoc",)))


def neg(b, op, a):
    re, im = parts(b, a[0])
    return make(b, b.fneg(re), b.fneg(im))


def convert(b, op, a):
    """To or from a complex dtype as the interpreter's ``convert``: complex to any other
    dtype casts the real part (to an integer truncated, to bool "nonzero", NaN true); a
    real value becomes the real part."""
    x, src, dst = a[0], op.operands[0].type.dtype, op.results[0].type.dtype
    if dst.kind == "c":
        ty = C128 if dst == np.complex128 else C64
        if src.kind in "iub":
            part = part_type(ty)
            x = b.uitofp(x, part) if src.kind in "ub" else b.sitofp(x, part)
        return promote(b, x, ty)
    re = b.extract_value(x, 0)
    if dst.kind == "f":
        return _widen(b, re, F64 if dst == np.float64 else F32)
    if dst == np.bool_:
        return b.fcmp_unordered("!=", re, ir.Constant(re.type, 0.0))
    to = ir.IntType(8 * dst.itemsize)
    return b.fptoui(re, to) if dst.kind == "u" else b.fptosi(re, to)


def identity(b, op, a):
    return a[0]


def select(b, op, a):
    return b.select(a[0], a[1], a[2])


OPS = {
    "real": real, "imag": imag, "conj": conj, "complex": complex_,
    "add": add, "sub": sub, "mul": mul, "neg": neg, "convert": convert,
    "select": select, "stop_gradient": identity, "broadcast_to": identity,
}  # fmt: skip




def supports(op) -> bool:
    """Whether ``op``, with a complex operand or result, has an element rule here."""
    rule = OPS.get(op.name)
    if rule is None:
        return False
    if op.name == "convert":
        return all(v.type.dtype != np.float16 for v in (*op.operands, *op.results))
    return True
