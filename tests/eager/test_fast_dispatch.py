"""The eager per-op fast dispatch (``fast.run1``/``run2``) and the one-root backward walk.

* The walk ``backward()`` takes for one implicit root (``engine._execute_one``) runs
  nodes in the order of the general walk and of PyTorch, and gives its gradients.
* Saved-tensor hooks see the same packs and unpacks, in the same order, on fast nodes
  as on the generic path; version-counter and freed-graph errors still fire.
* Number operands (``x * 3.0``) are kept as numbers and read as arrays of the op's
  dtype; first and second derivatives match finite differences.
* ``plain()`` defers to ``handler_for`` when an ambient handler it does not know is
  registered; the 2-D ``matmul`` fast path; the implicit root gradient is a fresh array.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.eager import engine, fast
from tests.helpers import assert_close, numeric_grads

RNG = np.random.default_rng(11)
bind = importlib.import_module("fusegrad.ir.bind")  # the module (``ir.bind`` is the function)


def _generic(monkeypatch):
    for name in ("run", "run1", "run2"):
        monkeypatch.setattr(fast, name, lambda *args, **kwargs: None)


def _diamond(x):
    y = x * 2.0
    a = y.sin()
    b = y.exp()
    return (a * b + a - b.tanh()).sum()


def _order(x, run):
    """Names of the nodes backward runs, in order (node pre-hooks record them)."""
    seen = []
    z = _diamond(x)
    stack, nodes = [z.grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or n in nodes:
            continue
        nodes.add(n)
        n.register_prehook(lambda g, n=n: seen.append(type(n).__name__))
        stack.extend(m for m, _ in n.next_functions)
    run(z)
    return seen


def test_one_root_walk_runs_nodes_in_the_general_order_and_torch_order():
    a = RNG.standard_normal(5)
    x1 = fg.tensor(a, requires_grad=True)
    fast_order = _order(x1, lambda z: z.backward())
    x2 = fg.tensor(a, requires_grad=True)
    # an explicit gradient takes the general walk (engine.execute)
    general = _order(x2, lambda z: fg.autograd.backward(z, fg.tensor(1.0, dtype=fg.float64)))
    assert fast_order == general
    assert len(fast_order) == 9  # 8 operations and the leaf's AccumulateGrad
    np.testing.assert_array_equal(x1.grad.numpy(), x2.grad.numpy())
    y = 2 * a
    expect = 2 * (np.cos(y) * np.exp(y) + np.sin(y) * np.exp(y) + np.cos(y)
                  - (1 - np.tanh(np.exp(y)) ** 2) * np.exp(y))
    assert_close(x1.grad.numpy(), expect, "exact64")
    torch = pytest.importorskip("torch")
    tx = torch.tensor(a, requires_grad=True)
    assert _order(tx, lambda z: z.backward()) == fast_order


def test_one_root_walk_with_hooks_retain_grad_and_retain_graph():
    x = fg.tensor(RNG.standard_normal(4), requires_grad=True)
    y = x * 3.0
    y.retain_grad()
    calls = []
    y.register_hook(lambda g: calls.append("y") or g * 2)
    x.register_hook(lambda g: calls.append("x"))
    z = y.tanh().sum()
    z.backward(retain_graph=True)
    ref = 2 * 3 * (1 - np.tanh(3 * x.detach().numpy()) ** 2)
    assert_close(x.grad.numpy(), ref, "exact64")
    assert_close(y.grad.numpy(), ref / 3, "exact64")  # retain_grad runs after the hooks
    z.backward()
    assert_close(x.grad.numpy(), 2 * ref, "exact64")
    assert calls == ["y", "x", "y", "x"]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.backward()


def test_implicit_root_gradient_is_a_fresh_array_each_time():
    x = fg.tensor(RNG.standard_normal(3), requires_grad=True)
    z = (x * 1.0).sum()
    z.register_hook(lambda g: g.add_(1.0))  # writes into the root gradient
    for k in (1, 2, 3):
        z.backward(retain_graph=True)
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 2.0 * k))


def test_version_counter_error_on_fast_nodes_through_the_one_root_walk():
    x = fg.tensor(RNG.standard_normal(4), requires_grad=True)
    y = x * 1.0
    z = (y * y).sum()
    with fg.no_grad():
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def _pack_log(fn, x, y):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    with fg.autograd.graph.saved_tensors_hooks(pack, unpack):
        z = fn(x, y)
    z.backward()
    return log, x.grad.numpy().copy(), y.grad.numpy().copy()


@pytest.mark.parametrize("fn", [lambda x, y: (x * y).sum(), lambda x, y: (x @ y).sum(),
                                lambda x, y: (x.tanh() * 2.0 + y.exp()).sum()],
                         ids=["mul", "mm", "chain"])
def test_saved_tensor_hooks_on_fast_nodes_equal_the_generic_path(fn, monkeypatch):
    a, b = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3))
    got = _pack_log(fn, fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True))
    with monkeypatch.context() as m:
        _generic(m)
        ref = _pack_log(fn, fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True))
    assert got[0] == ref[0] and len(got[0]) > 0
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[2], ref[2])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_number_operands_are_read_in_the_ops_dtype(dtype):
    x = fg.tensor(RNG.standard_normal(4).astype(dtype), requires_grad=True)
    y = x * 0.1
    assert isinstance(y.grad_fn, fast.FastNode)
    (entry,) = y.grad_fn._entries
    const = entry.slots[1]
    assert isinstance(const, np.ndarray) and const.dtype == dtype and const == dtype(0.1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, dtype(0.1)))
    assert x.grad.dtype == y.dtype


@pytest.mark.parametrize("f", [lambda x: (x * 3.0) ** 2.0 - 1.5 / (x + 4.0),
                               lambda x: (2.0 - x).tanh() * (x / 3.0)],
                         ids=["mul_pow_div", "rsub_div"])
def test_number_operand_gradients_to_second_order(f):
    a = RNG.uniform(0.5, 1.5, 3)

    def value(arr):
        return float(f(fg.tensor(arr)).sum())

    def first(arr, k):
        x = fg.tensor(arr, requires_grad=True)
        (g,) = fg.autograd.grad(f(x).sum(), x, create_graph=True)
        return g, x

    g, x = first(a, 0)
    assert_close(g.detach().numpy(), numeric_grads(value, [a])[0], "fd")
    for k in range(3):  # row k of the Hessian
        g, x = first(a, k)
        (h,) = fg.autograd.grad(g[k], x)
        fd = numeric_grads(lambda arr, k=k: float(first(arr, k)[0][k]), [a])[0]
        assert_close(h.numpy(), fd, "fd")


class _Recorder:
    def __init__(self, handler):
        self.handler = handler
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.handler


def test_unknown_ambient_handlers_are_asked():
    x = fg.tensor(RNG.standard_normal(3), requires_grad=True)
    idle = _Recorder(None)
    bind._AMBIENT.append(idle)
    try:
        y = x * 2.0
        assert isinstance(y.grad_fn, fast.FastNode) and idle.calls >= 1
        assert not fast.plain() or idle.calls >= 2
    finally:
        bind._AMBIENT.remove(idle)
    assert fast.plain()
    seen = []

    def handler(opdef, operands, attrs, regions):
        seen.append(opdef.name)
        return bind.eval_numpy(opdef, operands, attrs, regions)

    busy = _Recorder(handler)
    bind._AMBIENT.append(busy)
    try:
        assert not fast.plain()
        assert fast.run2("mul", "mul", x, 2.0) is None  # the fast path declines
        assert fast.run1("tanh", "tanh", x) is None
    finally:
        bind._AMBIENT.remove(busy)
    assert fast.plain() and isinstance((x * 2.0).grad_fn, fast.FastNode)


def test_mm_fast_path_values_names_and_gradients():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    x, y = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    z = x @ y
    assert isinstance(z.grad_fn, fast.FastNode) and type(z.grad_fn).__name__ == "MmBackward0"
    assert [type(n).__name__ for n, _ in z.grad_fn.next_functions] == ["AccumulateGrad"] * 2
    np.testing.assert_array_equal(z.detach().numpy(), a @ b)
    g = RNG.standard_normal((3, 2))
    z.backward(fg.tensor(g))
    assert_close(x.grad.numpy(), g @ b.T, "exact64")
    assert_close(y.grad.numpy(), a.T @ g, "exact64")
    with pytest.raises(RuntimeError, match="same dtype"):
        x @ fg.tensor(b.astype(np.float32))


def test_full_sum_fast_path_for_each_rank():
    for shape in [(5,), (2, 3), (2, 1, 3)]:
        a = RNG.standard_normal(shape)
        x = fg.tensor(a, requires_grad=True)
        s = x.sum()
        assert isinstance(s.grad_fn, fast.FastNode) and s.shape == ()
        assert_close(s.item(), a.sum(), "exact64")
        s.backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(shape))
    assert engine._ONES  # the root gradients came from the cache
