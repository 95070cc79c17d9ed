"""Lowering templates: one Python/Numba expression per elementwise op, keyed by op name.

``{0}``, ``{1}``, ... are the operands' scalar names, ``{attr}`` an op attribute.
Ops not listed here are lowered as whole-array statements by ``codegen.driver`` (``ARRAY_OPS``), or
never reach code generation (``NOT_LOWERED``, with the reason).
"""

from __future__ import annotations

_UNARY_NP = ("exp", "log", "log1p", "expm1", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
             "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "sqrt", "cbrt",
             "floor", "ceil", "isnan", "isfinite")

#: scipy.special ops (fusegrad.ir.special_ops), calling SciPy's C functions (codegen.special_rt)
_SPECIAL_UNARY = ("lgamma", "digamma", "gamma", "erfc", "erfcx", "erfinv", "erfcinv", "i0e", "i1e",
                  "logit")

SCALAR: dict[str, str] = {
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "neg": "-{0}",
    "pow": "{0} ** {1}",
    "maximum": "rt.maximum({0}, {1})",
    "minimum": "rt.minimum({0}, {1})",
    "clamp": "rt.clamp({0}, {1}, {2})",
    "floor_divide": "rt.floor_divide({0}, {1})",
    "remainder": "rt.remainder({0}, {1})",
    "atan2": "np.arctan2({0}, {1})",
    "lt": "{0} < {1}",
    "le": "{0} <= {1}",
    "gt": "{0} > {1}",
    "ge": "{0} >= {1}",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "logical_and": "{0} & {1}",
    "logical_or": "{0} | {1}",
    "logical_xor": "{0} != {1}",
    "logical_not": "not {0}",
    "select": "{1} if {0} else {2}",
    "abs": "abs({0})",
    "sign": "rt.sign({0})",
    "round": "np.rint({0})",
    "erf": "rt.erf({0})",
    "logistic": "rt.logistic({0})",
    **{n: f"rt.{n}({{0}})" for n in _SPECIAL_UNARY},
    "polygamma": "rt.polygamma({0}, {n})",
    **{n: f"rt.{n}({{0}}, {{v}})" for n in ("jv", "yv", "iv", "ive")},
    "betaln": "rt.betaln({0}, {1})",
    "pdtr": "rt.pdtr({0}, {1})",
    "gammainc": "rt.gammainc({0}, {1})",
    "gammaincc": "rt.gammaincc({0}, {1})",
    "gammainc_da": "rt.gammainc_da({0}, {1}, {n})",
    "betainc": "rt.betainc({0}, {1}, {2})",
    "betaincc": "rt.betaincc({0}, {1}, {2})",
    "betainc_grad": "rt.betainc_grad({0}, {1}, {2}, {wrt})",
    "threefry2x32": "rt.threefry2x32({0}, {1}, {2}, {3}, {word})",
    "stop_gradient": "{0}",
    "broadcast_to": "{0}",
    "real": "{0}.real",
    "imag": "{0}.imag",
    "conj": "{0}.conjugate()",
    "complex": "complex({0}, {1})",
    **{n: f"np.{n}({{0}})" for n in _UNARY_NP},
}

#: ops lowered as whole-array statements (see codegen.driver)
ARRAY_OPS = frozenset({
    "reshape", "transpose", "slice", "update_slice", "concatenate", "take", "index_add",
    "index_set", "matmul", "cumsum", "argmax", "argmin", "iota", "fused", "constant",
    "convert", "reduce_sum", "reduce_max", "reduce_min", "count",
    "argsort",
    "conv",  # codegen.rt_conv
    "max_pool", "max_pool_grad", "max_pool_take", "max_pool_argmax", "sum_pool",  # rt_pool
    "sum_pool_transpose",  # codegen.rt_pool
    "fft",  # codegen.fft_lower
    "cond", "while_loop", "scan", "while_grad", "while_grad_vjp",  # codegen.control
    "cholesky", "triangular_solve", "solve", "slogdet", "eigh", "svd", "qr",  # linalg_lower
    "eig", "sqrtm", "sylvester",  # linalg_lower, calling out to NumPy/SciPy
})  # fmt: skip

#: ops that never reach the code generator, and why
NOT_LOWERED = {
    "custom_vjp_call": "inlined by passes.fusion.prepare (its forward region)",
    "checkpoint": "inlined by passes.fusion.prepare (only its VJP differs from its body)",
}
