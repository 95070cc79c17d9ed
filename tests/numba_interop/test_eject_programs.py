"""Programs ``transforms.eject`` writes, run in this process: loops, gathers and the size
rule at shapes other than the example's, against fusegrad's own compiled calls.

(``test_eject.py`` runs a written module in a process where fusegrad cannot be
imported.)"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.transforms.eject import EjectError, eject
from fusegrad.transforms.export import ExportError

pytestmark = pytest.mark.compiled


def _module(tmp_path, functions: dict) -> dict:
    path = tmp_path / "ejected_program.py"
    path.write_text(eject(functions, "test module"))
    spec = importlib.util.spec_from_file_location(f"ejected_{tmp_path.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def rnn(h, xs, w):
    def step(h, x):
        h = fnp.tanh(h * w + x)
        return h, h * h

    h, ys = fg.scan(step, h, xs)
    return fnp.sum(ys) + fnp.sum(h)


def gather(x, idx, m):
    return fnp.sum(fnp.exp(x[idx]) * m[:, None]) + fnp.sum(fnp.sqrt(x * x + 1.0) % 0.7)


def test_scan_gradient_at_new_lengths_and_widths(tmp_path):
    ex = (np.zeros(3), np.zeros((4, 3)), np.zeros(3))
    ns = _module(tmp_path, {"value": (rnn, ex), "grads": (fg.grad(rnn, argnums=(0, 1, 2)), ex)})
    rng = np.random.default_rng(0)
    for t, n in ((4, 3), (9, 5), (2, 17)):
        args = (rng.standard_normal(n), rng.standard_normal((t, n)), rng.standard_normal(n))
        np.testing.assert_allclose(ns["value"](*args), fg.jit(rnn)(*args), rtol=1e-13)
        want = fg.grad(rnn, argnums=(0, 1, 2))(*args)
        for got, w in zip(ns["grads"](*args), want):
            np.testing.assert_allclose(got, w, rtol=1e-13, atol=1e-15)


def test_gather_with_remainders_and_tied_extents(tmp_path):
    ex = (np.zeros((6, 4)), np.zeros(5, np.int64), np.zeros(5))
    g = fg.grad(gather)
    ns = _module(tmp_path, {"grad": (g, ex)})
    rng = np.random.default_rng(1)
    for n, d, k in ((6, 4, 5), (30, 7, 12)):
        x = rng.standard_normal((n, d))
        idx = rng.integers(-n, n, k)
        m = rng.standard_normal(k)
        np.testing.assert_allclose(ns["grad"](x, idx, m), g(x, idx, m), rtol=1e-13)
    with pytest.raises(ValueError, match="argument 2's axis 0 must equal"):
        ns["grad"](np.ones((6, 4)), np.zeros(5, np.int64), np.ones(4))
    with pytest.raises(IndexError, match="out of range"):
        ns["grad"](np.ones((6, 4)), np.full(5, 6, np.int64), np.ones(5))


def test_a_second_import_loads_the_kept_machine_code(tmp_path):
    """The module keeps its machine code (and Numba its functions) beside its file: a
    new process imports it without compiling, and computes the same."""
    ex = (np.zeros(3), np.zeros((4, 3)), np.zeros(3))
    path = tmp_path / "kept.py"
    path.write_text(eject({"value": (rnn, ex)}, "kept"))
    code = ("import sys, time, numpy as np\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "import llvmlite.binding as llvm\n"
            "import kept\n"
            "x = np.linspace(-1, 1, 21)\n"
            "print(repr(kept.value(x[:5], np.outer(x[:7], x[:5]), x[5:10])))\n"
            "print(len(kept.value.stats.cache_hits))\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert runs[0][0] == runs[1][0]
    assert runs[1][1] == "1"  # Numba's cached function
    names = re.findall(r"^    \('(\w+)', '(?:kernel|runtime|entry)'", path.read_text(), re.M)
    kept = sorted(p.name.split(".")[0] for p in (tmp_path / "__pycache__").glob("*.o"))
    assert names and kept == sorted(names)


def cnn(x, w, b):
    from fusegrad.nn import functional as F

    return F.max_pool2d(fnp.maximum(F.conv2d(x, w, b, padding=1), 0.0), 2)


def cnn_loss(x, w, b):
    return fnp.sum(cnn(x, w, b) ** 2)


def test_a_small_cnn_and_its_gradient(tmp_path):
    """Convolution, ReLU and max pooling (ejected for the example's shapes: the bytes of
    its (N, C, H, W) places are of degree 4 in the extents, beyond the size rule)."""
    ex = (np.zeros((2, 3, 8, 8)), np.zeros((4, 3, 3, 3)), np.zeros(4))
    grad = fg.grad(cnn_loss, argnums=(1, 2))
    ns = _module(tmp_path, {"cnn": (cnn, ex), "grad": (grad, ex)})
    rng = np.random.default_rng(2)
    args = (rng.standard_normal(ex[0].shape), rng.standard_normal(ex[1].shape),
            rng.standard_normal(4))
    np.testing.assert_allclose(ns["cnn"](*args), fg.jit(cnn)(*args), rtol=1e-13)
    for got, want in zip(ns["grad"](*args), fg.jit(grad)(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="ejected for these shapes only"):
        ns["cnn"](np.ones((3, 3, 8, 8)), *args[1:])


def test_an_op_not_lowered_natively_is_a_clear_error():
    def f(x):  # (``sqrtm``, SciPy's own C code, is not lowered)
        return fnp.sum(fg.scipy.linalg.sqrtm(x @ x.T + np.eye(3)))

    with pytest.raises(EjectError, match=r"uses op 'sqrtm'.*\.njit\(\*example\)"):
        eject({"f": (f, (np.zeros((3, 3)),))}, "")


def spectral(x, k):
    n = x.shape[-1]
    y = fnp.fft.irfft(fnp.fft.rfft(x) * fnp.fft.rfft(k), n=n)
    return fnp.sum(y * x) + fnp.sum(fnp.real(fnp.fft.fft2(x + 0j, norm="ortho")) ** 2)


def test_fourier_transforms_call_numpys_loops(tmp_path):
    """The written module finds NumPy's FFT loops when it loads. The transforms run at
    other shapes (the sizes table fits the frequency counts, ``n // 2 + 1``, times the
    rows); the gradient is the example's shapes' only: the VJP of a real transform
    depends on the length's parity (the Nyquist term), so its program does."""
    ex = (np.zeros((4, 8)), np.zeros(8))
    ns = _module(tmp_path, {"value": (spectral, ex), "grad": (fg.grad(spectral), ex)})
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal((4, 8)), rng.standard_normal(8)
    assert ns["value"](x, k) == fg.jit(spectral)(x, k)
    np.testing.assert_array_equal(ns["grad"](x, k), fg.jit(fg.grad(spectral))(x, k))
    for shape in ((3, 9), (5, 16)):
        x, k = rng.standard_normal(shape), rng.standard_normal(shape[-1])
        np.testing.assert_allclose(ns["value"](x, k), fg.jit(spectral)(x, k), rtol=1e-13)
    with pytest.raises(ValueError, match="ejected for these shapes only"):
        ns["grad"](np.ones((3, 9)), np.ones(9))
    with pytest.raises(ValueError, match="argument 1's axis 0 must equal"):
        ns["value"](np.ones((3, 9)), np.ones(8))  # the example's extents tied


def gp(a, y, eye):
    k = a @ a.T + 3.0 * eye
    c = fnp.linalg.cholesky(k)
    z = fg.scipy.linalg.solve_triangular(c, y, lower=True)
    return fnp.sum(z * z) + fnp.linalg.slogdet(k)[1] + fnp.sum(fnp.linalg.solve(k, y))


def test_linear_algebra_calls_lapack_and_raises_linalgerror(tmp_path):
    ex = (np.zeros((4, 4)), np.zeros((4, 2)), np.zeros((4, 4)))
    ns = _module(tmp_path, {"value": (gp, ex), "grads": (fg.grad(gp, argnums=(0, 1)), ex),
                            "factor": (fnp.linalg.cholesky, ex[:1])})
    rng = np.random.default_rng(2)
    for n in (7,):  # (the example's size is the others' case)
        a, y = rng.standard_normal((n, n)), rng.standard_normal((n, 2))
        np.testing.assert_allclose(ns["value"](a, y, np.eye(n)), fg.jit(gp)(a, y, np.eye(n)),
                                   rtol=1e-13)
        want = fg.grad(gp, argnums=(0, 1))(a, y, np.eye(n))
        for got, w in zip(ns["grads"](a, y, np.eye(n)), want):
            np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-14)
    with pytest.raises(np.linalg.LinAlgError, match=r"^Matrix is not positive definite in @"):
        ns["factor"](-np.eye(5))


def test_an_array_closed_over_that_follows_the_shapes_pins_them(tmp_path):
    """``np.eye(a.shape[0])`` is a constant of the trace: the written function is for
    the example's shapes only, and a Numba export refuses other shapes."""
    def f(a):
        return fnp.sum(a @ a.T + 3.0 * np.eye(a.shape[0]))

    ns = _module(tmp_path, {"f": (f, (np.zeros((4, 4)),))})
    assert ns["f"](np.ones((4, 4))) == f(np.ones((4, 4)))
    with pytest.raises(ValueError, match=r"must be 4 \(ejected for these shapes only\)"):
        ns["f"](np.ones((7, 7)))
    exported = fg.jit(f).njit(np.zeros((4, 4)))
    assert exported(np.ones((4, 4))) == f(np.ones((4, 4)))
    with pytest.raises(ExportError, match="closes over changes with the argument shapes"):
        exported(np.ones((7, 7)))


def phase(z, w):
    return fnp.angle(z * w) + fnp.abs(z / w), fnp.conj(z) * w


def test_complex_programs_export_and_eject(tmp_path):
    import numba

    rng = np.random.default_rng(5)
    z, w = (rng.standard_normal((2, 6)) + 1j * rng.standard_normal((2, 6)) for _ in range(2))
    exported = fg.jit(phase).njit(z, w)

    @numba.njit
    def call(z, w):
        return exported(z, w)

    ns = _module(tmp_path, {"phase": (phase, (z, w))})
    for shape in ((2, 6), (3, 5)):
        a, b = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape) for _ in range(2))
        want = fg.jit(phase)(a, b)
        for got in (call(a, b), ns["phase"](a, b)):
            for g, x in zip(got, want):
                assert g.dtype == x.dtype and np.array_equal(g, x)
