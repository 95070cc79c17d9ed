"""fusegrad's math library: elementwise functions that LLVM vectorises.

Numba lowers ``math.sin`` and friends to scalar libm calls, which keep a loop
from vectorising (llvmlite has no SVML). These are the same functions written
in plain floating-point arithmetic, selects and a few bit-level intrinsics
(``mathlib_core``), so that a loop calling them becomes SIMD code: 3-9 ns per
float64 element (1-5 float32) where libm takes 7-45 ns. See docs/mathlib.md for the method,
accuracy and speed of each function.

API for the code generator
--------------------------
Every function exists per dtype as a module attribute ``<name>_f64`` /
``<name>_f32`` (float64 in, float64 out; float32 in, float32 out, computed in
float32), and in ``FUNCTIONS[(name, np.dtype)]`` as a ``MathFunction`` keyed by
the IR op name. Call them from ``@numba.njit(error_model="numpy")`` code:

    from fusegrad.codegen import mathlib as ml
    ...
        out[i] = ml.exp_f64(x[i]) * ml.sin_f64(x[i])

Unary: exp expm1 exp2 log log1p log2 log10 sin cos tan sincos (returns
``(sin, cos)``) tanh logistic (= sigmoid) softplus erf sqrt cbrt arctan arcsin
arccos sinh cosh arcsinh arccosh arctanh. Binary: ``pow(x, y)``, ``atan2(y, x)``.

Rare inputs and the fix-up pass
-------------------------------
Only the trig functions (sin, cos, tan, sincos) have inputs that the vector path
gets wrong: finite ``|x|`` beyond ``mathlib_trig.TRIG_LIMIT`` (1.26e7 for
float64, 6144 for float32). For those ``MathFunction.rare`` is a predicate
(``trig_rare_f64``) and ``MathFunction.full`` a variant that is right for every
input (it calls libm for rare ones, so it does not vectorise). A kernel that
uses a function with a ``rare`` predicate ORs the predicate over its inputs in
the vector loop (an any-of reduction, which vectorises) and, only when it is
set, runs a scalar fix-up pass::

    bad = False
    for i in range(n):                      # vectorised
        bad |= ml.trig_rare_f64(x[i])
        out[i] = ml.sin_f64(x[i]) * y[i]
    if bad:                                 # rare: a scalar pass
        for i in range(n):
            if ml.trig_rare_f64(x[i]):
                out[i] = ml.sin_full_f64(x[i]) * y[i]

A kernel with a reduction cannot patch single elements: when the flag is set
it reruns the whole kernel with the ``full`` functions. ``make_loop`` builds
this pattern for one function; the tests use it. All other functions handle
every input (NaN, inf, ±0, subnormals, overflow, underflow) with selects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from fusegrad.codegen import (
    mathlib_exp,
    mathlib_inv,
    mathlib_log,
    mathlib_pow,
    mathlib_special,
    mathlib_trig,
)
from fusegrad.codegen.mathlib_core import mathfn, sqrt

#: Unary and binary functions, by IR op name (``sincos`` returns a pair).
UNARY = (
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10",
    "sin", "cos", "tan", "sincos", "tanh", "logistic", "softplus", "erf",
    "sqrt", "cbrt", "arctan", "arcsin", "arccos",
    "sinh", "cosh", "arcsinh", "arccosh", "arctanh",
)  # fmt: skip
BINARY = ("pow", "atan2")
#: Functions whose vector path has rare inputs, and their predicate's name.
RARE = {"sin": "trig_rare", "cos": "trig_rare", "tan": "trig_rare", "sincos": "trig_rare"}
#: The error bound the tests assert, in units in the last place, for every function.
ULP_BOUND = 4


@mathfn
def _sqrt(x):
    # llvm.sqrt: the sqrt instruction (vsqrtpd/vsqrtps), vectorised.
    return sqrt(x)


def _build(ft) -> dict:
    fns = mathlib_exp.build(ft)
    fns["logistic"] = fns.pop("sigmoid")
    fns |= mathlib_log.build(ft, fns)
    fns |= mathlib_trig.build(ft)
    fns |= mathlib_inv.build(ft)
    fns["atan2"] = fns.pop("arctan2")
    fns |= mathlib_special.build(ft, fns)
    fns |= mathlib_pow.build(ft, fns)
    fns["sqrt"] = _sqrt
    return fns


_F64 = _build(np.float64)
_F32 = _build(np.float32)


@dataclass(frozen=True)
class MathFunction:
    """One math-library function for one dtype.

    ``fast`` is the vectorisable function; ``rare`` (or None) flags inputs that
    ``fast`` gets wrong; ``full`` is right for every input (``fast`` itself when
    ``rare`` is None). ``nargs`` is 1 or 2; ``nout`` is 2 for ``sincos``.
    """

    name: str
    dtype: np.dtype
    fast: numba.core.registry.CPUDispatcher
    full: numba.core.registry.CPUDispatcher
    rare: numba.core.registry.CPUDispatcher | None
    nargs: int
    nout: int


def _entry(name: str, fns: dict, dtype) -> MathFunction:
    rare = fns[RARE[name]] if name in RARE else None
    full = fns[name + "_full"] if name in RARE else fns[name]
    return MathFunction(
        name=name,
        dtype=np.dtype(dtype),
        fast=fns[name],
        full=full,
        rare=rare,
        nargs=2 if name in BINARY else 1,
        nout=2 if name == "sincos" else 1,
    )


#: (IR op name, dtype) -> MathFunction
FUNCTIONS: dict[tuple[str, np.dtype], MathFunction] = {
    (name, np.dtype(dt)): _entry(name, fns, dt)
    for dt, fns in ((np.float64, _F64), (np.float32, _F32))
    for name in UNARY + BINARY
}


def lookup(name: str, dtype) -> MathFunction:
    """The math-library function for IR op ``name`` at ``dtype``; a KeyError that
    lists what exists otherwise."""
    key = (name, np.dtype(dtype))
    if key not in FUNCTIONS:
        known = sorted({n for n, _ in FUNCTIONS})
        raise KeyError(f"no math-library function {name!r} for {key[1]}; have {known}")
    return FUNCTIONS[key]


exp_f64, exp_f32 = _F64["exp"], _F32["exp"]
expm1_f64, expm1_f32 = _F64["expm1"], _F32["expm1"]
exp2_f64, exp2_f32 = _F64["exp2"], _F32["exp2"]
log_f64, log_f32 = _F64["log"], _F32["log"]
log1p_f64, log1p_f32 = _F64["log1p"], _F32["log1p"]
log2_f64, log2_f32 = _F64["log2"], _F32["log2"]
log10_f64, log10_f32 = _F64["log10"], _F32["log10"]
sin_f64, sin_f32 = _F64["sin"], _F32["sin"]
cos_f64, cos_f32 = _F64["cos"], _F32["cos"]
tan_f64, tan_f32 = _F64["tan"], _F32["tan"]
sincos_f64, sincos_f32 = _F64["sincos"], _F32["sincos"]
trig_rare_f64, trig_rare_f32 = _F64["trig_rare"], _F32["trig_rare"]
sin_full_f64, sin_full_f32 = _F64["sin_full"], _F32["sin_full"]
cos_full_f64, cos_full_f32 = _F64["cos_full"], _F32["cos_full"]
tan_full_f64, tan_full_f32 = _F64["tan_full"], _F32["tan_full"]
sincos_full_f64, sincos_full_f32 = _F64["sincos_full"], _F32["sincos_full"]
tanh_f64, tanh_f32 = _F64["tanh"], _F32["tanh"]
logistic_f64, logistic_f32 = _F64["logistic"], _F32["logistic"]
sigmoid_f64, sigmoid_f32 = logistic_f64, logistic_f32
softplus_f64, softplus_f32 = _F64["softplus"], _F32["softplus"]
erf_f64, erf_f32 = _F64["erf"], _F32["erf"]
sqrt_f64 = sqrt_f32 = _sqrt
cbrt_f64, cbrt_f32 = _F64["cbrt"], _F32["cbrt"]
arctan_f64, arctan_f32 = _F64["arctan"], _F32["arctan"]
arcsin_f64, arcsin_f32 = _F64["arcsin"], _F32["arcsin"]
arccos_f64, arccos_f32 = _F64["arccos"], _F32["arccos"]
sinh_f64, sinh_f32 = _F64["sinh"], _F32["sinh"]
cosh_f64, cosh_f32 = _F64["cosh"], _F32["cosh"]
arcsinh_f64, arcsinh_f32 = _F64["arcsinh"], _F32["arcsinh"]
arccosh_f64, arccosh_f32 = _F64["arccosh"], _F32["arccosh"]
arctanh_f64, arctanh_f32 = _F64["arctanh"], _F32["arctanh"]
pow_f64, pow_f32 = _F64["pow"], _F32["pow"]
atan2_f64, atan2_f32 = _F64["atan2"], _F32["atan2"]


_LOOPS: dict[tuple[str, np.dtype], numba.core.registry.CPUDispatcher] = {}


def make_loop(name: str, dtype):
    """A compiled loop ``loop(x, out)`` (binary: ``loop(x, y, out)``; ``sincos``:
    ``loop(x, out_sin, out_cos)``) applying function ``name`` elementwise over
    1-d arrays of ``dtype``, with the fix-up pass when the function has rare
    inputs. Cached per (name, dtype). It is what the tests and the benchmark
    measure, and the reference pattern for generated kernels."""
    key = (name, np.dtype(dtype))
    if key not in _LOOPS:
        _LOOPS[key] = _make_loop(lookup(name, dtype))
    return _LOOPS[key]


def _make_loop(mf: MathFunction):
    fast, full, rare = mf.fast, mf.full, mf.rare
    jit = numba.njit(error_model="numpy")
    if mf.nargs == 2:

        @jit
        def loop2(x, y, out):
            for i in range(x.shape[0]):
                out[i] = fast(x[i], y[i])

        return loop2
    if mf.nout == 2:

        @jit
        def loop_pair(x, out_a, out_b):
            bad = False
            for i in range(x.shape[0]):
                bad |= rare(x[i])
                out_a[i], out_b[i] = fast(x[i])
            if bad:
                for i in range(x.shape[0]):
                    if rare(x[i]):
                        out_a[i], out_b[i] = full(x[i])

        return loop_pair
    if rare is None:

        @jit
        def loop(x, out):
            for i in range(x.shape[0]):
                out[i] = fast(x[i])

        return loop

    @jit
    def loop_fixup(x, out):
        bad = False
        for i in range(x.shape[0]):
            bad |= rare(x[i])
            out[i] = fast(x[i])
        if bad:
            for i in range(x.shape[0]):
                if rare(x[i]):
                    out[i] = full(x[i])

    return loop_fixup


if __name__ == "__main__":
    from fusegrad.codegen.mathlib_bench import main

    main()
