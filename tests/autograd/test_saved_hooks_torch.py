"""Saved-tensor hooks as PyTorch runs them: save_on_cpu, pack/unpack calls and order."""

import pytest

import fusegrad as fg
from fusegrad.autograd.graph import save_on_cpu, saved_tensors_hooks


def test_save_on_cpu_keeps_tensors_and_gradients():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with save_on_cpu(pin_memory=False):
        y = (x.sin() * x).sum()
    y.backward()
    expected = (x.detach().cos() * x.detach() + x.detach().sin()).tolist()
    assert x.grad.tolist() == pytest.approx(expected, rel=1e-6)


def test_save_on_cpu_packs_device_and_tensor():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with save_on_cpu():
        y = x.exp()
    packed = y.grad_fn._raw_saved_result
    assert packed is not None
    assert y.grad_fn._saved_result.tolist() == pytest.approx(x.detach().exp().tolist())


def test_save_on_cpu_nests_inside_other_hooks():
    packs = []
    with saved_tensors_hooks(lambda t: packs.append("outer") or t, lambda t: t), save_on_cpu():
        y = fg.tensor([2.0], requires_grad=True).exp()
    y.backward()
    assert packs == []  # the innermost hooks win, as in PyTorch
