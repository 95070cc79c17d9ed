"""Accuracy, special values, vectorisation and fix-up of the math library.

Errors are measured in units in the last place on the integer bit patterns
(``ulp_distance``) against a reference rounded to the tested dtype: for float64
NumPy's long double functions (64-bit significand on x86-64; ``math.erf`` for
erf, as NumPy has none), for float32 NumPy's float64 result. Every function
must stay within ``mathlib.ULP_BOUND`` (4 ulp) on ~1e6 points per function and
dtype by default (a dense common range, log-uniform magnitudes of both signs
over the whole float range, and targeted hard cases) and on ~1.6e7 points with
``pytest -m slow``. ``python -m tests.codegen.test_mathlib`` prints the table
of docs/mathlib.md.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from fusegrad.codegen import mathlib as ml
from fusegrad.codegen.mathlib.bench import COMMON_RANGE
from fusegrad.codegen.mathlib.trig import TRIG_LIMIT

DTYPES = (np.float64, np.float32)
LD = np.longdouble
SEED = 20240611


def ulp_distance(a, b) -> np.ndarray:
    """Distance in ulps between same-dtype float arrays ``a`` and ``b``, counted on
    their bit patterns mapped to a monotonic integer line (+0 and -0 coincide).
    Two NaNs are at distance 0; a NaN and a number at distance 2**62."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.dtype in (np.float32, np.float64)
    ity = np.int64 if a.dtype == np.float64 else np.int32
    mag = np.int64(np.iinfo(ity).max)

    def line(v):
        bits = v.view(ity).astype(np.int64)
        return np.where(bits < 0, -(bits & mag), bits)

    dist = np.abs(line(a) - line(b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    dist = np.where(nan_a & nan_b, 0, dist)
    return np.where(nan_a != nan_b, np.int64(1) << 62, dist)


# --- references --------------------------------------------------------------------


def _logistic(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _erf(x):
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(np.float64)


REFERENCES = {
    "exp": np.exp, "expm1": np.expm1, "exp2": np.exp2, "log": np.log, "log1p": np.log1p,
    "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "logistic": _logistic, "softplus": _softplus, "erf": _erf,
    "sqrt": np.sqrt, "cbrt": np.cbrt, "arctan": np.arctan, "arcsin": np.arcsin,
    "arccos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "arcsinh": np.arcsinh,
    "arccosh": np.arccosh, "arctanh": np.arctanh, "pow": np.power, "atan2": np.arctan2,
}  # fmt: skip


def reference(name: str, dtype, *args) -> np.ndarray:
    """The reference result of ``name`` on ``args`` (arrays of ``dtype``), rounded
    to ``dtype``."""
    wide = LD if dtype == np.float64 else np.float64
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCES[name](*(a.astype(wide) for a in args))).astype(dtype)


def evaluate(name: str, dtype, *args):
    """``name`` applied by ``mathlib.make_loop`` (vector loop plus fix-up)."""
    loop = ml.make_loop(name, dtype)
    outs = tuple(np.empty_like(args[0]) for _ in range(ml.lookup(name, dtype).nout))
    loop(*args, *outs)
    return outs if len(outs) > 1 else outs[0]


# --- inputs ------------------------------------------------------------------------


def specials(dtype) -> np.ndarray:
    """±0, ±inf, NaN, the smallest subnormal, the normal limits, the largest finite
    value, and a few ulps around the overflow and underflow thresholds of exp."""
    fi = np.finfo(dtype)
    base = [0.0, np.inf, np.nan, fi.smallest_subnormal, fi.tiny, fi.max, 1.0, 0.5, 2.0]
    base += [np.log(fi.max), np.log(fi.tiny), np.log(fi.smallest_subnormal) - 0.5]
    base += [np.log(fi.smallest_subnormal), 0.5 * np.log(fi.max), 1e-300, 1e300]
    with np.errstate(over="ignore"):
        vals = np.abs(np.array(base, dtype=dtype))
    ity = np.int64 if dtype == np.float64 else np.int32
    positive = vals[np.isfinite(vals) & (vals > 0)].view(ity)
    around = (positive[:, None] + np.arange(-3, 4, dtype=ity)[None, :]).ravel().view(dtype)
    out = np.concatenate([vals, around])
    return np.concatenate([out, -out])


def log_uniform(rng, dtype, n: int, signed: bool = True) -> np.ndarray:
    """Magnitudes log-uniform over the whole finite range (subnormals included)."""
    fi = np.finfo(dtype)
    lo, hi = math.log2(fi.smallest_subnormal), math.log2(fi.max)
    x = np.exp2(rng.uniform(lo, hi, n))
    if signed:
        x = x * rng.choice(np.array([-1.0, 1.0]), n)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def near_pio2_multiples(rng, dtype, n: int) -> np.ndarray:
    """Floats within a few ulps of k*pi/2, k up to the vector path's limit and beyond."""
    kmax = TRIG_LIMIT[dtype] * 2 / np.pi
    k = np.concatenate([rng.integers(1, 64, n // 4), rng.integers(1, int(kmax), n - n // 4)])
    centre = (k.astype(LD) * (LD(np.pi) / 2)).astype(dtype)
    ity = np.int64 if dtype == np.float64 else np.int32
    steps = rng.integers(-2, 3, n).astype(ity)
    return (centre.view(ity) + steps).view(dtype)


def unary_inputs(name: str, dtype, n: int, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo, hi = COMMON_RANGE[name]
    parts = [
        rng.uniform(lo, hi, n // 2).astype(dtype),
        log_uniform(rng, dtype, n // 2),
        specials(dtype),
    ]
    if name in ("sin", "cos", "tan", "sincos"):
        parts.append(near_pio2_multiples(rng, dtype, n // 8))
    if name in ("log1p", "arcsin", "arccos", "arctanh", "arccosh", "erf", "tanh"):
        parts.append(1 + log_uniform(rng, dtype, n // 8).clip(-2, 2))  # near ±1 and 0
    return np.concatenate(parts).astype(dtype)


def pow_inputs(dtype, n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Bases and exponents covering the result range from underflow to overflow."""
    rng = np.random.default_rng(seed)
    fi = np.finfo(dtype)
    emax = math.log2(fi.max)
    q = n // 4
    x1 = log_uniform(rng, dtype, q, signed=False)
    target = rng.uniform(math.log2(fi.smallest_subnormal) - 2, emax + 2, q)
    with np.errstate(all="ignore"):
        y1 = (target / np.log2(x1.astype(np.float64))).astype(dtype)
    x2 = rng.uniform(0, 4, q).astype(dtype)
    y2 = rng.uniform(-30, 30, q).astype(dtype)
    x3 = log_uniform(rng, dtype, q)  # negative bases with integer exponents
    y3 = rng.integers(-40, 41, q).astype(dtype)
    x4 = (1 + log_uniform(rng, dtype, q) * 1e-3).astype(dtype)  # bases near 1
    y4 = log_uniform(rng, dtype, q)
    s = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, np.inf,
                  -np.inf, np.nan, fi.max, fi.smallest_subnormal], dtype=dtype)  # fmt: skip
    xs, ys = np.meshgrid(s, s)
    return (
        np.concatenate([x1, x2, x3, x4, xs.ravel()]),
        np.concatenate([y1, y2, y3, y4, ys.ravel()]),
    )


def atan2_inputs(dtype, n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = n // 2
    y = np.concatenate([rng.uniform(-10, 10, h).astype(dtype), log_uniform(rng, dtype, h)])
    x = np.concatenate([rng.uniform(-10, 10, h).astype(dtype), log_uniform(rng, dtype, h)])
    s = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], dtype=dtype)
    ys, xs = np.meshgrid(s, s)
    return np.concatenate([y, ys.ravel()]), np.concatenate([x, xs.ravel()])


# --- the measurement -----------------------------------------------------------------


def measure(name: str, dtype, n: int, seed: int = SEED):
    """(max ulp error, number of points, worst input, got, want) of ``name``."""
    if name == "pow":
        args = pow_inputs(dtype, n, seed)
    elif name == "atan2":
        args = atan2_inputs(dtype, n, seed)
    else:
        args = (unary_inputs(name, dtype, n, seed),)
    if name == "sincos":
        got = np.concatenate(evaluate(name, dtype, *args))
        want = np.concatenate([reference("sin", dtype, *args), reference("cos", dtype, *args)])
        args = (np.concatenate([args[0], args[0]]),)
    else:
        got, want = evaluate(name, dtype, *args), reference(name, dtype, *args)
    dist = ulp_distance(got, want)
    i = int(np.argmax(dist))
    return int(dist[i]), dist.size, tuple(a[i] for a in args), got[i], want[i]


ALL = ml.UNARY + ml.BINARY


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", ALL)
def test_max_ulp_error(name, dtype):
    err, _, at, got, want = measure(name, dtype, 1_000_000)
    assert err <= ml.ULP_BOUND, f"{name}{at} = {got!r}, want {want!r}: {err} ulp"


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", ALL)
def test_max_ulp_error_sweep(name, dtype):
    for seed in range(4):
        err, _, at, got, want = measure(name, dtype, 4_000_000, seed=seed)
        assert err <= ml.ULP_BOUND, f"{name}{at} = {got!r}, want {want!r}: {err} ulp"


@pytest.mark.slow
def test_max_ulp_error_without_fma():
    """The code paths of CPUs without FMA (Dekker's ``two_prod``, unfused
    polynomial steps), compiled for generic x86-64 in a subprocess."""
    env = dict(os.environ, NUMBA_CPU_NAME="x86-64", NUMBA_CPU_FEATURES="")
    script = (
        "from fusegrad.codegen.mathlib.core import HAS_FMA; assert not HAS_FMA\n"
        "from tests.codegen.test_mathlib import ALL, DTYPES, measure\n"
        "for n in ALL:\n"
        "    for dt in DTYPES:\n"
        "        print(n, dt.__name__, measure(n, dt, 200_000)[0])\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    errors = {tuple(line.split()[:2]): int(line.split()[2]) for line in done.stdout.splitlines()}
    assert len(errors) == 2 * len(ALL)
    assert max(errors.values()) <= ml.ULP_BOUND, errors


# --- special values, exactly -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", [n for n in ml.UNARY if n != "sincos"])
def test_special_values_exact(name, dtype):
    """±0, ±inf and NaN give NumPy's value, including the sign of a zero."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    got, want = evaluate(name, dtype, x), reference(name, dtype, x)
    assert_same(got, want)


def assert_same(got, want):
    """Equal values, NaN where NaN, and the same sign on every zero and infinity."""
    np.testing.assert_array_equal(got, want)
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("name", ml.BINARY)
def test_binary_special_values(name, dtype):
    """Every pair of special operands (±0, ±1, ±inf, NaN, ...): results that are
    0, ±1, ±inf or NaN are exact with NumPy's sign; the rest within the bound."""
    args = pow_inputs(dtype, 0) if name == "pow" else atan2_inputs(dtype, 0)
    got, want = evaluate(name, dtype, *args), reference(name, dtype, *args)
    special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    assert_same(got[special], want[special])
    assert ulp_distance(got, want).max() <= ml.ULP_BOUND


def test_ulp_distance():
    one = np.float64(1.0)
    assert ulp_distance(np.array([one]), np.array([np.nextafter(one, 2)]))[0] == 1
    assert ulp_distance(np.array([0.0]), np.array([-0.0]))[0] == 0
    tiny = np.finfo(np.float32).smallest_subnormal
    assert ulp_distance(np.array([tiny], np.float32), np.array([-tiny], np.float32))[0] == 2
    assert ulp_distance(np.array([np.nan]), np.array([np.nan]))[0] == 0
    assert ulp_distance(np.array([np.nan]), np.array([1.0]))[0] == 1 << 62


# --- rare inputs: the fix-up pass -------------------------------------------------------


@numba.njit(error_model="numpy")
def _sin_without_fixup(x, out):
    for i in range(x.shape[0]):
        out[i] = ml.sin_f64(x[i])


@numba.njit(error_model="numpy")
def _sum_sin_times(x, y):
    """sum(sin(x) * y) as a generated kernel with a reduction does it: the vector
    loop flags rare inputs, and a flagged call reruns with the full functions."""
    acc = 0.0
    bad = False
    for i in range(x.shape[0]):
        bad |= ml.trig_rare_f64(x[i])
        acc += ml.sin_f64(x[i]) * y[i]
    if bad:
        acc = 0.0
        for i in range(x.shape[0]):
            acc += ml.sin_full_f64(x[i]) * y[i]
    return acc


def test_trig_fixup_pass():
    big = np.array([1e22, -3.5e15, TRIG_LIMIT[np.float64] * 1.01, 6381956970095103 * 2.0**797])
    x = np.concatenate([np.linspace(-3, 3, 37), big])
    out = np.empty_like(x)
    _sin_without_fixup(x, out)
    assert ulp_distance(out, np.sin(x)).max() > 1000  # the vector path alone is wrong
    got = evaluate("sin", np.float64, x)
    assert ulp_distance(got, np.sin(x)).max() <= 1
    np.testing.assert_array_equal(got[37:], [math.sin(v) for v in big])  # libm's
    x32 = np.concatenate([x[:37], [1e22, -3.5e15, TRIG_LIMIT[np.float32] * 1.01, 3e38]])
    x32 = x32.astype(np.float32)
    sin32, cos32 = evaluate("sincos", np.float32, x32)
    assert ulp_distance(sin32, reference("sin", np.float32, x32)).max() <= 1
    assert ulp_distance(cos32, reference("cos", np.float32, x32)).max() <= 1
    y = np.cos(x)
    assert _sum_sin_times(x, y) == pytest.approx(float(np.sum(np.sin(x) * y)), rel=1e-14)
    assert _sum_sin_times(x[:37], y[:37]) == pytest.approx(float(np.sum(np.sin(x[:37]) * y[:37])))


# --- what the compiled loops look like ----------------------------------------------------


def _loop_ir(name: str, dtype) -> str:
    mf = ml.lookup(name, dtype)
    x = np.ones(8, dtype)
    evaluate(name, dtype, *([x] * mf.nargs))
    loop = ml.make_loop(name, dtype)
    return loop.inspect_llvm(loop.signatures[0])


@pytest.mark.parametrize("name", ALL)
def test_loops_vectorise_and_float32_stays_float32(name):
    ir64, ir32 = _loop_ir(name, np.float64), _loop_ir(name, np.float32)
    assert re.search(r"<[1-9]\d* x double>", ir64), f"{name} float64 loop did not vectorise"
    assert re.search(r"<[1-9]\d* x float>", ir32), f"{name} float32 loop did not vectorise"
    assert "double" not in ir32, f"{name}: float32 loop computes in double"


def test_lookup_and_table():
    mf = ml.lookup("sin", np.float32)
    assert mf.fast is ml.sin_f32 and mf.full is ml.sin_full_f32 and mf.rare is ml.trig_rare_f32
    assert ml.lookup("exp", np.float64).rare is None
    assert ml.lookup("pow", "float64").nargs == 2
    assert ml.sigmoid_f64 is ml.logistic_f64
    with pytest.raises(KeyError, match="no math-library function 'gamma'"):
        ml.lookup("gamma", np.float64)
    assert ulp_distance(np.array([ml.exp_f64(1.0)]), np.array([np.e]))[0] <= 1


def _table(n: int) -> None:
    print("| function | dtype | max ulp | points | worst input |\n|---|---|---|---|---|")
    for name in ALL:
        for dtype in DTYPES:
            total, worst, at = 0, 0, None
            for seed in range(4):
                err, npts, x, _, _ = measure(name, dtype, n, seed)
                total += npts
                worst, at = (err, x) if err > worst or at is None else (worst, at)
            args = ", ".join(repr(float(v)) for v in at)
            print(f"| {name} | {np.dtype(dtype).name} | {worst} | {total:.2g} | {args} |")


if __name__ == "__main__":
    _table(int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000)
