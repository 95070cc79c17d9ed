"""Tensor APIs the autograd tutorials use, against PyTorch (when installed) and finite
differences: linspace's values, sort/argsort, index_add, diagonal, the top-level
in-place functions, Sequential item assignment, multi-grad and post-accumulate-grad
hooks and backward-pass callbacks."""

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import gradcheck, gradgradcheck
from fusegrad.eager.callbacks import queue_callback


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("start,end,steps", [(-math.pi, math.pi, 2000), (0, 1, 7), (-3, 10.5, 1001),
                                             (2, -1, 33), (0.1, 0.2, 2), (5, 5, 1), (0, 1, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linspace_matches_pytorch_bit_for_bit(start, end, steps, dtype):
    torch = _torch()
    want = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).numpy()
    got = fg.linspace(start, end, steps, dtype=getattr(fg, dtype)).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_linspace_ends_and_symmetry_without_torch():
    x = fg.linspace(-1.5, 2.5, 1001).numpy()
    assert x[0] == np.float32(-1.5) and x[-1] == np.float32(2.5)
    np.testing.assert_allclose(x, np.linspace(-1.5, 2.5, 1001), rtol=0, atol=4e-7)


@pytest.mark.parametrize("dim,descending", [(-1, False), (0, False), (1, True), (0, True)])
def test_sort_values_indices_and_gradient(dim, descending):
    x = np.random.default_rng(0).standard_normal((3, 5))
    x[0, 1] = x[0, 3]  # a tie: the earlier index comes first either way
    t = fg.tensor(x, requires_grad=True)
    values, indices = fg.sort(t, dim, descending=descending)
    order = np.argsort(-x if descending else x, axis=dim, kind="stable")
    assert indices.dtype == fg.int64 and np.array_equal(indices.numpy(), order)
    assert type(values.grad_fn).__name__ == "SortBackward0"
    np.testing.assert_array_equal(values.detach().numpy(), np.take_along_axis(x, order, dim))
    assert np.array_equal(t.argsort(dim, descending).numpy(), order)
    u = fg.tensor(np.random.default_rng(9).standard_normal((3, 5)), requires_grad=True)  # no ties
    assert gradcheck(lambda a: a.sort(dim, descending=descending).values, (u,))
    assert gradgradcheck(lambda a: (a.sort(dim, descending=descending).values ** 3), (u,))
    if descending is False:
        torch = _torch()
        _, ti = torch.sort(torch.tensor(x), dim=dim, stable=True)
        assert np.array_equal(ti.numpy(), indices.numpy())


def test_sort_of_integers_booleans_and_scalars():
    v, i = fg.tensor([3, 1, 2], dtype=fg.uint8).sort(descending=True)
    assert v.tolist() == [3, 2, 1] and i.tolist() == [0, 2, 1]
    assert fg.tensor([True, False, True]).argsort().tolist() == [1, 0, 2]
    v, i = fg.tensor(2.5).sort()
    assert v.item() == 2.5 and i.item() == 0 and i.dim() == 0


def test_index_add_matches_pytorch_and_finite_differences():
    base = np.arange(15.).reshape(5, 3)
    src = np.random.default_rng(1).standard_normal((4, 3))
    idx = [0, 2, 2, 4]
    out = fg.tensor(base).index_add(0, fg.tensor(idx), fg.tensor(src), alpha=2.0)
    want = base.copy()
    np.add.at(want, idx, 2.0 * src)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-15)
    b = fg.tensor(base, requires_grad=True)
    s = fg.tensor(src, requires_grad=True)
    f = lambda b, s: b.index_add(0, fg.tensor(idx), s, alpha=-1.5) ** 2  # noqa: E731
    assert gradcheck(f, (b, s)) and gradgradcheck(f, (b, s))
    z = fg.zeros(5)
    assert z.index_add_(0, fg.tensor([1, 1, 3]), fg.tensor([1., 2., 3.])) is z
    assert z.tolist() == [0., 3., 0., 3., 0.] and z._version == 1
    w = fg.zeros(2, 4)
    w.index_add_(1, fg.tensor([3, 0]), fg.ones(2, 2))
    assert w.tolist() == [[1., 0., 0., 1.], [1., 0., 0., 1.]]


def test_index_add_in_place_records_history():
    x = fg.tensor([1., 2., 3.], requires_grad=True)
    s = fg.tensor([4., 5.], requires_grad=True)
    y = x * 1
    y.index_add_(0, fg.tensor([2, 0]), s * s)
    y.sum().backward()
    assert x.grad.tolist() == [1., 1., 1.] and s.grad.tolist() == [8., 10.]
    assert type(y.grad_fn).__name__ == "IndexAddBackward0"


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 1, 2),
                                          (0, 2, 0), (-2, -1, 0), (9, 0, 1)])
def test_diagonal_matches_numpy_with_gradients(offset, d1, d2):
    x = np.random.default_rng(2).standard_normal((3, 4, 5))
    t = fg.tensor(x, requires_grad=True)
    got = fg.diagonal(t, offset, d1, d2)
    np.testing.assert_array_equal(got.detach().numpy(), np.diagonal(x, offset, d1, d2))
    if got.numel() == 0:  # nothing to check by differences; the gradient is all zeros
        got.sum().backward()
        assert not t.grad.numpy().any()
    else:  # random projections v^T J u (the full Jacobians of 60 inputs took seconds)
        assert gradcheck(lambda a: a.diagonal(offset, d1, d2) * 2, (t,), fast_mode=True)
        assert gradgradcheck(lambda a: a.diagonal(offset, d1, d2) ** 2, (t,), fast_mode=True)
    with pytest.raises(RuntimeError, match="cannot be identical"):
        t.diagonal(0, 1, 1)


def test_top_level_inplace_functions():
    x = fg.tensor([0.5, 1.0])
    assert fg.sin_(x) is x and np.allclose(x.numpy(), np.sin([0.5, 1.0]))
    assert fg.exp_(x) is x and x._version == 2
    fg.zero_(x)
    assert x.tolist() == [0., 0.]
    leaf = fg.linspace(0, 1, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fg.sin_(leaf)


def test_sequential_item_assignment():
    model = fg.nn.Sequential(fg.nn.Linear(2, 3), fg.nn.ReLU(), fg.nn.Linear(3, 1))
    head = fg.nn.Linear(3, 4)
    model[-1] = head
    assert model[2] is head and [n for n, _ in model.named_parameters()][-2:] == [
        "2.weight", "2.bias"]
    assert tuple(model(fg.ones(5, 2)).shape) == (5, 4)
    with pytest.raises(IndexError):
        model[3] = head


def test_multi_grad_hook_all_and_any():
    a, b, c = (fg.tensor([1., 2.], requires_grad=True) for _ in range(3))
    seen = []
    h = fg.autograd.graph.register_multi_grad_hook((a, b, c), lambda gs: seen.append(
        [None if g is None else g.tolist() for g in gs]))
    (a * b * 3).sum().backward()
    assert seen == [[[3., 6.], [3., 6.], None]]
    (c * 2).sum().backward()
    assert seen[-1] == [None, None, [2., 2.]]
    h.remove()
    (a * b).sum().backward()
    assert len(seen) == 2
    firsts = []
    h = fg.autograd.graph.register_multi_grad_hook((a, b), lambda g: firsts.append(g.tolist()),
                                                   mode="any")
    (a * b).sum().backward()
    (a * b).sum().backward()
    assert len(firsts) == 2 and firsts[0] in ([1., 2.],)  # one call per pass
    h.remove()
    with pytest.raises(ValueError):
        fg.autograd.graph.register_multi_grad_hook((a,), print, mode="some")


def test_post_accumulate_grad_hook_runs_after_accumulation():
    w = fg.tensor([1., -2.], requires_grad=True)
    log = []

    def step(p):
        log.append(p.grad.tolist())
        with fg.no_grad():
            p -= 0.5 * p.grad
        p.grad = None

    h = w.register_post_accumulate_grad_hook(step)
    for _ in range(2):
        (w * w).sum().backward()
    assert log == [[2., -4.], [0., 0.]] and w.tolist() == [0., 0.] and w.grad is None
    fg.autograd.grad((w * w).sum(), w)  # no accumulation, no hook
    assert len(log) == 2
    h.remove()
    (w * 3).sum().backward()
    assert len(log) == 2 and w.grad.tolist() == [3., 3.]
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(step)


def test_queue_callback_runs_at_the_end_of_the_pass():
    x = fg.tensor(2.0, requires_grad=True)
    order = []
    x.register_hook(lambda g: queue_callback(lambda: order.append(("end", x.grad))) or
                    order.append("hook"))
    (x * x).backward()
    assert order[0] == "hook" and order[1][0] == "end" and order[1][1].item() == 4.0
    with pytest.raises(RuntimeError, match="during the backward pass"):
        queue_callback(lambda: None)


def test_new_apis_under_jit():
    """sort, index_add and diagonal trace into a compiled step like other ops."""
    x = fg.tensor(np.random.default_rng(3).standard_normal((4, 4)), requires_grad=True)

    @fg.jit
    def f(a):
        v = a.sort(1).values
        d = a.diagonal(1)
        return (v[:, :3] * d).sum() + a.index_add(0, fg.tensor([1, 1]), a[:2] ** 2).sum()

    eager = f.f(x)
    eager.backward()
    g_eager = x.grad.clone()
    x.grad = None
    compiled = f(x)
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-12)
    compiled.backward()
    np.testing.assert_allclose(x.grad.numpy(), g_eager.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_sort_three_dimensional(dim):
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    t = fg.tensor(x, requires_grad=True)
    values, indices = t.sort(dim)
    np.testing.assert_array_equal(values.detach().numpy(), np.sort(x, axis=dim))
    np.testing.assert_array_equal(indices.numpy(), np.argsort(x, axis=dim, kind="stable"))
    assert gradcheck(lambda a: a.sort(dim).values.exp(), (t,))
