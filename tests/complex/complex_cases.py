"""Op-table cases on complex operands, for the shared rule and lowering tests.

``COMPLEX_UNARY`` / ``COMPLEX_BINARY`` hold the draws of the complex ops (``real``,
``imag``, ``conj``, ``complex``), merged into the elementwise tables of
``tests/passes/test_vjp_rules.py``; ``complex_cases(Case, inputs)`` returns cases of
existing ops on complex operands (each traces to exactly its op). The rule checks
pair cotangents and tangents by ``re(sum(a * b))``, JAX's convention (docs/complex.md).
"""

from __future__ import annotations

import numpy as np


def cnormal(*shape: int):
    return lambda rng: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _cdraw(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def _away_from_zero(rng, shape):
    """Complex values with modulus in [0.5, 2] (abs, div and log are smooth there)."""
    r = rng.uniform(0.5, 2.0, shape)
    return r * np.exp(1j * rng.uniform(-3.0, 3.0, shape))


def _right_half(rng, shape):
    """Re > 0.3: away from the branch cut of log, sqrt and pow on the negative real axis."""
    return rng.uniform(0.3, 2.0, shape) + 1j * rng.uniform(-1.5, 1.5, shape)


COMPLEX_UNARY = {
    "real": _cdraw,
    "imag": _cdraw,
    "conj": _cdraw,
}
COMPLEX_BINARY = {
    "complex": lambda rng, shapes: [rng.standard_normal(s) for s in shapes],
}


def _each(*draws):
    return lambda rng: [d(rng, s) for d, s in draws]


def complex_cases(Case, inputs):
    c34, c3, c1 = cnormal(3, 4), cnormal(3), cnormal(1, 4)
    away = _each((_away_from_zero, (3, 4)))
    right = _each((_right_half, (3, 4)))
    return [
        Case("add", inputs(c34, c1), label="complex"),
        Case("mul", inputs(c34, c1), label="complex"),
        Case("sub", inputs(c34, cnormal()), label="complex"),
        Case("div", _each((_cdraw, (3, 4)), (_away_from_zero, (1, 4))), label="complex"),
        Case("neg", inputs(c3), label="complex"),
        Case("abs", away, label="complex"),
        Case("exp", inputs(c34), label="complex"),
        Case("log", right, label="complex"),
        Case("sqrt", right, label="complex"),
        Case("sin", inputs(c34), label="complex"),
        Case("cos", inputs(c34), label="complex"),
        Case("tanh", _each((lambda r, s: 0.5 * _cdraw(r, s), (3, 4))), label="complex"),
        Case("pow", _each((_right_half, (3, 4)), (_right_half, (1, 4))), label="complex"),
        Case("reduce_sum", inputs(c34), {"axes": (1,)}, "complex"),
        Case("matmul", inputs(c34, cnormal(4, 2)), label="complex"),
        Case("transpose", inputs(c34), {"perm": (1, 0)}, "complex"),
        Case("take", inputs(c34, lambda rng: np.array([2, 0, 0])), {"axis": 0}, "complex"),
        Case("convert", inputs(cnormal(3)), {"dtype": "c128"}, "c128"),
        Case("convert", inputs(lambda rng: rng.standard_normal(3)), {"dtype": "c128"},
             "f64-c128"),
        Case("convert", inputs(cnormal(3)), {"dtype": "f64"}, "c128-f64"),
        *fft_cases(Case, inputs),
        *linalg_cases(Case, inputs),
    ]


def _hermitian(n: int, batch=()):
    """Hermitian matrices with eigenvalues spread over [-2, 3], plus noise in the upper
    triangle and the imaginary part of the diagonal (neither is read by ``eigh``)."""
    def draw(rng):
        q = np.linalg.qr(_cdraw(rng, (*batch, n, n)))[0]
        w = np.linspace(-2.0, 3.0, n) + rng.uniform(-0.1, 0.1, (*batch, n))
        a = (q * w[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))
        return a + np.triu(_cdraw(rng, (*batch, n, n)), 1) + 1j * np.eye(n)

    return draw


def _shifted(*shape: int):
    """A complex matrix plus 4 on the diagonal (eigenvalues near 4: well-conditioned)."""
    return lambda rng: _cdraw(rng, shape) + 4 * np.eye(shape[-1])


def linalg_cases(Case, inputs):
    """Linear-algebra ops on complex matrices. Eigenvector phases are LAPACK's, so for
    ``eigh`` and ``eig`` only the eigenvalues meet random cotangents (phase-invariant
    losses of the vectors are in ``test_complex_linalg``), and likewise ``svd``."""
    return [
        Case("solve", inputs(_shifted(3, 3), cnormal(3, 2)), label="complex"),
        Case("eigh", inputs(_hermitian(4)), label="complex", results=1),
        Case("eigh", inputs(_hermitian(3, (2,))), label="complex-batched", results=1),
        Case("eig", inputs(cnormal(4, 4)), label="complex", results=1),
        Case("sqrtm", inputs(_shifted(3, 3)), label="complex"),
        Case("sylvester", inputs(_shifted(3, 3), _shifted(2, 2), cnormal(3, 2)),
             label="complex"),
    ]


def _fft(kind, axes, last, norm="backward"):
    return {"kind": kind, "axes": axes, "last": last, "norm": norm}


def fft_cases(Case, inputs):
    """The ``fft`` op: every kind, one and two axes, every norm, even and odd lengths."""
    real = lambda *s: lambda rng: rng.standard_normal(s)  # noqa: E731
    return [
        Case("fft", inputs(cnormal(3, 4)), _fft("fft", (1,), 4), "fft-axis1"),
        Case("fft", inputs(cnormal(3, 4)), _fft("ifft", (1, 0), 3, "ortho"), "ifft-2d-ortho"),
        Case("fft", inputs(cnormal(2, 5)), _fft("fft", (0, 1), 5, "forward"), "fft-2d-forward"),
        Case("fft", inputs(real(3, 5)), _fft("rfft", (0, 1), 5, "forward"), "rfft-2d-odd"),
        Case("fft", inputs(cnormal(3, 3)), _fft("irfft", (0, 1), 5, "ortho"), "irfft-2d-odd"),
        Case("fft", inputs(cnormal(3, 4)), _fft("irfft", (1,), 6), "irfft-even"),
        Case("fft", inputs(real(3, 6)), _fft("rfft", (1,), 6), "rfft-even"),
    ]


def real_only(cases):
    """``cases`` (Cases or pytest params of Cases) without those with a complex input or
    result: for checks written for real arrays (the eager engine's, say)."""
    def complex_case(c):
        case = c.values[0] if hasattr(c, "values") else c
        args = case.inputs()
        if any(np.iscomplexobj(a) for a in args):
            return True
        out = case.reference(args)
        return any(np.iscomplexobj(o) for o in out)

    return [c for c in cases if not complex_case(c)]
