"""Fourier transforms in compiled code (``codegen/lean/fourier.py``): the ``fft`` op calls
NumPy's own pocketfft loops, bit for bit what ``np.fft.fftn`` / ``ifftn`` / ``rfftn`` /
``irfftn`` return (both precisions, every norm, one to three axes in any order, batches,
odd, even and unit lengths), in programs lowered whole with the complex element rules;
its gradients agree with finite differences to second order and run compiled; a
spectral program's bits are the interpreter's; Numba exports and ejected modules call
the same loops."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen import lean
from fusegrad.ir import TensorType
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.tracer import trace_pytree
from tests.helpers import check_grads, interpreted, lowered_natively, same_bits

pytestmark = pytest.mark.compiled
SLOW = pytest.mark.slow  # the rest of the sweep (``pytest -m slow``)
F = fnp.fft
_REAL = {np.complex128: np.float64, np.complex64: np.float32}


def _transform(kind, shape, axes, norm):
    """``(ours, NumPy's)`` transform for ``kind``; ``shape``: the real side's shape (the
    input of rfftn, the output of irfftn)."""
    if kind == "irfft":
        s = [shape[a] for a in axes]
        return (lambda x: F.irfftn(x, s=s, axes=axes, norm=norm),
                lambda x: np.fft.irfftn(x, s=s, axes=axes, norm=norm))
    ours, numpys = {"fft": (F.fftn, np.fft.fftn), "ifft": (F.ifftn, np.fft.ifftn),
                    "rfft": (F.rfftn, np.fft.rfftn)}[kind]
    return (lambda x: ours(x, axes=axes, norm=norm),
            lambda x: numpys(x, axes=axes, norm=norm))


def _operand(rng, kind, dtype, shape, axes):
    """A random operand: complex of ``dtype`` (rfft: its real dtype)."""
    shape = list(shape)
    if kind == "irfft":
        shape[axes[-1]] = shape[axes[-1]] // 2 + 1
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return x.real.astype(_REAL[dtype]) if kind == "rfft" else x.astype(dtype)


C128, C64 = np.complex128, np.complex64
#: ``(kind, dtype, real-side shape, axes, norm)``
CASES = [
    ("fft", C128, (8,), (0,), "backward"),
    ("ifft", C64, (3, 7), (1,), "ortho"),
    ("fft", C64, (6, 4), (0,), "forward"),
    ("rfft", C128, (5, 12), (1,), "forward"),
    ("rfft", C64, (9,), (0,), "ortho"),
    ("irfft", C128, (4, 11), (1,), "backward"),
    ("irfft", C64, (3, 10), (1,), "forward"),
    ("fft", C128, (4, 5, 6), (0, 2), "ortho"),
    ("rfft", C128, (6, 5, 4), (2, 0), "backward"),
    ("rfft", C64, (2, 7, 3), (1, 0, 2), "forward"),
    ("irfft", C128, (3, 4, 5), (1, 0, 2), "ortho"),
    ("irfft", C64, (5, 3, 2), (0, 1), "backward"),
    ("ifft", C128, (2, 3, 4), (2, 1, 0), "forward"),
    ("rfft", C128, (1, 1), (0, 1), "ortho"),
    ("irfft", C128, (5, 1), (0, 1), "forward"),
    ("fft", C64, (16, 97), (1,), "ortho"),  # batches of NumPy's vectorised path
    ("irfft", C128, (33, 256), (0, 1), "backward"),
]
SHAPES = [((16,), (0,)), ((3, 1, 9), (0, 2)), ((4, 6, 5), (1,)), ((2, 3, 4, 5), (3, 1, 2)),
          ((7, 8), (1, 0)), ((1, 2), (1,))]
MORE = [pytest.param(k, d, s, a, n, marks=SLOW)
        for k in ("fft", "ifft", "rfft", "irfft") for d in (C128, C64) for s, a in SHAPES
        for n in ("backward", "ortho", "forward") if (k, d, s, a, n) not in CASES]


@pytest.mark.parametrize("kind,dtype,shape,axes,norm", CASES + MORE)
def test_transforms_are_numpys_bits(kind, dtype, shape, axes, norm):
    rng = np.random.default_rng(sum(shape) + len(axes))
    x = _operand(rng, kind, dtype, shape, axes)
    ours, numpys = _transform(kind, shape, axes, norm)
    assert lowered_natively(ours, x)
    same_bits(fg.jit(ours)(x), numpys(x))


def power(x, k):
    """A circular convolution of the rows of ``x`` with ``k`` and their power spectra
    (rfft * rfft -> irfft; real, imag, conj, products and sums of complex elements)."""
    n = x.shape[-1]
    z = F.rfft(x) * F.rfft(k)
    y = F.irfft(z, n=n)
    spectrum = fnp.real(z * fnp.conj(z)) + fnp.imag(F.fft(y + 0j, axis=0)[:, : n // 2 + 1]) ** 2
    return y, spectrum


def test_a_spectral_program_is_the_interpreters_bits():
    rng = np.random.default_rng(4)
    for dtype in (np.float64, np.float32):
        x, k = rng.standard_normal((6, 32)).astype(dtype), rng.standard_normal(32).astype(dtype)
        assert lowered_natively(power, x, k)
        for got, want in zip(fg.jit(power)(x, k), interpreted(power, x, k)):
            same_bits(got, want)
    # large enough that the entry releases the GIL around the transforms
    x, k = rng.standard_normal((64, 512)), rng.standard_normal(512)
    for got, want in zip(fg.jit(power)(x, k), interpreted(power, x, k)):
        same_bits(got, want)
    assert _releases_gil(lambda x: F.rfft(x), x) and not _releases_gil(lambda x: F.rfft(x), k)


def _releases_gil(f, *args) -> bool:
    types = tuple(TensorType(a.shape, a.dtype) for a in args)
    fused = fuse(simplify(trace_pytree(f, types, name="f").function))
    return "PyEval_SaveThread" in lean.source(fused)


def test_transforms_in_loop_bodies_and_of_empty_batches():
    def loop(x):
        def body(i, y):
            return F.irfft(F.rfft(y) * (0.5 + 0.1j), n=y.shape[-1])
        return fg.fori_loop(0, 3, body, x)

    def scan(x):
        def step(c, row):
            z = F.rfft(row + c)
            return c + fnp.real(z[0]), fnp.imag(z)
        return fg.scan(step, 0.0, x)

    x = np.random.default_rng(7).standard_normal((4, 9))
    for f in (loop, scan):
        assert lowered_natively(f, x)
        got, want = fg.jit(f)(x), interpreted(f, x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            same_bits(g, w)
    same_bits(fg.jit(F.rfft)(np.zeros((0, 8))), np.fft.rfft(np.zeros((0, 8))))
    empty = np.zeros((3, 0, 8), np.complex64)
    same_bits(fg.jit(lambda z: F.fftn(z, axes=(0, 2)))(empty), np.fft.fftn(empty, axes=(0, 2)))


def loss(x, w):
    """A real loss through rfft, fft, ifft and irfft (2-d, with norms)."""
    z = F.rfft2(x * w, norm="ortho")
    c = F.fft(z * fnp.conj(z) + z, axis=0)
    y = F.irfft2(F.ifft(c * 0.5, axis=1, norm="forward"), s=x.shape)
    return fnp.sum(y * x) + fnp.sum(fnp.real(z) * fnp.imag(z))


def test_gradients_to_second_order_compiled():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    assert lowered_natively(fg.grad(loss, argnums=(0, 1)), x, w)
    check_grads(loss, [x, w], order=2)
    for f in (fg.grad(loss, argnums=(0, 1)),
              fg.grad(lambda x, w: fnp.sum(fg.grad(loss)(x, w) ** 2), argnums=(0, 1))):
        for got, want in zip(f(x, w), interpreted(f, x, w)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_numba_export_calls_the_same_loops():
    pytest.importorskip("numba")
    rng = np.random.default_rng(6)
    x, k = rng.standard_normal((6, 32)), rng.standard_normal(32)

    def f(x, k):
        y, spectrum = power(x, k)
        return fnp.sum(y * x) + fnp.sum(spectrum)

    exported = fg.jit(f).njit(x, k)
    same_bits(exported(x, k), fg.jit(f)(x, k))
    x2, k2 = rng.standard_normal((3, 15)), rng.standard_normal(15)  # another shape, odd
    same_bits(exported(x2, k2), fg.jit(f)(x2, k2))
