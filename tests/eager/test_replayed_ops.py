"""``stack`` replayed from its recording, and the 2-norm of a Tensor that records nothing
computed without a node: the same values and gradients as the generic path and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(4)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_replayed_matches_torch(dim):
    shape = {0: (3, 3, 4), 1: (3, 3, 4), -1: (3, 4, 3)}[dim]
    g = RNG.standard_normal(shape).astype(np.float32)
    want = None
    for lib in (torch, fg, fg, fg):
        a, b = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        out = lib.stack([a, b.transpose(0, 1).transpose(0, 1), a], dim=dim)
        out.backward(lib.tensor(g))
        got = (out.detach().numpy(), a.grad.numpy(), b.grad.numpy(), out.grad_fn.name())
        if want is None:
            want = got
            continue
        for x, y in zip(got[:3], want[:3]):
            np.testing.assert_array_equal(x, y)
        assert got[3] == want[3]


def test_stack_without_grad_and_mixed_dtypes():
    for _ in range(3):
        s = fg.stack([fg.tensor(A), fg.tensor(B)])
        assert s.grad_fn is None and not s.requires_grad
        np.testing.assert_array_equal(s.numpy(), np.stack([A, B]))
    mixed = fg.stack([fg.tensor(A), fg.tensor(B.astype(np.float64))])
    assert mixed.dtype == fg.float64


def test_norm_without_grad_matches_the_node_value():
    x = fg.tensor(A, requires_grad=True)
    with_node = x.norm()
    with fg.no_grad():
        plain = x.norm()
    assert with_node.grad_fn.name() == "LinalgVectorNormBackward0"
    assert plain.grad_fn is None and plain.shape == with_node.shape
    np.testing.assert_array_equal(plain.numpy(), with_node.detach().numpy())
    np.testing.assert_array_equal(fg.tensor(A).norm(dim=1, keepdim=True).numpy(),
                                  x.norm(dim=1, keepdim=True).detach().numpy())
    np.testing.assert_allclose(fg.tensor(A).norm().numpy(),
                               torch.tensor(A).norm().numpy(), rtol=1e-6)


@pytest.mark.parametrize("case", ["slice", "slice_step", "split", "embedding", "take_axis1"])
def test_slice_and_take_numpy_vjps_equal_the_rules(case):
    """The NumPy backward of ``slice`` and ``take`` (``numpy_vjps``) against the generic
    rules (create_graph), in float64, repeated indices included; and PyTorch."""
    x64 = RNG.standard_normal((6, 5))
    idx = np.array([[0, 3, 3], [5, 0, 3]])
    fns = {
        "slice": lambda lib, x: x[1:4] * 2,
        "slice_step": lambda lib, x: x[::2, 1:] * 2,
        "split": lambda lib, x: x.split(2, dim=1)[1] * 2,
        "embedding": lambda lib, x: lib.nn.functional.embedding(lib.tensor(idx), x) * 2,
        "take_axis1": lambda lib, x: x.index_select(1, lib.tensor(idx[0])) * 2,
    }
    fn = fns[case]
    x = fg.tensor(x64, requires_grad=True)
    out = fn(fg, x)
    g = fg.tensor(RNG.standard_normal(tuple(out.shape)))
    fast, = fg.autograd.grad(out, [x], g, retain_graph=True)
    rule, = fg.autograd.grad(out, [x], g, create_graph=True)
    np.testing.assert_array_equal(fast.numpy(), rule.detach().numpy())
    tx = torch.tensor(x64, requires_grad=True)
    tout = fn(torch, tx)
    tg, = torch.autograd.grad(tout, [tx], torch.tensor(g.numpy()))
    np.testing.assert_allclose(fast.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["bmm", "broadcast", "mv", "masked_fill", "masked_fill_nan",
                                  "alias"])
def test_replayed_matmul_masked_fill_alias_match_torch(case):
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    mask = RNG.random((3, 4)) < 0.3
    fns = {
        "bmm": lambda lib, x, y: x @ y,
        "broadcast": lambda lib, x, y: x @ y[0],
        "mv": lambda lib, x, y: x[0] @ y[0, :, 0],
        "masked_fill": lambda lib, x, y: x.masked_fill(lib.tensor(mask), float("-inf")).exp(),
        "masked_fill_nan": lambda lib, x, y: x.masked_fill(lib.tensor(mask), float("nan")) * 2,
        "alias": lambda lib, x, y: x[:, :] * 3,
    }
    got = []
    for lib in (torch, fg, fg, fg):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = fns[case](lib, x, y)
        out.backward(lib.ones_like(out))
        got.append((out.detach().numpy(), x.grad.numpy(),
                    None if y.grad is None else y.grad.numpy(), out.grad_fn.name()))
    for r in got[1:]:
        np.testing.assert_allclose(r[0], got[0][0], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r[1], got[0][1], rtol=1e-6, atol=1e-6)
        assert (r[2] is None) == (got[0][2] is None)
        if r[2] is not None:
            np.testing.assert_allclose(r[2], got[0][2], rtol=1e-6, atol=1e-6)
        assert r[3] == got[1][3]
        np.testing.assert_array_equal(r[0], got[1][0])


def test_stack_without_grad_is_plain_numpy_and_inside_grad_records():
    a, b = fg.tensor(A, requires_grad=True), fg.tensor(B)
    with fg.no_grad():
        s = fg.stack([a, b], dim=1)
    assert s.grad_fn is None and not s.requires_grad
    np.testing.assert_array_equal(s.numpy(), np.stack([A, B], axis=1))
    r = fg.stack([a, b], dim=1)
    assert r.grad_fn.name() == "StackBackward0"
    r.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones_like(A))
