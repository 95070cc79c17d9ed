"""fg.autograd.functional: values and return structures as torch.autograd.functional."""

import time

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import functional as F

XN = np.array([0.5, 1.5, -0.3])
YN = np.array([[0.2, 1.1], [0.4, 0.9]])


def _xy(lib):
    return lib.tensor(XN, dtype=lib.float64), lib.tensor(YN, dtype=lib.float64)


def pair(x, y):
    return x.sin() * y.sum(), (x * x).sum() * y


def scalar(x, y):
    return (x.sin() * x).sum() * y.exp().sum()


def _same(a, b):
    """Equal nested structure (tuple vs Tensor, lengths, shapes) and values."""
    if isinstance(b, tuple):
        assert isinstance(a, tuple) and len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)
        return
    assert not isinstance(a, tuple) and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                               atol=1e-13)


CALLS = {
    "jacobian_tuple_tuple": lambda lib, M: M.jacobian(pair, _xy(lib)),
    "jacobian_tensor_tensor": lambda lib, M: M.jacobian(lambda x: x.exp() * x.sum(),
                                                        _xy(lib)[0]),
    "jacobian_tuple_out": lambda lib, M: M.jacobian(lambda x: (x.exp(), x.sum()), _xy(lib)[0]),
    "jacobian_tuple_in": lambda lib, M: M.jacobian(scalar, _xy(lib)),
    "jacobian_unused_input": lambda lib, M: M.jacobian(lambda x, y: x * 2, _xy(lib)),
    "hessian_tuple": lambda lib, M: M.hessian(scalar, _xy(lib)),
    "hessian_tensor": lambda lib, M: M.hessian(lambda x: (x ** 3).sum() * x.prod(),
                                               _xy(lib)[0]),
    "vjp": lambda lib, M: M.vjp(pair, _xy(lib), _xy(lib)),
    "vjp_scalar_no_v": lambda lib, M: M.vjp(scalar, _xy(lib)),
    "jvp": lambda lib, M: M.jvp(pair, _xy(lib), _xy(lib)),
    "jvp_tensor": lambda lib, M: M.jvp(lambda x: x.exp(), _xy(lib)[0], _xy(lib)[0]),
    "hvp": lambda lib, M: M.hvp(scalar, _xy(lib), _xy(lib)),
    "vhp": lambda lib, M: M.vhp(scalar, _xy(lib), _xy(lib)),
    "vhp_tensor": lambda lib, M: M.vhp(lambda x: (x ** 4).sum(), _xy(lib)[0], _xy(lib)[0]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    _same(CALLS[name](fg, F), CALLS[name](torch, TF))


def test_jacobian_by_hand_without_torch():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64)
    j = F.jacobian(lambda t: fg.stack([t[0] * t[1], t[0] ** 2]), x)
    assert j.tolist() == [[2.0, 1.0], [2.0, 0.0]] and not j.requires_grad
    h = F.hessian(lambda t: t[0] ** 2 * t[1], x)
    assert h.tolist() == [[4.0, 2.0], [2.0, 0.0]]


def test_strict_rejects_independent_outputs():
    x, y = _xy(fg)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    assert F.jacobian(lambda a, b: a * 2, (x, y))[1].abs().sum().item() == 0


def test_create_graph_keeps_history():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    j = F.jacobian(lambda t: t ** 3, x, create_graph=True)
    assert j.requires_grad
    j.sum().backward()  # d/dx of sum(diag(3x^2)) = 6x
    assert x.grad.tolist() == [6.0, 12.0]
    out, v = F.vjp(lambda t: (t ** 2).sum(), x)
    assert not out.requires_grad and not v.requires_grad and v.tolist() == [2.0, 4.0]


def test_bad_arguments_raise_as_pytorch():
    x, _ = _xy(fg)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.jacobian(lambda a: a.sum().item(), x)
    with pytest.raises(RuntimeError, match="v can only be None"):
        F.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="single element"):
        F.hessian(lambda a: a * 2, x)
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        F.jacobian(lambda a: a, x, strategy="forward-mode")


def test_eager_jacobian_is_not_slower_than_ten_x_the_compiled_one():
    """Measure both: the eager engine (one backward per row) and fg.jacobian (compiled)."""
    x = fg.tensor(np.linspace(0.1, 1.0, 20), dtype=fg.float64)
    xs = x.numpy()
    fn = fg.jacobian(lambda a: np.tanh(a) * np.sum(a))
    F.jacobian(lambda a: a.tanh() * a.sum(), x)
    fn(xs)
    t0 = time.perf_counter()
    je = F.jacobian(lambda a: a.tanh() * a.sum(), x)
    t1 = time.perf_counter()
    jc = fn(xs)
    t2 = time.perf_counter()
    np.testing.assert_allclose(je.numpy(), jc, rtol=1e-12)
    assert t1 - t0 < 1.0 and t2 - t1 < 1.0
