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


def _hook_log(lib):
    """What PyTorch-visible hook calls and graph structure ``a * a`` and ``a * b`` produce."""
    log = []
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: log.append("pack") or t,
                                                lambda t: log.append("unpack") or t):
        y = a * a
    packs = log.count("pack")
    other = y.grad_fn._saved_other.tolist()
    names = {id(a): "self", id(b): "other"}
    order = []
    with lib.autograd.graph.saved_tensors_hooks(lambda t: (names.get(id(t)), t),
                                                lambda p: order.append(p[0]) or p[1]):
        z = a * b
    z.sum().backward()
    y.sum().backward()
    return packs, other, order, a.grad.tolist(), b.grad.tolist()


def test_square_saves_self_and_other_and_unpacks_other_first():
    packs, other, order, ga, gb = _hook_log(fg)
    assert packs == 2 and other == [1.0, 2.0]
    assert order == ["other", "self"]
    assert ga == [3.0 + 2.0, 4.0 + 4.0] and gb == [1.0, 2.0]


def test_hooks_match_pytorch():
    torch = pytest.importorskip("torch")
    assert _hook_log(fg) == _hook_log(torch)


def _edges(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    c = lib.tensor([1.0, 2.0])
    exprs = [2 * a, a * 2, a + 1, 1 + a, a - 1, 1 - a, a / 2, 2 / a, a ** 2, 2 ** a, a * a,
             a + a, a * c, c - a, (a + 1) * 3]
    out = []
    for e in exprs:
        out.append(tuple(None if n is None else type(n).__name__ for n, _ in
                         e.grad_fn.next_functions))
    return out


def test_python_numbers_have_none_edges_as_pytorch():
    got = _edges(fg)
    assert got[0] == ("AccumulateGrad", None) and got[5] == ("AccumulateGrad",)
    assert got[10] == ("AccumulateGrad", "AccumulateGrad")
    torch = pytest.importorskip("torch")
    assert got == _edges(torch)


def test_generic_path_square_matches_fast_path():
    """A view operand takes the generic recording path: same edges and saved tensors."""
    base = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    packs = []
    with saved_tensors_hooks(lambda t: packs.append(1) or t, lambda t: t):
        v = base[1:]
        y = v * v
    assert len(y.grad_fn.next_functions) == 2 and len(packs) == 2
    (2 * v).sum().backward()
    y.sum().backward()
    assert base.grad.tolist() == [0.0, 2.0 + 4.0, 2.0 + 6.0]
