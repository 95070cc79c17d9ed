"""Derivation of the math library's polynomial coefficients (an offline tool).

Each polynomial is a discrete minimax fit of ``g`` over ``[a, b]`` with weight
``w`` (the weight turns the polynomial's absolute error into the relative error
of the final function), computed by Lawson's iteratively reweighted least
squares in 40-digit arithmetic on Chebyshev-distributed points; the result is
rounded to the target dtype. ``python -m fusegrad.codegen.mathlib.remez``
rewrites ``coeffs.py`` (takes a few minutes, needs mpmath);
``--scan NAME`` prints the weighted error for a range of term counts.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

#: name -> (lowest power, {dtype: number of terms}); ``_specs()`` gives each
#: name's (g, weight, a, b), built from mpmath on first use.
_TERMS = {
    "EXP": (0, {"f64": 10, "f32": 5}),
    "EXP2": (0, {"f64": 11, "f32": 6}),
    "LOG": (1, {"f64": 7, "f32": 3}),
    "SIN": (0, {"f64": 6, "f32": 3}),
    "COS": (0, {"f64": 6, "f32": 3}),
    "ERF_SMALL": (0, {"f64": 12, "f32": 7}),
    "ERF_LARGE_F64": (0, {"f64": 18}),
    "ERF_LARGE_F32": (0, {"f32": 8}),
    "ATAN": (0, {"f64": 20, "f32": 9}),
    "ASIN": (0, {"f64": 12, "f32": 6}),
    "CBRT": (0, {"f64": 6, "f32": 6}),
    "LOG_DD": (0, {"f64": 8, "f32": 3}),
}


def _specs():
    import mpmath as mp

    mp.mp.dps = 40
    sqrt, half_ln2 = mp.sqrt, mp.log(2) / 2 * mp.mpf("1.001")
    s_max = (3 - 2 * sqrt(2)) * mp.mpf("1.001")

    def erfcx(x):
        return mp.erfc(x) * mp.exp(x * x)

    def nz(f, limit):
        return lambda t: f(t) if t != 0 else mp.mpf(limit)

    return {
        # exp(r) = 1 + r + r**2 * P(r), also expm1(r) = r + r**2 * P(r)
        "EXP": (
            nz(lambda r: (mp.exp(r) - 1 - r) / r**2, 0.5),
            nz(lambda r: r**2 / mp.expm1(r), 0),
            -half_ln2,
            half_ln2,
        ),
        # 2**r = 1 + r * Q(r)
        "EXP2": (
            nz(lambda r: (mp.power(2, r) - 1) / r, mp.log(2)),
            nz(lambda r: r / mp.power(2, r), 0),
            -0.5005,
            0.5005,
        ),
        # log(1 + f) = 2 atanh(s) = 2 s + s * R(s**2), s = f / (2 + f)
        "LOG": (
            nz(lambda z: 2 * mp.atanh(sqrt(z)) / sqrt(z) - 2, 0),
            lambda z: mp.mpf(1),
            0,
            s_max**2,
        ),
        # sin(r) = r + r**3 * S(r**2)
        "SIN": (
            nz(lambda z: (mp.sin(sqrt(z)) - sqrt(z)) / z**1.5, -mp.mpf(1) / 6),
            nz(lambda z: z * sqrt(z) / mp.sin(sqrt(z)), 0),
            0,
            (mp.pi / 4 * mp.mpf("1.001")) ** 2,
        ),
        # cos(r) = 1 - r**2 / 2 + r**4 * C(r**2)
        "COS": (
            nz(lambda z: (mp.cos(sqrt(z)) - 1 + z / 2) / z**2, mp.mpf(1) / 24),
            lambda z: z**2 / mp.cos(sqrt(z)),
            0,
            (mp.pi / 4 * mp.mpf("1.001")) ** 2,
        ),
        # erf(x) = x * A(x**2) for |x| <= 1
        "ERF_SMALL": (
            nz(lambda z: mp.erf(sqrt(z)) / sqrt(z), 2 / sqrt(mp.pi)),
            nz(lambda z: sqrt(z) / mp.erf(sqrt(z)), sqrt(mp.pi) / 2),
            0,
            1,
        ),
        # erf(x) = 1 - exp(-x**2) * G(1/x - c) for 1 <= x <= 6 (float64, c = 7/12) or
        # 4 (float32, c = 5/8); centring keeps the coefficients small
        "ERF_LARGE_F64": _erf_large(erfcx, mp.mpf(1) / 6),
        "ERF_LARGE_F32": _erf_large(erfcx, mp.mpf(1) / 4),
        # atan(t) = t + t**3 * T(t**2) for |t| <= 1
        "ATAN": (
            nz(lambda z: (mp.atan(sqrt(z)) - sqrt(z)) / z**1.5, -mp.mpf(1) / 3),
            nz(lambda z: z * sqrt(z) / mp.atan(sqrt(z)), 0),
            0,
            1,
        ),
        # asin(s) = s + s**3 * A(s**2) for |s| <= 1/2
        "ASIN": (
            nz(lambda z: (mp.asin(sqrt(z)) - sqrt(z)) / z**1.5, mp.mpf(1) / 6),
            nz(lambda z: z * sqrt(z) / mp.asin(sqrt(z)), 0),
            0,
            mp.mpf("0.25"),
        ),
        # first guess of cbrt(m), m in [2**-1.5, 2**1.5), refined by Halley and Newton
        "CBRT": (mp.cbrt, lambda m: 1 / mp.cbrt(m), mp.mpf(2) ** -1.5, mp.mpf(2) ** 1.5),
        # pow's log: 2 atanh(s) = 2 s + 2 s**3 / 3 + s**5 * Q(s**2), s = f / (2 + f)
        "LOG_DD": (
            nz(lambda z: (2 * mp.atanh(sqrt(z)) / sqrt(z) - 2 - 2 * z / 3) / z**2, mp.mpf(2) / 5),
            lambda z: z**2 / 2,
            0,
            s_max**2,
        ),
    }


def _erf_large(erfcx, t_min):
    import mpmath as mp

    c = (1 + t_min) / 2

    def weight(u):
        return mp.exp(-1 / (u + c) ** 2)

    return (lambda u: erfcx(1 / (u + c))), weight, t_min - c, 1 - c


def fit(name: str, nterms: int, npts: int = 160, iters: int = 40):
    """Weighted minimax fit of spec ``name`` with ``nterms`` terms: (coefficients as
    mpmath numbers, lowest power first, and the max weighted error)."""
    import mpmath as mp

    g, w, a, b = _specs()[name]
    first = _TERMS[name][0]
    powers = range(first, first + nterms)
    a, b = mp.mpf(a), mp.mpf(b)
    xs = [a + (b - a) * (1 - mp.cos(mp.pi * (i + mp.mpf(0.5)) / npts)) / 2 for i in range(npts)]
    rows = [[w(x) * x**p for p in powers] for x in xs]
    rhs = [w(x) * g(x) for x in xs]
    lam = [mp.mpf(1) / npts] * npts
    for _ in range(iters):
        m = mp.matrix(nterms, nterms)
        v = mp.matrix(nterms, 1)
        for row, y, lw in zip(rows, rhs, lam):
            for j in range(nterms):
                v[j] += lw * row[j] * y
                for k in range(nterms):
                    m[j, k] += lw * row[j] * row[k]
        c = mp.lu_solve(m, v)
        err = [abs(mp.fsum(r * cj for r, cj in zip(row, c)) - y) for row, y in zip(rows, rhs)]
        total = mp.fsum(lw * e for lw, e in zip(lam, err))
        lam = [lw * e / total for lw, e in zip(lam, err)]
    return [c[j] for j in range(nterms)], max(err)


def _fit_job(job):
    name, dtype, n = job
    coeffs, err = fit(name, n)
    cast = np.float64 if dtype == "f64" else np.float32
    return name, dtype, [float(cast(float(c))) for c in coeffs], float(err)


def generate() -> str:
    """The text of ``coeffs.py``."""
    jobs = [(name, dt, n) for name, (_, terms) in _TERMS.items() for dt, n in terms.items()]
    with ProcessPoolExecutor() as pool:
        results = list(pool.map(_fit_job, jobs))
    lines = [
        '"""Polynomial coefficients of the math library, lowest power first.',
        "",
        "Generated by ``python -m fusegrad.codegen.mathlib.remez``; do not edit. Each",
        "comment gives the fit's max weighted error (relative error contributed to the",
        'function) before rounding the coefficients to the dtype."""',
        "",
    ]
    for name, dtype, coeffs, err in results:
        lines.append(f"# {name} {dtype}: {len(coeffs)} terms, error {err:.3g}")
        body = "".join(f"    {c!r},\n" for c in coeffs)
        lines.append(f"{name}_{dtype.upper()} = (\n{body})")
    return "\n".join(lines) + "\n"


def _scan(name: str) -> None:
    import mpmath as mp

    for n in range(2, 22):
        _, err = fit(name, n, iters=25)
        print(f"{name} {n:2d} terms: error 2**{float(mp.log(err, 2)):.1f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--scan":
        _scan(sys.argv[2])
    else:
        target = Path(__file__).with_name("coeffs.py")
        target.write_text(generate())
        print(f"wrote {target}")
