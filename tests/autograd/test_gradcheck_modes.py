"""gradcheck's forward-mode, batched-gradient and undefined-gradient checks: the functions
PyTorch passes pass, and each check rejects a function only it catches."""

import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import GradcheckError, gradcheck, gradgradcheck
from fusegrad.autograd import batched as B


def _torch_gradcheck_error():
    import importlib

    return importlib.import_module("torch.autograd.gradcheck").GradcheckError


ALL = dict(check_forward_ad=True, check_batched_grad=True, check_batched_forward_grad=True,
           check_undefined_grad=True)


def _inputs(lib):
    rng = np.random.default_rng(0)
    return (lib.tensor(rng.uniform(0.5, 1.5, (3,)), dtype=lib.float64, requires_grad=True),
            lib.tensor(rng.uniform(0.5, 1.5, (2, 3)), dtype=lib.float64, requires_grad=True))


GOOD = {
    "smooth": lambda a, b: ((a.sin() * b).sum(1), (a * a).exp()),
    "matmul": lambda a, b: (b @ a).tanh(),
    "one_output_uses_one_input": lambda a, b: (a.sum() * 2, b.pow(3)),
    "broadcast": lambda a, b: (a * b).logsumexp(1) / (1 + b.abs()).sum(),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_functions_pass_every_check(name):
    assert gradcheck(GOOD[name], _inputs(fg), **ALL)
    assert gradcheck(GOOD[name], _inputs(fg), fast_mode=True, **ALL)
    assert gradcheck(GOOD[name], _inputs(fg), check_forward_ad=True, check_backward_ad=False,
                     check_batched_forward_grad=True)
    torch = pytest.importorskip("torch")
    assert torch.autograd.gradcheck(GOOD[name], _inputs(torch), **ALL)


@pytest.mark.parametrize("name", ["smooth", "matmul"])
def test_gradgradcheck_forward_over_reverse_and_batched(name):
    assert gradgradcheck(GOOD[name], _inputs(fg), check_fwd_over_rev=True,
                         check_batched_grad=True)
    assert gradgradcheck(GOOD[name], _inputs(fg), check_fwd_over_rev=True,
                         check_rev_over_rev=False)
    torch = pytest.importorskip("torch")
    assert torch.autograd.gradgradcheck(GOOD[name], _inputs(torch), check_fwd_over_rev=True,
                                        check_batched_grad=True)


def _square(lib, batchable_backward=True):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            if batchable_backward:
                return g * 2 * a
            return g * 2 * a * (1.0 if g.sum().item() == g.sum().item() else 0.0)

    return Square.apply


def test_batched_grad_rejects_a_backward_that_reads_gradient_values():
    f = _square(fg, batchable_backward=False)
    assert gradcheck(f, _inputs(fg)[:1])
    with pytest.raises(GradcheckError, match=r"(?s)While computing batched gradients, got: .*item"):
        gradcheck(f, _inputs(fg)[:1], check_batched_grad=True)
    assert gradcheck(f, _inputs(fg)[:1], check_batched_grad=True,
                     raise_exception=False) is False
    assert gradcheck(_square(fg), _inputs(fg)[:1], check_batched_grad=True)
    torch = pytest.importorskip("torch")
    tf = _square(torch, batchable_backward=False)
    assert torch.autograd.gradcheck(tf, _inputs(torch)[:1])
    with pytest.raises(_torch_gradcheck_error(),
                       match="While computing batched gradients"):
        torch.autograd.gradcheck(tf, _inputs(torch)[:1], check_batched_grad=True)


def test_batched_grad_compares_rows(monkeypatch):
    """A batched backward that differs from the per-row ones is reported per input."""
    real = B.batched_vjp

    def off(*args, **kwargs):
        return [r + 1e-3 for r in real(*args, **kwargs)]

    monkeypatch.setattr(B, "batched_vjp", off)
    from fusegrad.autograd import gradcheck_modes

    monkeypatch.setattr(gradcheck_modes, "batched_vjp", off)
    with pytest.raises(GradcheckError, match="For output 0 and input 0:"):
        gradcheck(GOOD["matmul"], _inputs(fg), check_batched_grad=True)


def test_forward_ad_rejects_a_custom_function_without_forward_mode():
    f = _square(fg)
    assert gradcheck(f, _inputs(fg)[:1])
    with pytest.raises(GradcheckError, match="forward mode through the custom Function Square"):
        gradcheck(f, _inputs(fg)[:1], check_forward_ad=True)
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError, match="jvp"):
        torch.autograd.gradcheck(_square(torch), _inputs(torch)[:1], check_forward_ad=True)


def test_forward_ad_compares_with_finite_differences(monkeypatch):
    from fusegrad.autograd import gradcheck_modes

    real = gradcheck_modes.jvp_columns

    def scaled(*args, **kwargs):
        return [[1.01 * np.asarray(t) for t in col] for col in real(*args, **kwargs)]

    assert gradcheck(GOOD["smooth"], _inputs(fg), check_forward_ad=True)
    monkeypatch.setattr(gradcheck_modes, "jvp_columns", scaled)
    with pytest.raises(GradcheckError, match="Jacobian computed with forward mode mismatch "
                                             "for output 0 with respect to input 0"):
        gradcheck(GOOD["smooth"], _inputs(fg), check_forward_ad=True)
    # the backward check alone does not see it
    assert gradcheck(GOOD["smooth"], _inputs(fg))


def test_batched_forward_grad_compares_columns(monkeypatch):
    from fusegrad.autograd import gradcheck_modes

    real = gradcheck_modes.batched_jvp

    def off(*args, **kwargs):
        return [np.asarray(t) * 1.01 for t in real(*args, **kwargs)]

    monkeypatch.setattr(gradcheck_modes, "batched_jvp", off)
    assert gradcheck(GOOD["smooth"], _inputs(fg), check_forward_ad=True)
    with pytest.raises(GradcheckError, match=r"(?s)For output 0 and input 0:.*forward-mode AD"):
        gradcheck(GOOD["smooth"], _inputs(fg), check_forward_ad=True,
                  check_batched_forward_grad=True)


def _two(lib, offset):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3 + offset  # offset != 0: nonzero for zero gradients

    return Two.apply


def test_backward_must_be_linear_in_its_gradient():
    """1e-7 is under gradcheck's tolerances: only the backward with zero output gradients
    (run by every backward check, as in PyTorch) sees it."""
    f = _two(fg, 1e-7)
    with pytest.raises(GradcheckError, match="backward not multiplied by grad_output"):
        gradcheck(f, _inputs(fg)[:1], check_undefined_grad=False)
    assert gradcheck(_two(fg, 0.0), _inputs(fg)[:1])
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(_torch_gradcheck_error(), match="backward not multiplied"):
            torch.autograd.gradcheck(_two(torch, 1e-7), _inputs(torch)[:1],
                                     check_undefined_grad=False)
        assert torch.autograd.gradcheck(_two(torch, 0.0), _inputs(torch)[:1])


def _three(odd):
    """Three outputs; with ``set_materialize_grads(False)`` the backward sees None for an
    output whose gradient is undefined, and ``odd`` decides what it does when exactly one
    of the three is None (the backward checks never give it that case)."""
    class Three(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            return a * 2, a * 3, a * 4

        @staticmethod
        def backward(ctx, *gs):
            total = sum(g * k for g, k in zip(gs, (2, 3, 4)) if g is not None)
            if sum(g is None for g in gs) == 1:
                return odd(total)
            return total

    return Three.apply


def test_undefined_grad_rejects_a_gradient_from_nothing():
    f = _three(lambda total: total + 1.0)
    x = _inputs(fg)[:1]
    assert gradcheck(f, x, check_undefined_grad=False)
    with pytest.raises(GradcheckError, match="Expected all input grads to be undefined or zero"):
        gradcheck(f, x)


def test_undefined_grad_rejects_a_backward_that_cannot_take_none():
    def odd(total):
        raise RuntimeError("one undefined gradient")

    x = _inputs(fg)[:1]
    assert gradcheck(_three(odd), x, check_undefined_grad=False)
    with pytest.raises(GradcheckError, match=r"(?s)handle undefined output grads.*one undefined"):
        gradcheck(_three(odd), x)


def test_flag_combinations_as_pytorch():
    x = _inputs(fg)
    for kw, msg in [(dict(check_backward_ad=False), "at least one of"),
                    (dict(check_backward_ad=False, check_forward_ad=True,
                          check_batched_grad=True), "check_batched_grad=True requires"),
                    (dict(check_batched_forward_grad=True), "requires check_forward_ad")]:
        with pytest.raises(AssertionError, match=msg):
            gradcheck(GOOD["smooth"], x, **kw)
        torch = pytest.importorskip("torch")
        with pytest.raises(AssertionError, match=msg):
            torch.autograd.gradcheck(GOOD["smooth"], _inputs(torch), **kw)


def test_forward_ad_rejects_what_tracing_cannot_see():
    """The trace has no detach: its forward mode would differentiate through it."""
    def f(a):
        return a.detach() * a

    x = _inputs(fg)[:1]
    assert not gradcheck(f, x, raise_exception=False)  # the backward sees d(a*c)/da = c
    with pytest.raises(GradcheckError, match="cuts the graph"):
        gradcheck(f, x, check_forward_ad=True, check_backward_ad=False)
