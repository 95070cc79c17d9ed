"""jacobian / hessian with vectorize=True (one batched program) and strategy="forward-mode":
the same values as vectorize=False and as PyTorch's vectorized Jacobians."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import batched as B
from fusegrad.autograd import functional as F

XN = np.array([0.5, 1.5, -0.3])
YN = np.array([[0.2, 1.1], [0.4, 0.9]])


def _xy(lib):
    return lib.tensor(XN, dtype=lib.float64), lib.tensor(YN, dtype=lib.float64)


def pair(x, y):
    return x.sin() * y.sum(), (x * x).sum() * y


def scalar(x, y):
    return (x.sin() * x).sum() * y.exp().sum()


def branchy(x):
    """Python control flow on a tensor value: only the backward can be traced."""
    if x.sum() > 0:
        return x.tanh() * x.sum()
    return x * 2


JACOBIANS = {
    "tuple_tuple": (pair, "xy"),
    "tensor_tensor": (lambda x: x.exp() * x.sum(), "x"),
    "tuple_out": (lambda x: (x.exp(), x.sum()), "x"),
    "tuple_in": (scalar, "xy"),
    "unused_input": (lambda x, y: x * 2, "xy"),
    "matmul": (lambda x, y: (y @ x[:2]).tanh() * x[2], "xy"),
    "branchy": (branchy, "x"),
    "detached": (lambda x: (x.detach() * x, x.detach() * 2), "x"),
    "no_grad_inside": (lambda x, y: _no_grad_scale(x) * y.sum(), "xy"),
}


def _no_grad_scale(x):
    """x times a factor computed without recording (a constant to autograd)."""
    lib = __import__("torch") if type(x).__module__.startswith("torch") else fg
    with lib.no_grad():
        s = x.exp().sum()
    return x * s


def _args(lib, which):
    x, y = _xy(lib)
    return (x, y) if which == "xy" else x


def _same(a, b, rtol=1e-12):
    """Equal structure and values; PyTorch's forward-mode Jacobian of tuple inputs has
    lists where its reverse mode (and fusegrad) has tuples."""
    if isinstance(b, tuple | list):
        assert isinstance(a, tuple) and len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q, rtol)
        return
    assert not isinstance(a, tuple) and tuple(a.shape) == tuple(b.shape)
    assert not a.requires_grad
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-13)


@pytest.fixture
def no_fallback(monkeypatch):
    """Fail if the per-row eager path is taken."""
    def refuse(*args, **kwargs):
        raise AssertionError("the per-row path ran")
    monkeypatch.setattr(F, "_jacobian_rows", refuse)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("name", sorted(JACOBIANS))
def test_vectorized_equals_rows_and_pytorch(name, strategy, monkeypatch):
    f, which = JACOBIANS[name]
    rows = F.jacobian(f, _args(fg, which))
    if not (name in ("branchy", "detached", "no_grad_inside") and strategy == "forward-mode"):
        monkeypatch.setattr(F, "_jacobian_rows", None)  # must not be needed
    got = F.jacobian(f, _args(fg, which), vectorize=True, strategy=strategy)
    _same(got, rows)
    if name == "no_grad_inside" and strategy == "forward-mode":
        return  # PyTorch's forward AD ignores no_grad: see the test below
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    want = TF.jacobian(f, _args(torch, which), vectorize=True, strategy=strategy)
    _same(got, want)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize("which", ["xy", "x"])
def test_vectorized_hessian(which, strategy, no_fallback):
    f = scalar if which == "xy" else (lambda x: (x ** 3).sum() * x.prod())
    got = F.hessian(f, _args(fg, which), vectorize=True, outer_jacobian_strategy=strategy)
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    _same(got, TF.hessian(f, _args(torch, which), vectorize=True,
                          outer_jacobian_strategy=strategy))


def test_vectorized_matches_finite_differences_without_torch(no_fallback):
    """Central differences of f and (second order) of its gradient."""
    x = fg.tensor(np.array([0.3, -0.7, 1.1, 0.2]), dtype=fg.float64)

    def f(t):
        return (t.sin() * t.sum()).exp()

    def s(t):
        return (t.sin() * t.sum()).exp().sum()

    eps = 1e-6
    fd = np.stack([(f(x + eps * e).numpy() - f(x - eps * e).numpy()) / (2 * eps)
                   for e in map(fg.tensor, np.eye(4))], axis=1)
    for strategy in ("reverse-mode", "forward-mode"):
        j = F.jacobian(f, x, vectorize=True, strategy=strategy)
        np.testing.assert_allclose(j.numpy(), fd, rtol=1e-6, atol=1e-8)
    eps = 1e-4

    def grad_s(t):
        return F.vjp(s, t)[1].numpy()

    fd2 = np.stack([(grad_s(x + eps * e) - grad_s(x - eps * e)) / (2 * eps)
                    for e in map(fg.tensor, np.eye(4))], axis=1)
    np.testing.assert_allclose(F.hessian(s, x, vectorize=True).numpy(), fd2, rtol=1e-5,
                               atol=1e-7)


def _cube(lib, off):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a ** 2 * g + off * g.sum()  # off != 0: a deliberately odd backward

    return Cube.apply


def test_custom_backward_is_the_one_batched(no_fallback):
    """The batched program is the eager backward: a hand-written backward, even a wrong
    one, gives the same Jacobian as vectorize=False (and as PyTorch's vmap)."""
    x = fg.tensor(XN, dtype=fg.float64)
    got = F.jacobian(_cube(fg, 0.5), x, vectorize=True)
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    want = TF.jacobian(_cube(torch, 0.5), torch.tensor(XN), vectorize=True)
    _same(got, want)


def test_untraceable_backward_falls_back_with_the_same_values():
    class ItemBackward(fg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * 2 * a * float(g.sum().item() > -100)  # a value of g: not batchable

    x = fg.tensor(XN, dtype=fg.float64)
    with pytest.raises(B.NotTraceable, match="item"):
        xs = (x.detach().requires_grad_(True),)
        B.batched_vjp((ItemBackward.apply(xs[0]),), xs, [np.eye(3)])
    _same(F.jacobian(ItemBackward.apply, x, vectorize=True), F.jacobian(ItemBackward.apply, x))
    # forward mode cannot go through a custom Function: the eager path answers
    _same(F.jacobian(_cube(fg, 0.0), x, vectorize=True, strategy="forward-mode"),
          F.jacobian(_cube(fg, 0.0), x))


@pytest.mark.compiled
def test_closed_over_values_are_current(no_fallback, monkeypatch):
    monkeypatch.setattr(B, "COMPILE_AFTER", 2)
    w = fg.tensor(YN, dtype=fg.float64)
    scale = [2.0]

    def f(x):
        return (w @ x[:2]) * scale[0]

    x = fg.tensor(XN, dtype=fg.float64)
    for strategy in ("reverse-mode", "forward-mode"):
        for _ in range(3):  # the third call runs the compiled program
            j = F.jacobian(f, x, vectorize=True, strategy=strategy)
            np.testing.assert_allclose(j.numpy()[:, :2], w.numpy() * scale[0], rtol=1e-14)
            with fg.no_grad():
                w.mul_(1.5)
            scale[0] += 1.0


@pytest.mark.compiled
def test_compiled_program_is_used(monkeypatch, no_fallback):
    monkeypatch.setattr(B, "COMPILE_AFTER", 1)
    monkeypatch.setattr(B, "_cache", type(B._cache)())
    x = fg.tensor(np.linspace(0.1, 1.0, 7), dtype=fg.float64)
    for strategy in ("reverse-mode", "forward-mode"):
        got = F.jacobian(lambda t: t.tanh() * t.sum(), x, vectorize=True, strategy=strategy)
        t = x.numpy()
        want = np.diag(1 - np.tanh(t) ** 2) * t.sum() + np.tanh(t)[:, None]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert len(B._cache) == 2 and all(e[2] not in (None, False) for e in B._cache.values())


def test_create_graph_uses_the_differentiable_path():
    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    j = F.jacobian(lambda t: t ** 3, x, create_graph=True, vectorize=True)
    assert j.requires_grad
    j.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]


def test_refusals_as_pytorch():
    x, y = _xy(fg)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
        F.jacobian(pair, (x, y), strict=True, vectorize=True)
    with pytest.raises(RuntimeError, match='`strict=True` and `strategy="forward-mode"`'):
        F.jacobian(pair, (x, y), strict=True, vectorize=True, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match='`create_graph=True` and `strategy="forw'):
        F.jacobian(pair, (x, y), create_graph=True, vectorize=True, strategy="forward-mode")
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    tx, ty = _xy(torch)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True`"):
        TF.jacobian(pair, (tx, ty), strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match='`create_graph=True` and `strategy="forw'):
        TF.jacobian(pair, (tx, ty), create_graph=True, vectorize=True, strategy="forward-mode")


def test_hooks_see_concrete_gradients():
    """A graph with hooks is not traced (a hook would receive traced gradients): the
    per-row path runs them with values, and the Jacobian is the same."""
    seen = []

    def f(x):
        y = x.sin()
        y.register_hook(lambda g: seen.append(g.numpy().copy()))
        return y * x.sum()

    x = fg.tensor(XN, dtype=fg.float64)
    j = F.jacobian(f, x, vectorize=True)
    assert len(seen) == 3 and all(isinstance(g, np.ndarray) for g in seen)
    _same(j, F.jacobian(lambda t: t.sin() * t.sum(), x, vectorize=True))


def test_forward_mode_through_no_grad_is_the_graphs_jacobian():
    """PyTorch's dual tensors carry tangents through ``no_grad`` blocks, so its
    forward-mode Jacobian differs there from its reverse-mode one; fusegrad's forward mode
    (a trace, which sees neither ``no_grad`` nor ``detach``) falls back to the eager graph
    and gives the reverse-mode Jacobian."""
    f, _ = JACOBIANS["no_grad_inside"]
    got = F.jacobian(f, _xy(fg), vectorize=True, strategy="forward-mode")
    _same(got, F.jacobian(f, _xy(fg)))
    x = XN
    np.testing.assert_allclose(got[0].numpy(), np.eye(3) * np.exp(x).sum() * YN.sum(),
                               rtol=1e-13)
    torch = pytest.importorskip("torch")
    import torch.autograd.functional as TF

    tx = _xy(torch)
    _same(got, TF.jacobian(f, tx))
    fwd = TF.jacobian(f, tx, vectorize=True, strategy="forward-mode")
    assert not np.allclose(fwd[0].numpy(), got[0].numpy())


def test_a_program_that_cannot_be_batched_takes_the_per_row_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise fg.BatchingError("no batching rule for this op")

    monkeypatch.setattr(B, "batch", refuse)
    monkeypatch.setattr(B, "_cache", type(B._cache)())
    x = fg.tensor(XN, dtype=fg.float64)
    f = JACOBIANS["tensor_tensor"][0]
    with pytest.raises(B.NotTraceable, match="no batching rule"):
        xs = (x.detach().requires_grad_(True),)
        B.batched_vjp((f(xs[0]),), xs, [np.eye(3)])
    for strategy in ("reverse-mode", "forward-mode"):
        _same(F.jacobian(f, x, vectorize=True, strategy=strategy), F.jacobian(f, x))
    from fusegrad.autograd import GradcheckError, gradcheck

    x64 = fg.tensor(XN, dtype=fg.float64, requires_grad=True)
    with pytest.raises(GradcheckError, match="While computing batched gradients, got: Batch"):
        gradcheck(f, (x64,), check_batched_grad=True)
