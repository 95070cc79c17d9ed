"""Complex eager Tensors: creation, real/imag/conj/abs/angle, and backward() giving
PyTorch's gradient for complex leaves (the conjugate of JAX's ``grad``)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

RNG = np.random.default_rng(2)


def crand(*shape):
    return RNG.uniform(0.3, 2, shape) + 1j * RNG.uniform(-1.5, 1.5, shape)


def test_complex_tensor_creation_and_dtype():
    t = fg.tensor(np.array([1 + 2j, 3 - 1j]))
    assert t.dtype == fg.complex128 and t.is_complex() and not t.is_floating_point()
    assert fg.tensor(np.array([1j], np.complex64)).dtype == fg.complex64
    np.testing.assert_array_equal(t.numpy(), [1 + 2j, 3 - 1j])


def test_parts_and_methods():
    z = crand(3)
    t = fg.tensor(z)
    np.testing.assert_array_equal(t.real.numpy(), z.real)
    np.testing.assert_array_equal(t.imag.numpy(), z.imag)
    np.testing.assert_array_equal(t.conj().numpy(), np.conj(z))
    np.testing.assert_allclose(t.abs().numpy(), np.abs(z))
    np.testing.assert_allclose(t.angle().numpy(), np.angle(z))
    assert t.abs().dtype == fg.float64
    np.testing.assert_allclose((t * t + 1j).numpy(), z * z + 1j)


def test_backward_is_conjugate_of_jax_grad():
    z = crand(4)
    t = fg.tensor(z, requires_grad=True)
    loss = (t.abs() ** 2).sum() + (t * t).real.sum() + 3 * t.imag.sum()
    loss.backward()
    # d/dx - i d/dy of the loss is JAX's gradient; PyTorch's .grad is its conjugate
    jax_grad = 2 * np.conj(z) + 2 * z - 3j
    np.testing.assert_allclose(t.grad.numpy(), np.conj(jax_grad), rtol=1e-12)


def test_backward_matches_torch():
    torch = pytest.importorskip("torch")
    z = crand(5)
    w = crand(5)

    def loss(lib, t, w):
        return ((lib.abs(t * w + lib.exp(t)) ** 2).sum() + (t.conj() * t.sin()).real.sum()
                + (t.angle() * t.imag).sum() + (t / (w + 2)).real.sum() + lib.sqrt(t).imag.sum()
                + (t.log() * w).real.sum() + (t.tanh() - t.cos()).abs().sum()
                + (t[:3] @ w[1:4]).imag + (t.reshape(5, 1) * w).sum().real)

    ft = fg.tensor(z, requires_grad=True)
    loss(fg, ft, fg.tensor(w)).backward()
    tt = torch.tensor(z, requires_grad=True)
    loss(torch, tt, torch.tensor(w)).backward()
    np.testing.assert_allclose(ft.grad.numpy(), tt.grad.numpy(), rtol=1e-10)


def test_requires_grad_on_complex_is_allowed_and_integers_still_refused():
    fg.tensor(np.array([1j]), requires_grad=True)
    with pytest.raises(RuntimeError):
        fg.tensor(np.array([1, 2]), requires_grad=True)


def test_complex_tensors_save_and_load(tmp_path):
    t = fg.tensor(np.array([1 + 2j, 3j], np.complex64))
    fg.save({"t": t}, tmp_path / "c.fg")
    back = fg.load(tmp_path / "c.fg")["t"]
    assert back.dtype == fg.complex64
    np.testing.assert_array_equal(back.numpy(), t.numpy())
