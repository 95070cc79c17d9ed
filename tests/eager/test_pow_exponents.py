"""``x ** k`` for small integer k: PyTorch's values (it multiplies) at a multiply's cost."""

import timeit

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ir.numpy_pow import power

EXPONENTS = [2, 3, -1, -2, -0.5, 3.0, 4, 1.5, 0.5]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_equal_pytorch_bit_for_bit(dtype):
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(0).standard_normal(5000) * 3).astype(dtype)
    x = np.abs(x) + 0.1  # inside every exponent's domain
    for e in EXPONENTS:
        want = (torch.from_numpy(x) ** e).numpy()
        got = (fg.from_numpy(x) ** e).numpy()
        if e in (2, 3, -1, -2, -0.5, 3.0):
            np.testing.assert_array_equal(got, want, err_msg=f"x ** {e}")
        else:  # the C library's pow against PyTorch's vectorised one: 1 ulp
            np.testing.assert_allclose(got, want, rtol=2 * np.finfo(dtype).eps, err_msg=str(e))


def test_multiplication_rounding_by_hand():
    x = np.array([1.1, 2.7, -3.3], dtype=np.float32)
    np.testing.assert_array_equal(power(x, 3), (x * x) * x)
    np.testing.assert_array_equal(power(x, np.float64(-2.0)), np.float32(1) / (x * x))
    np.testing.assert_array_equal(power(np.arange(4), 3), np.arange(4) ** 3)  # ints: np.power
    assert power(x, 3).dtype == np.float32


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    x = np.array([0.3, 1.7, 2.5])
    for e in (3, -2, -0.5):
        a = fg.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        (a ** e).sum().backward()
        (t ** e).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-15)
        assert (a ** e).grad_fn.name() == "PowBackward0"


def test_compiled_cube_equals_eager():
    x = np.linspace(-2, 2, 8)  # no zero
    f = fg.jit(lambda v: v ** 3 + v ** -2)
    np.testing.assert_allclose(f(x), x ** 3 + x ** -2.0, rtol=1e-14)
    g = fg.grad(lambda v: (v ** 3).sum())(x)
    np.testing.assert_allclose(g, 3 * x ** 2, rtol=1e-14)


def test_cube_costs_about_two_multiplies():
    x = fg.randn(2000)
    n = 300
    cube = min(timeit.repeat(lambda: x ** 3, number=n, repeat=5))
    general = min(timeit.repeat(lambda: x ** 3.3, number=n, repeat=5))
    assert cube < general  # pow from the C library is far slower than two multiplies
