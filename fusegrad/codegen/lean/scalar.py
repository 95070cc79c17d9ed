"""One element of an op as LLVM instructions: the lean code generator's op table.

``SCALAR_OPS`` maps an op name to a flat function ``(b, op, args) -> value`` that
builds the instructions computing one element (``b`` an ``llvmlite.ir.IRBuilder``,
``args`` the operands' elements, already of the op's operand types). Elementwise
ops of loop kernels and scalar ops between them share it. NumPy's semantics:
``maximum``/``minimum`` propagate NaN, ``sign`` of NaN is NaN, ``round`` halves to
even, comparisons with NaN are false (``ne`` true).

Math functions call the C library (``exp``, ``sinh``, ...) through LLVM's
intrinsics where LLVM has one, so LLVM may constant-fold and vectorise them.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...ir.threefry import PARITY, ROTATIONS
from ...ir.types import TensorType, dtype_name
from . import complex_math, complexes, mathcalls, mathlib_ir, ufuncs  # noqa: F401 (complex_math: its rules)

F64, F32, I1, I8 = ir.DoubleType(), ir.FloatType(), ir.IntType(1), ir.IntType(8)
I32 = ir.IntType(32)
_INT_BITS = {"i64": 64, "i32": 32, "i16": 16, "i8": 8, "u8": 8}
_FLOATS = {"f64": F64, "f32": F32}


def reg_type(t: TensorType | np.dtype) -> ir.Type:
    """The LLVM type of one element in a register (bool: ``i1``)."""
    name = dtype_name(t.dtype if isinstance(t, TensorType) else np.dtype(t))
    if name in _FLOATS:
        return _FLOATS[name]
    if name == "bool":
        return I1
    if name in _INT_BITS:
        return ir.IntType(_INT_BITS[name])
    return complexes.TYPES[name]


def mem_type(t: TensorType | np.dtype) -> ir.Type:
    """The LLVM type of one element in memory (bool: a byte, as NumPy stores it)."""
    r = reg_type(t)
    return I8 if r is I1 else r


def supported_dtype(dtype: np.dtype) -> bool:
    known = _SUPPORTED.get(id(dtype))  # (checked for every operand of every op)
    if known is not None:
        return known[1]
    try:
        reg_type(dtype)
        ok = True
    except KeyError:
        ok = False
    _SUPPORTED[id(dtype)] = (dtype, ok)  # the dtype kept: its id names no other
    return ok


#: id(dtype) -> (dtype, whether elements of it have a register type)
_SUPPORTED: dict[int, tuple] = {}


def load(b: ir.IRBuilder, ptr, t) -> ir.Value:
    v = b.load(ptr)
    return b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if reg_type(t) is I1 else v


def store(b: ir.IRBuilder, value, ptr, t) -> None:
    b.store(b.zext(value, I8) if reg_type(t) is I1 else value, ptr)


def constant(value, t) -> ir.Constant:
    ty = reg_type(t)
    if complexes.is_complex_type(ty):
        return complexes.constant(value, ty)
    if isinstance(ty, ir.IntType):
        return ir.Constant(ty, int(bool(value)) if ty is I1 else int(value))
    return ir.Constant(ty, float(value))


def _is_float(v) -> bool:
    return isinstance(v.type, ir.DoubleType | ir.FloatType)


def _unsigned(op) -> bool:
    return op.operands[0].type.dtype.kind in "ub"


def _intrinsic(b, name, args):
    ty = args[0].type
    suffix = "f64" if isinstance(ty, ir.DoubleType) else "f32"
    fnty = ir.FunctionType(ty, [a.type for a in args])
    mod = b.module
    full = f"llvm.{name}.{suffix}"
    fn = mod.globals.get(full) or ir.Function(mod, fnty, full)
    return b.call(fn, args)


def _libm(b, name, args):
    ty = args[0].type
    full = name if isinstance(ty, ir.DoubleType) else name + "f"
    mod = b.module
    fn = mod.globals.get(full)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ty, [a.type for a in args]), full)
        fn.attributes.add("nounwind")
    return b.call(fn, args)


def add(b, op, a):
    return b.fadd(*a) if _is_float(a[0]) else b.add(*a)


def sub(b, op, a):
    return b.fsub(*a) if _is_float(a[0]) else b.sub(*a)


def mul(b, op, a):
    return b.fmul(*a) if _is_float(a[0]) else b.mul(*a)


def div(b, op, a):
    return b.fdiv(*a)


def neg(b, op, a):
    return b.fneg(a[0]) if _is_float(a[0]) else b.neg(a[0])


def _divmod(b, a):
    """NumPy's float ``divmod`` (``npy_divmod``) of ``a``: the quotient rounded down and
    the remainder with the divisor's sign, before the cases of a zero divisor or result:
    ``(fmod, quotient, remainder)``."""
    x, y = a
    zero = ir.Constant(x.type, 0.0)
    mod = b.frem(x, y)
    # the remainder takes the divisor's sign: one less in the quotient (a NaN remainder
    # counts as nonzero, as in C)
    shift = b.and_(b.fcmp_unordered("!=", mod, zero),
                   b.icmp_unsigned("!=", b.fcmp_ordered("<", y, zero),
                                   b.fcmp_ordered("<", mod, zero)))
    exact = b.fdiv(b.fsub(x, mod), y)
    div = b.select(shift, b.fsub(exact, ir.Constant(x.type, 1.0)), exact)
    fl = _intrinsic(b, "floor", [div])
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ir.Constant(x.type, 0.5)),
                  b.fadd(fl, ir.Constant(x.type, 1.0)), fl)
    quotient = b.select(b.fcmp_unordered("!=", div, zero), fl,
                        _intrinsic(b, "copysign", [zero, b.fdiv(x, y)]))
    rem = b.select(b.fcmp_unordered("!=", mod, zero), b.select(shift, b.fadd(mod, y), mod),
                   _intrinsic(b, "copysign", [zero, y]))
    return mod, quotient, rem


def _int_divmod(b, op, a):
    """NumPy's integer ``divmod``: the quotient rounded down and the remainder with the
    divisor's sign; ``x // 0`` and ``x % 0`` are 0, ``x // -1`` is ``-x`` (wrapping).
    LLVM's division by 0 or of the least value by -1 is undefined, so those divide by 1
    and are replaced."""
    x, y = a
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    if _unsigned(op):
        by_zero = b.icmp_unsigned("==", y, zero)
        safe = b.select(by_zero, one, y)
        return (b.select(by_zero, zero, b.udiv(x, safe)),
                b.select(by_zero, zero, b.urem(x, safe)))
    by_zero = b.icmp_signed("==", y, zero)
    by_minus_one = b.icmp_signed("==", y, ir.Constant(x.type, -1))
    special = b.or_(by_zero, by_minus_one)
    safe = b.select(special, one, y)
    q, r = b.sdiv(x, safe), b.srem(x, safe)
    shift = b.and_(b.icmp_signed("!=", r, zero),
                   b.icmp_unsigned("!=", b.icmp_signed("<", r, zero),
                                   b.icmp_signed("<", y, zero)))
    q = b.select(shift, b.sub(q, one), q)
    r = b.select(shift, b.add(r, y), r)
    q = b.select(by_zero, zero, b.select(by_minus_one, b.neg(x), q))
    return q, b.select(special, zero, r)


def floor_divide(b, op, a):
    """``a // b`` as NumPy: of floats, ``x // 0`` is ``x / 0`` and ``inf // 3`` NaN; of
    integers, ``_int_divmod``."""
    if not _is_float(a[0]):
        return _int_divmod(b, op, a)[0]
    _, quotient, _ = _divmod(b, a)
    return b.select(b.fcmp_ordered("==", a[1], ir.Constant(a[1].type, 0.0)),
                    b.fdiv(*a), quotient)


def remainder(b, op, a):
    """``a % b`` as NumPy: the divisor's sign; of floats ``x % 0`` is NaN, of integers
    0."""
    if not _is_float(a[0]):
        return _int_divmod(b, op, a)[1]
    mod, _, rem = _divmod(b, a)
    return b.select(b.fcmp_ordered("==", a[1], ir.Constant(a[1].type, 0.0)), mod, rem)


def threefry2x32(b, op, a):
    """Word ``word`` of the Threefry-2x32-20 hash (``ir.threefry``) of the operands' low
    32 bits, in 32-bit arithmetic, as an int64 in ``[0, 2**32)``."""
    i32 = ir.IntType(32)

    def c(n):
        return ir.Constant(i32, n)

    k0, k1, c0, c1 = (b.trunc(v, i32) for v in a)
    ks = (k0, k1, b.xor(b.xor(k0, k1), c(PARITY)))
    x0, x1 = b.add(c0, ks[0]), b.add(c1, ks[1])
    for group in range(5):
        for r in ROTATIONS[group % 2]:
            x0 = b.add(x0, x1)
            x1 = b.xor(b.or_(b.shl(x1, c(r)), b.lshr(x1, c(32 - r))), x0)
        x0 = b.add(x0, ks[(group + 1) % 3])
        x1 = b.add(b.add(x1, ks[(group + 2) % 3]), c(group + 1))
    return b.zext(x1 if op.attrs["word"] else x0, ir.IntType(64))


def _fcmp(pred):
    def cmp(b, op, a):
        if _is_float(a[0]):
            return (b.fcmp_unordered if pred == "!=" else b.fcmp_ordered)(pred, *a)
        return (b.icmp_unsigned if _unsigned(op) else b.icmp_signed)(pred, *a)
    return cmp


def maximum(b, op, a):
    x, y = a
    if _is_float(x):  # x if (x >= y or x != x) else y
        keep = b.or_(b.fcmp_ordered(">=", x, y), b.fcmp_unordered("uno", x, x))
        return b.select(keep, x, y)
    cmp = b.icmp_unsigned if _unsigned(op) else b.icmp_signed
    return b.select(cmp(">=", x, y), x, y)


def minimum(b, op, a):
    x, y = a
    if _is_float(x):
        keep = b.or_(b.fcmp_ordered("<=", x, y), b.fcmp_unordered("uno", x, x))
        return b.select(keep, x, y)
    cmp = b.icmp_unsigned if _unsigned(op) else b.icmp_signed
    return b.select(cmp("<=", x, y), x, y)


def clamp(b, op, a):
    return minimum(b, op, [maximum(b, op, a[:2]), a[2]])


def select(b, op, a):
    return b.select(*a)


def logical_and(b, op, a):
    return b.and_(*a)


def logical_or(b, op, a):
    return b.or_(*a)


def logical_xor(b, op, a):
    return b.xor(*a)


def logical_not(b, op, a):
    return b.not_(a[0])


def abs_(b, op, a):
    x = a[0]
    if _is_float(x):
        return _intrinsic(b, "fabs", [x])
    if _unsigned(op):
        return x
    return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


def sign(b, op, a):
    x = a[0]
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    if _is_float(x):
        minus = ir.Constant(x.type, -1.0)
        s = b.select(b.fcmp_ordered(">", x, zero), one,
                     b.select(b.fcmp_ordered("<", x, zero), minus, zero))
        return b.select(b.fcmp_unordered("uno", x, x), x, s)
    if _unsigned(op):
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    minus = ir.Constant(x.type, -1)
    return b.select(b.icmp_signed(">", x, zero), one,
                    b.select(b.icmp_signed("<", x, zero), minus, zero))


def isnan(b, op, a):
    x = a[0]
    return b.fcmp_unordered("uno", x, x) if _is_float(x) else ir.Constant(I1, 0)


def isfinite(b, op, a):
    x = a[0]
    if not _is_float(x):
        return ir.Constant(I1, 1)
    return b.fcmp_ordered("<", _intrinsic(b, "fabs", [x]), ir.Constant(x.type, float("inf")))


def pow_(b, op, a):
    x, y = a
    if isinstance(y, ir.Constant) and y.constant == 2.0:  # x ** 2 -> x * x, as NumPy
        return b.fmul(x, x)
    return _intrinsic(b, "pow", [x, y])


def logistic(b, op, a):
    x = a[0]  # 1 / (1 + exp(-x)) for x >= 0, else e / (1 + e), e = exp(x)
    one, zero = ir.Constant(x.type, 1.0), ir.Constant(x.type, 0.0)
    nonneg = b.fcmp_ordered(">=", x, zero)
    e = _intrinsic(b, "exp", [b.select(nonneg, b.fneg(x), x)])
    return b.select(nonneg, b.fdiv(one, b.fadd(one, e)), b.fdiv(e, b.fadd(one, e)))


def convert(b, op, a):
    x = a[0]
    src, dst = op.operands[0].type.dtype, op.results[0].type.dtype
    to = reg_type(dst)
    if dst == np.bool_:
        if _is_float(x):
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if _is_float(x):
        if isinstance(to, ir.IntType):
            return b.fptoui(x, to) if dst.kind == "u" else b.fptosi(x, to)
        return b.fpext(x, to) if to is F64 and x.type is F32 else (
            b.fptrunc(x, to) if to is F32 and x.type is F64 else x)
    if isinstance(to, ir.IntType):
        if to.width > x.type.width:
            return b.zext(x, to) if src.kind in "ub" else b.sext(x, to)
        return b.trunc(x, to) if to.width < x.type.width else x
    return b.uitofp(x, to) if src.kind in "ub" else b.sitofp(x, to)


def identity(b, op, a):
    return a[0]


def _unary_intrinsic(name):
    def fn(b, op, a):
        return _intrinsic(b, name, a)
    fn.__name__ = name
    return fn


def _unary_libm(name):
    def fn(b, op, a):
        return _libm(b, name, a)
    fn.__name__ = name
    return fn


def atan2(b, op, a):
    return _libm(b, "atan2", a)


#: special functions computed by SciPy's own C functions (``cython_special``, called by
#: address as ``fusegrad_cs_<name>``): op -> C function, in float64, rounded to the type
SPECIAL = {
    "lgamma": "gammaln", "digamma": "__pyx_fuse_1psi", "gamma": "__pyx_fuse_1gamma",
    "erfc": "__pyx_fuse_1erfc", "erfcx": "__pyx_fuse_1erfcx", "erfinv": "__pyx_fuse_0erfinv",
    "erfcinv": "erfcinv", "i0e": "i0e", "i1e": "i1e", "logit": "__pyx_fuse_0logit",
    "betaln": "betaln", "pdtr": "pdtr", "jv": "__pyx_fuse_1jv", "yv": "__pyx_fuse_1yv",
    "iv": "__pyx_fuse_1iv", "ive": "__pyx_fuse_1ive", "gammainc": "gammainc",
    "gammaincc": "gammaincc", "betainc": "__pyx_fuse_0betainc",
    "betaincc": "__pyx_fuse_0betaincc",
}
#: of those, the ones with a constant order ``v`` (the C function's first operand)
_ORDERED = ("jv", "yv", "iv", "ive")


def _special(cname: str):
    def fn(b, op, a):
        ty = a[0].type
        wide = [x if isinstance(ty, ir.DoubleType) else b.fpext(x, F64) for x in a]
        if op.name in _ORDERED:
            wide = [ir.Constant(F64, float(op.attrs["v"])), *wide]
        sym = "fusegrad_cs_" + cname
        mod = b.module
        callee = mod.globals.get(sym)
        if callee is None:
            callee = ir.Function(mod, ir.FunctionType(F64, [F64] * len(wide) + [I32]), sym)
            callee.attributes.add("nounwind")
        out = b.call(callee, [*wide, ir.Constant(I32, 0)])  # Cython's skip_dispatch: 0
        return out if isinstance(ty, ir.DoubleType) else b.fptrunc(out, ty)
    fn.__name__ = cname
    return fn


SCALAR_OPS = {
    "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg, "pow": pow_,
    "maximum": maximum, "minimum": minimum, "clamp": clamp, "select": select,
    "lt": _fcmp("<"), "le": _fcmp("<="), "gt": _fcmp(">"), "ge": _fcmp(">="),
    "eq": _fcmp("=="), "ne": _fcmp("!="),
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "abs": abs_, "sign": sign, "isnan": isnan,
    "isfinite": isfinite, "logistic": logistic, "convert": convert, "atan2": atan2,
    "floor_divide": floor_divide, "remainder": remainder, "threefry2x32": threefry2x32,
    "stop_gradient": identity, "broadcast_to": identity,
    "round": _unary_intrinsic("rint"), "sqrt": _unary_intrinsic("sqrt"),
    "floor": _unary_intrinsic("floor"), "ceil": _unary_intrinsic("ceil"),
    "exp": _unary_intrinsic("exp"), "log": _unary_intrinsic("log"),
    "sin": _unary_intrinsic("sin"), "cos": _unary_intrinsic("cos"),
    **{n: _unary_libm(c) for n, c in (
        ("log1p", "log1p"), ("expm1", "expm1"), ("tan", "tan"), ("arcsin", "asin"),
        ("arccos", "acos"), ("arctan", "atan"), ("sinh", "sinh"), ("cosh", "cosh"),
        ("tanh", "tanh"), ("arcsinh", "asinh"), ("arccosh", "acosh"),
        ("arctanh", "atanh"), ("cbrt", "cbrt"), ("erf", "erf"))},
    **{n: _special(c) for n, c in SPECIAL.items()},
    "polygamma": ufuncs.polygamma(_special(SPECIAL["digamma"])),
    "gammainc_da": ufuncs.numba_call("gammainc_da", "n"),
    "betainc_grad": ufuncs.numba_call("betainc_grad", "wrt"),
}  # fmt: skip

#: ops whose operands and result must be floating point here (integer forms go elsewhere)
FLOAT_ONLY = frozenset(SCALAR_OPS) - {
    "add", "sub", "mul", "neg", "maximum", "minimum", "clamp", "select", "lt", "le", "gt",
    "ge", "eq", "ne", "logical_and", "logical_or", "logical_xor", "logical_not", "abs",
    "sign", "isnan", "isfinite", "convert", "stop_gradient", "broadcast_to", "threefry2x32",
    "floor_divide", "remainder"}


def supports(op) -> bool:
    """Whether ``op`` (elementwise, one result) has an element rule here for its types."""
    if len(op.results) != 1:
        return False
    for v in (*op.operands, *op.results):
        if not supported_dtype(v.type.dtype):
            return False
    if any(v.type.dtype.kind == "c" for v in (*op.operands, *op.results)):
        return complexes.supports(op)
    if op.name not in SCALAR_OPS:
        return False
    if op.name in FLOAT_ONLY:
        floats = [t for t in (*(v.type for v in op.operands), op.results[0].type)
                  if t.dtype != np.bool_]
        return all(t.dtype.kind == "f" for t in floats)
    return True


def library_call(b: ir.IRBuilder, name: str, args: list, variant: str, outline: bool = False):
    """A call of the math library's ``name`` (``variant`` of it), or None if it has none
    for these operands' type. The call names the function by its ``fgm.`` key
    (``mathcalls``): the kernel is later given the library inlined or its shared
    vector forms; never inlined if ``outline``."""
    if name == "sqrt" or not _is_float(args[0]):
        return None  # sqrt: one instruction, the same bits
    dtype = np.float64 if isinstance(args[0].type, ir.DoubleType) else np.float32
    sym = mathcalls.symbol(name, dtype, variant)
    if sym is None:
        return None
    fn = b.module.globals.get(sym)
    if fn is None:
        ret = I1 if variant == "rare" else args[0].type
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), sym)
        fn.attributes.add("nounwind")
        fn.attributes.add("readnone")  # no side effects: the vectoriser may call it per lane
    return b.call(fn, args, attrs=("noinline",) if outline else ())


def emit(b: ir.IRBuilder, op, args: list, variant: str = "full",
         outline: bool = False) -> ir.Value:
    """One element of ``op`` from its operands' elements ``args``; math functions from
    the math library (``variant``: ``full`` is right for every input, ``fast`` may
    miss the rare inputs its ``rare`` variant flags), called, not inlined, if
    ``outline``."""
    if any(complexes.is_complex_type(a.type) for a in args) or (
            op.results and op.results[0].type.dtype.kind == "c"):
        return complexes.OPS[op.name](b, op, args)
    if op.name in mathlib_ir.OPS:
        call = library_call(b, op.name, args, variant if op.name in mathlib_ir.RARE_OPS
                            else "fast", outline)
        if call is not None:
            return call
    return SCALAR_OPS[op.name](b, op, args)
