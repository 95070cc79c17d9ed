"""gradcheck / gradgradcheck: pass and fail on the same functions as PyTorch's."""

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import GradcheckError, gradcheck, gradgradcheck


def _inputs(lib, dtype="float64"):
    rng = np.random.default_rng(0)
    dt = getattr(lib, dtype)
    return (lib.tensor(rng.uniform(0.5, 1.5, (3,)), dtype=dt, requires_grad=True),
            lib.tensor(rng.uniform(0.5, 1.5, (2, 3)), dtype=dt, requires_grad=True))


def _wrong_backward(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a  # missing the factor 2

    return Square.apply


def _functions(lib):
    return {
        "smooth": lambda a, b: ((a.sin() * b).sum(1), (a * a).exp()),
        "matmul": lambda a, b: (b @ a).tanh(),
        "one_output_uses_one_input": lambda a, b: (a.sum() * 2, b.pow(3)),
        "wrong_backward": lambda a, b: _wrong_backward(lib)(a) + b.sum(),
    }


@pytest.mark.parametrize("name", ["smooth", "matmul", "one_output_uses_one_input",
                                  "wrong_backward"])
@pytest.mark.parametrize("fast", [False, True])
def test_same_verdict_as_pytorch(name, fast):
    torch = pytest.importorskip("torch")
    want = torch.autograd.gradcheck(_functions(torch)[name], _inputs(torch),
                                    raise_exception=False, fast_mode=fast)
    got = gradcheck(_functions(fg)[name], _inputs(fg), raise_exception=False, fast_mode=fast)
    assert got == want == (name != "wrong_backward")


@pytest.mark.parametrize("name", ["smooth", "matmul"])
def test_gradgradcheck_same_verdict_as_pytorch(name):
    torch = pytest.importorskip("torch")
    want = torch.autograd.gradgradcheck(_functions(torch)[name], _inputs(torch),
                                        raise_exception=False)
    assert gradgradcheck(_functions(fg)[name], _inputs(fg), raise_exception=False) == want


def test_message_shows_both_jacobians():
    x = fg.tensor([0.5, 2.0], dtype=fg.float64, requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(_wrong_backward(fg), (x,))
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert msg.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
    assert "analytical:" in msg and "4.0000" in msg and "2.0000" in msg


def test_wrong_second_derivative_fails_gradgradcheck_only():
    class Cube(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 3 * a.detach() ** 2  # right value, no history: 2nd derivative is lost

    x = fg.tensor([0.5, 2.0], dtype=fg.float64, requires_grad=True)
    assert gradcheck(Cube.apply, (x,))
    assert not gradgradcheck(Cube.apply, (x,), raise_exception=False)
    assert gradgradcheck(lambda a: a ** 3, (x,))


def test_float32_inputs_warn_as_pytorch():
    x = fg.tensor([0.5, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double"):
        assert gradcheck(lambda a: a * 2, (x,), eps=1e-2, atol=1e-3, rtol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gradcheck(lambda a: a * 2, (x.double().detach().requires_grad_(),))


def test_needs_an_input_that_requires_grad():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda a: a * 2, (fg.ones(2, dtype=fg.float64),))


def test_single_tensor_input_and_non_tensor_arguments():
    x = fg.tensor([0.3, 0.7], dtype=fg.float64, requires_grad=True)
    assert gradcheck(lambda a: a.exp(), x)
    assert gradcheck(lambda a, k: a ** k, (x, 3))


def test_nondeterministic_backward_is_caught():
    calls = []

    class Noisy(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * (2 + 1e-9 * len(calls))

    x = fg.tensor([0.5], dtype=fg.float64, requires_grad=True)
    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Noisy.apply, (x,))
    assert gradcheck(Noisy.apply, (x,), nondet_tol=1e-6)
