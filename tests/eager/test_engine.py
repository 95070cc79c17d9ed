"""The eager autograd engine against the functional API, and its mechanics.

* Every differentiable op of the op table (the cases of tests/passes/test_vjp_rules.py):
  eager ``fg.autograd.grad`` on Tensors equals ``fg.grad`` on NumPy arrays (float64, "exact64").
* Second derivatives with ``create_graph`` equal the functional ``fg.grad(fg.grad(...))``.
* A chain of 100,000 operations backpropagates (no recursion).
* Threads, exact accumulation into a shared leaf, version-counter errors, hooks,
  custom Functions and composite nodes.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir import bind
from tests.complex.complex_cases import real_only
from tests.helpers import assert_close
from tests.passes.test_vjp_rules import FIRST_ORDER_CASES, GRAD_CASES, Case

FIRST_ORDER_CASES, GRAD_CASES = real_only(FIRST_ORDER_CASES), real_only(GRAD_CASES)


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch):
    """The functional reference runs on the NumPy interpreter (no compile per case)."""
    monkeypatch.setattr(config, "DISABLE_JIT", True)


def _first(out, case: Case):
    return out[0] if isinstance(out, tuple) else out


def _float_idx(args) -> list[int]:
    return [i for i, a in enumerate(args) if a.dtype.kind == "f"]


def _eager_grads(case: Case, args, v, create_graph=False):
    ts = [fg.tensor(a, requires_grad=True) if a.dtype.kind == "f" else a for a in args]
    out = _first(bind(case.op, *ts, regions=case.regions, **case.attrs), case)
    wrt = [ts[i] for i in _float_idx(args)]
    return ts, fg.autograd.grad(out, wrt, grad_outputs=fg.tensor(v), allow_unused=True,
                                create_graph=create_graph)


def _functional_grads(case: Case, args, v):
    idx = _float_idx(args)

    def f(*xs):
        return fnp.sum(_first(bind(case.op, *xs, regions=case.regions, **case.attrs), case) * v)

    return fg.grad(f, argnums=tuple(idx))(*args)


@pytest.mark.parametrize("case", FIRST_ORDER_CASES, ids=lambda c: c.id)
def test_eager_gradient_equals_functional_gradient(case):
    args = case.inputs()
    out = _first(case.reference(args), case)
    v = np.random.default_rng(1).standard_normal(np.shape(out))
    _, eager = _eager_grads(case, args, v)
    functional = _functional_grads(case, args, v)
    for e, f in zip(eager, functional):
        assert_close(np.zeros_like(f) if e is None else e.numpy(), f, "exact64", case.id)


SECOND_ORDER = [c for c in GRAD_CASES if c.op in (
    "exp", "log", "sin", "tanh", "sqrt", "logistic", "mul", "div", "pow", "atan2", "matmul",
    "erf")]  # ops whose first derivative still depends on the inputs


@pytest.mark.parametrize("case", SECOND_ORDER, ids=lambda c: c.id)
def test_create_graph_second_derivative_equals_functional(case):
    """d/dx <u, grad(<v, f(x)>)> eagerly (create_graph) vs fg.grad of fg.grad's inner product."""
    args = case.inputs()
    rng = np.random.default_rng(2)
    v = rng.standard_normal(np.shape(_first(case.reference(args), case)))
    idx = _float_idx(args)
    us = [rng.standard_normal(args[i].shape) for i in idx]
    ts, g1 = _eager_grads(case, args, v, create_graph=True)
    total = sum((g * fg.tensor(u)).sum() for g, u in zip(g1, us) if g is not None and
                g.requires_grad)
    assert isinstance(total, fg.Tensor) and total.requires_grad
    eager = fg.autograd.grad(total, [ts[i] for i in idx], allow_unused=True)

    def inner(*xs):
        gs = _functional_grads(case, list(xs), v)
        return sum(fnp.sum(g * u) for g, u in zip(gs, us))

    functional = fg.grad(inner, argnums=tuple(idx))(*args)
    for e, f in zip(eager, functional):
        assert_close(np.zeros_like(f) if e is None else e.numpy(), f, "exact64", case.id)


def test_third_derivative_with_create_graph():
    a = fg.tensor(3.0, dtype=fg.float64, requires_grad=True)
    y = a ** 3 + a.sin()
    (g1,) = fg.autograd.grad(y, a, create_graph=True)
    (g2,) = fg.autograd.grad(g1, a, create_graph=True)
    (g3,) = fg.autograd.grad(g2, a)
    assert_close(g1.item(), 27 + np.cos(3.0), "exact64")
    assert_close(g2.item(), 18 - np.sin(3.0), "exact64")
    assert_close(g3.item(), 6 - np.cos(3.0), "exact64")
    x = fg.tensor([0.5, 1.5], dtype=fg.float64, requires_grad=True)
    n = (x * x).sum().sqrt()  # composite-free norm, then the norm node itself
    (gn,) = fg.autograd.grad(x.norm(), x, create_graph=True)
    (gm,) = fg.autograd.grad(n, x, create_graph=True)
    assert_close(gn.detach().numpy(), gm.detach().numpy(), "exact64")
    (h,) = fg.autograd.grad(gn.sum(), x)
    (hm,) = fg.autograd.grad(gm.sum(), x)
    assert_close(h.numpy(), hm.numpy(), "exact64")


def test_chain_of_100000_operations_backpropagates():
    x = fg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0


def test_threads_backward_their_own_graphs_and_share_a_leaf_exactly():
    shared = fg.zeros(4, dtype=fg.float64, requires_grad=True)
    errors = []

    def work(k):
        try:
            for i in range(200):
                x = fg.tensor([float(k), float(i)], requires_grad=True)
                y = (x * x).sum() + (shared * 1.0).sum()
                y.backward()
                assert x.grad.tolist() == [2.0 * k, 2.0 * i]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert shared.grad.tolist() == [2000.0] * 4


def test_version_counter_errors_and_what_is_saved():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y  # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="which is output 0 of MulBackward0, is at version 1"):
        z.sum().backward()
    w = fg.tensor([1.0, 2.0], requires_grad=True)
    s = w.sqrt()  # SqrtBackward0 saves its result only
    with fg.no_grad():
        w.mul_(2)
    s.sum().backward()  # w was not saved: no error, as in PyTorch
    assert_close(w.grad.numpy(), 0.5 / np.sqrt([1.0, 2.0]), "f32")
    leaf = fg.tensor([1.0, 2.0], requires_grad=True)
    p = leaf.pow(2)
    with fg.no_grad():
        leaf.mul_(2)
    with pytest.raises(RuntimeError, match=r"\[fusegrad.FloatTensor \[2\]\] is at version 1; "
                                           r"expected version 0 instead"):
        p.sum().backward()


def test_inplace_records_history_and_detects_views():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    z = y.clone()
    z.mul_(z)  # saves the old z (a copy) for the gradient
    z.sum().backward()
    assert_close(x.grad.numpy(), 2 * np.exp(2 * np.array([1.0, 2.0, 3.0])), "f32")
    base = fg.zeros(2, 3)
    row = base[0]
    row.fill_(1.0)  # no autograd involved: writes through to the base, as a PyTorch view
    assert base.tolist() == [[1, 1, 1], [0, 0, 0]] and base._version == row._version == 1
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].add_(1)


def test_hooks_on_nodes_and_retain_grad():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.grad_fn.register_prehook(lambda gout: seen.append("pre"))
    y.grad_fn.register_hook(lambda gin, gout: (gin[0] * 0,))
    y.retain_grad()
    y.sum().backward()
    assert seen == ["pre"] and x.grad.tolist() == [0.0, 0.0] and y.grad.tolist() == [1.0, 1.0]


def test_custom_function_errors_and_materialized_grads():
    class Two(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = fg.tensor([1.0], requires_grad=True)
    a, b = Two.apply(x)
    assert a.grad_fn is b.grad_fn and (a.output_nr, b.output_nr) == (0, 1)
    a.sum().backward()  # gb is materialised as zeros
    assert x.grad.tolist() == [2.0]

    class Bad(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()


def test_grad_of_unreached_input_and_backward_inputs():
    x = fg.tensor(2.0, requires_grad=True)
    w = fg.tensor(3.0, requires_grad=True)
    y = x * w
    y.backward(inputs=[x])
    assert x.grad.item() == 3.0 and w.grad is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        fg.tensor(1.0).backward()
