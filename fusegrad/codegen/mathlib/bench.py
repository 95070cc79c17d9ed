"""Benchmark of the math library against Numba's libm-based loops.

``taskset -c 0 python -m fusegrad.codegen.mathlib [--n 1000000] [--repeat 9]
[--dtype f64|f32|both] [names...]`` prints, per function and dtype, the median
ns per element of a loop over ``n`` inputs drawn from the function's common
range, for ``mathlib.make_loop`` and for the same loop calling ``math.*``
(scalar libm), timed alternately. The process pins itself to one CPU when it
can.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numba
import numpy as np

from fusegrad.codegen import mathlib as ml

#: the inputs' common range per function (the tests sample it densely too)
COMMON_RANGE = {
    "exp": (-30, 30), "expm1": (-3, 3), "exp2": (-40, 40), "log": (0, 10),
    "log1p": (-1, 3), "log2": (0, 10), "log10": (0, 10), "sin": (-20, 20),
    "cos": (-20, 20), "tan": (-20, 20), "sincos": (-20, 20), "tanh": (-6, 6),
    "logistic": (-20, 20), "softplus": (-20, 20), "erf": (-5, 5), "sqrt": (0, 100),
    "cbrt": (-100, 100), "arctan": (-5, 5), "arcsin": (-1, 1), "arccos": (-1, 1),
    "sinh": (-10, 10), "cosh": (-10, 10), "arcsinh": (-10, 10), "arccosh": (1, 10),
    "arctanh": (-1, 1), "pow": (0, 10), "atan2": (-10, 10),
}  # fmt: skip

#: the libm-based scalar expression each function is compared with
_LIBM = {
    "exp": lambda x: math.exp(x),
    "expm1": lambda x: math.expm1(x),
    "exp2": lambda x: np.exp2(x),
    "log": lambda x: math.log(x),
    "log1p": lambda x: math.log1p(x),
    "log2": lambda x: math.log2(x),
    "log10": lambda x: math.log10(x),
    "sin": lambda x: math.sin(x),
    "cos": lambda x: math.cos(x),
    "tan": lambda x: math.tan(x),
    "sincos": lambda x: (math.sin(x), math.cos(x)),
    "tanh": lambda x: math.tanh(x),
    "logistic": lambda x: 1 / (1 + math.exp(-x)),
    "softplus": lambda x: max(x, 0) + math.log1p(math.exp(-abs(x))),
    "erf": lambda x: math.erf(x),
    "sqrt": lambda x: math.sqrt(x),
    "cbrt": lambda x: np.cbrt(x),
    "arctan": lambda x: math.atan(x),
    "arcsin": lambda x: math.asin(x),
    "arccos": lambda x: math.acos(x),
    "sinh": lambda x: math.sinh(x),
    "cosh": lambda x: math.cosh(x),
    "arcsinh": lambda x: math.asinh(x),
    "arccosh": lambda x: math.acosh(x),
    "arctanh": lambda x: math.atanh(x),
    "pow": lambda x, y: x**y,
    "atan2": lambda y, x: math.atan2(y, x),
}


def libm_loop(name: str):
    """A loop with the signature of ``mathlib.make_loop(name, ...)`` calling libm."""
    fn = numba.njit(_LIBM[name])
    jit = numba.njit(error_model="numpy")
    if name in ("pow", "atan2"):

        @jit
        def loop2(x, y, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i], y[i])

        return loop2
    if name == "sincos":

        @jit
        def loop_pair(x, out_a, out_b):
            for i in range(x.shape[0]):
                out_a[i], out_b[i] = fn(x[i])

        return loop_pair

    @jit
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = fn(x[i])

    return loop


def _inputs(name: str, dtype, n: int, rng) -> tuple:
    lo, hi = COMMON_RANGE[name]
    x = rng.uniform(lo, hi, n).astype(dtype)
    if name == "pow":
        return x, rng.uniform(-20, 20, n).astype(dtype)
    if name == "atan2":
        return x, rng.uniform(lo, hi, n).astype(dtype)
    return (x,)


def _time(loop, args, outs) -> float:
    t = time.perf_counter()
    loop(*args, *outs)
    return time.perf_counter() - t


def bench(name: str, dtype, n: int = 1_000_000, repeat: int = 9) -> tuple[float, float]:
    """(ours, libm) median ns per element of ``name`` at ``dtype``."""
    args = _inputs(name, dtype, n, np.random.default_rng(0))
    outs = tuple(np.empty(n, dtype) for _ in range(ml.lookup(name, dtype).nout))
    ours, ref = ml.make_loop(name, dtype), libm_loop(name)
    ours(*args, *outs)
    ref(*args, *outs)
    t_ours, t_ref = [], []
    for _ in range(repeat):
        t_ours.append(_time(ours, args, outs))
        t_ref.append(_time(ref, args, outs))
    return float(np.median(t_ours)) * 1e9 / n, float(np.median(t_ref)) * 1e9 / n


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m fusegrad.codegen.mathlib", description=__doc__)
    p.add_argument("names", nargs="*", help="functions (default: all)")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--dtype", choices=("f64", "f32", "both"), default="both")
    a = p.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    dtypes = {"f64": (np.float64,), "f32": (np.float32,), "both": (np.float64, np.float32)}
    print("| function | dtype | mathlib ns/elem | libm ns/elem | speed-up |")
    print("|---|---|---|---|---|")
    for name in a.names or (ml.UNARY + ml.BINARY):
        for dtype in dtypes[a.dtype]:
            ours, ref = bench(name, dtype, a.n, a.repeat)
            dt = np.dtype(dtype).name
            print(f"| {name} | {dt} | {ours:.2f} | {ref:.2f} | {ref / ours:.1f}x |", flush=True)
