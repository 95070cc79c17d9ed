"""Compiled pieces inside eager graphs: ``CompiledFunctionBackward``.

``fg.jit(model)(x)`` with parameters (or ``x``) that require grad returns
Tensors with one ``CompiledFunctionBackward`` node running the compiled VJP.
Gradients are compared with the same model run eagerly ("exact64" / "f32")
and, once, with central finite differences ("fd"). Tests run the traced
functions with the NumPy interpreter unless marked ``compiled``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from tests.helpers import FD_STEP, assert_close

pytestmark = pytest.mark.usefixtures("default_float64")


def _models(seed: int = 0):
    fg.manual_seed(seed)
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    return m, copy.deepcopy(m)


def _x(dtype=np.float64, seed: int = 2):
    return np.random.default_rng(seed).normal(size=(4, 3)).astype(dtype)


def _assert_same_grads(m_eager, m_jit, kind="exact64"):
    for (name, p1), p2 in zip(m_eager.named_parameters(), m_jit.parameters()):
        assert p2.grad is not None, name
        assert_close(p2.grad.numpy(), p1.grad.numpy(), kind, name)


def _check_against_eager(kind, dtype):
    m1, m2 = _models()
    jm = fg.jit(m2)
    x1 = fg.tensor(_x(dtype), requires_grad=True)
    x2 = fg.tensor(_x(dtype), requires_grad=True)
    out = jm(x2)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    assert out.requires_grad and out.dtype == x2.dtype
    assert_close(out.detach().numpy(), m1(x1).detach().numpy(), kind)
    (jm(x2) ** 2).sum().backward()
    (m1(x1) ** 2).sum().backward()
    _assert_same_grads(m1, m2, kind)
    assert_close(x2.grad.numpy(), x1.grad.numpy(), kind, "x")


def test_grads_match_the_eager_model():
    _check_against_eager("exact64", np.float64)


def test_grads_match_the_eager_model_float32():
    fg.set_default_dtype(fg.float32)
    _check_against_eager("f32", np.float32)


@pytest.mark.compiled
def test_compiled_grads_match_the_eager_model():
    _check_against_eager("exact64", np.float64)


@pytest.mark.compiled
def test_compiled_grads_match_the_eager_model_float32():
    fg.set_default_dtype(fg.float32)
    _check_against_eager("f32", np.float32)


def test_grad_against_finite_differences():
    _, m = _models()
    jm = fg.jit(m)
    x0 = _x()
    rng = np.random.default_rng(5)
    u = rng.uniform(-1, 1, size=x0.shape)

    def f(x):
        with fg.no_grad():
            return float((jm(fg.tensor(x)) ** 3).sum())

    x = fg.tensor(x0, requires_grad=True)
    (jm(x) ** 3).sum().backward()
    h = FD_STEP * max(1.0, np.abs(x0).max())
    fd = (-f(x0 + 2 * h * u) + 8 * f(x0 + h * u) - 8 * f(x0 - h * u) + f(x0 - 2 * h * u)) / (
        12 * h)
    assert_close(np.sum(x.grad.numpy() * u), fd, "fd")


def test_hooks_on_outputs_and_inputs():
    m1, m2 = _models()
    jm = fg.jit(m2)
    seen = []
    x1 = fg.tensor(_x(), requires_grad=True)
    x2 = fg.tensor(_x(), requires_grad=True)
    x2.register_hook(lambda g: seen.append(g.numpy().copy()))
    out = jm(x2)
    out.register_hook(lambda g: g * 2)  # doubles the gradient flowing into the compiled node
    out.sum().backward()
    (m1(x1) * 2).sum().backward()
    _assert_same_grads(m1, m2)
    assert len(seen) == 1
    assert_close(seen[0], x1.grad.numpy(), "exact64")


def test_retain_graph_as_eager():
    _, m = _models()
    jm = fg.jit(m)
    x = fg.tensor(_x(), requires_grad=True)
    loss = jm(x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    assert_close(x.grad.numpy(), 2 * first, "exact64")
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_mixing_compiled_and_eager_nodes():
    m1, m2 = _models()
    head1, head2 = _models(seed=3)
    jm, jhead = fg.jit(m2), fg.jit(head2[2])
    x1 = fg.tensor(_x(), requires_grad=True)
    x2 = fg.tensor(_x(), requires_grad=True)

    def net(x, body, head_last):
        h = (x * 2 + 1).tanh()  # eager
        h = body(h)  # compiled (or eager)
        h = fg.cat([h, h.sin(), h[:, :1]], dim=1)  # eager
        return (head_last(h) ** 2).mean()  # compiled (or eager) then eager

    net(x2, jm, jhead).backward()
    net(x1, m1, head1[2]).backward()
    _assert_same_grads(m1, m2)
    _assert_same_grads(head1[2], head2[2])
    assert_close(x2.grad.numpy(), x1.grad.numpy(), "exact64", "x")


def test_create_graph_gives_higher_derivatives():
    m1, m2 = _models()
    jm = fg.jit(m2)
    x1 = fg.tensor(_x(), requires_grad=True)
    x2 = fg.tensor(_x(), requires_grad=True)
    (g2,) = fg.autograd.grad((jm(x2) ** 2).sum(), x2, create_graph=True)
    (g1,) = fg.autograd.grad((m1(x1) ** 2).sum(), x1, create_graph=True)
    assert g2.grad_fn is not None
    assert_close(g2.detach().numpy(), g1.detach().numpy(), "exact64")
    (g2 ** 2).sum().backward()
    (g1 ** 2).sum().backward()
    _assert_same_grads(m1, m2)


def test_in_place_change_of_a_saved_input_is_detected():
    _, m = _models()
    jm = fg.jit(m)
    loss = jm(fg.tensor(_x())).sum()
    with fg.no_grad():
        m[0].weight.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_no_grad_and_non_differentiable_outputs():
    _, m = _models()

    @fg.jit
    def f(x):
        y = m(x)
        return y, y.argmax(dim=1)

    with fg.no_grad():
        y, idx = f(fg.tensor(_x()))
    assert not y.requires_grad and y.grad_fn is None
    y, idx = f(fg.tensor(_x()))
    assert y.requires_grad and type(y.grad_fn).__name__ == "CompiledFunctionBackward"
    assert not idx.requires_grad and idx.dtype == fg.int64
    y.sum().backward()
    assert m[0].weight.grad is not None


W_GLOBAL = None  # set by the test below: a Tensor the jitted function names as a global


def _uses_global(x):
    return (x @ W_GLOBAL).tanh().sum()


def test_plain_function_of_tensors_and_a_named_global_tensor():
    global W_GLOBAL
    rng = np.random.default_rng(7)
    w0, x0 = rng.normal(size=(3, 2)), _x()
    W_GLOBAL = fg.tensor(w0, requires_grad=True)
    x = fg.tensor(x0, requires_grad=True)
    f = fg.jit(_uses_global)
    f(x)  # the first call runs eagerly (nothing but a Tensor is named)
    out = f(x)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    out.backward()
    w_ref, x_ref = fg.tensor(w0, requires_grad=True), fg.tensor(x0, requires_grad=True)
    (x_ref @ w_ref).tanh().sum().backward()
    assert_close(W_GLOBAL.grad.numpy(), w_ref.grad.numpy(), "exact64")
    assert_close(x.grad.numpy(), x_ref.grad.numpy(), "exact64")


def test_static_argnums_on_the_eager_path():
    m1, m2 = _models()

    def apply(model, x, power):
        return (model(x) ** power).sum()

    f = fg.jit(apply, static_argnums=2)
    for power in (2, 3, 2):
        for m in (m1, m2):
            m.zero_grad()
        x = fg.tensor(_x())
        f(m2, x, power).backward()
        apply(m1, x, power).backward()
        _assert_same_grads(m1, m2)
    assert len(f._eager.cache) == 2


def test_a_hidden_tensor_that_requires_grad_is_refused_clearly():
    hidden = [fg.tensor([1.0, 2.0], requires_grad=True)]  # inside a list: not found

    def f(x):
        return x * hidden[0]

    with pytest.raises(fg.GradError, match="Pass it as an argument"):
        fg.jit(f)(np.ones(2))


def test_one_compiled_model_twice_in_a_graph_accumulates():
    m1, m2 = _models()
    jm = fg.jit(m2)
    xa, xb = fg.tensor(_x(seed=3)), fg.tensor(_x(seed=4))
    for _ in range(3):  # .grad exists from the second iteration on: it accumulates
        (jm(xa).sum() + (jm(xb) ** 2).sum()).backward()
        (m1(xa).sum() + (m1(xb) ** 2).sum()).backward()
        _assert_same_grads(m1, m2)
