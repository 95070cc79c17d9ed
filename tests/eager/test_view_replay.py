"""View operations (``view``, ``transpose``, ``permute``, slices) replayed without the
dispatch (``replay.run(..., view=True)``): the replayed call gives what the generic call
gives, views share their base's memory and version counter, and history stays right when
the base is written in place. Compared with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def _both(fn):
    """``fn(lib, x)`` for fusegrad (three times: generic, then replayed) and PyTorch;
    returns the grads and outputs."""
    results = []
    for lib in (fg, fg, fg, torch):
        x = lib.tensor(X, requires_grad=True)
        out = fn(lib, x)
        out.backward(lib.ones_like(out))
        results.append((out.detach().numpy().copy(), x.grad.numpy().copy(),
                        out.grad_fn.name() if hasattr(out.grad_fn, "name") else None))
    return results


CASES = {
    "view": lambda lib, x: (x * 2).view(2, 6),
    "view_of_transpose": lambda lib, x: (x * 2).transpose(0, 1).reshape(12),
    "permute_slice": lambda lib, x: (x * 2).permute(1, 0)[1:3],
    "split_transpose": lambda lib, x: (x + 1).split(2, dim=1)[1].transpose(0, 1) * 3,
    "stale_view": lambda lib, x: _stale(x),
}


def _stale(x):
    y = x * 1
    v = y.view(12)
    y.mul_(3)  # v's base changed after v was taken: v gets fresh history
    return v.view(4, 3) * v.view(4, 3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_replayed_views_match_generic_and_torch(name):
    *ours, theirs = _both(CASES[name])
    for out, grad, node in ours:
        np.testing.assert_array_equal(out, theirs[0])
        np.testing.assert_allclose(grad, theirs[1], rtol=1e-6)
        assert node == ours[0][2]
    if name != "view_of_transpose":  # PyTorch: UnsafeViewBackward0 (reshape of a copy)
        assert ours[0][2] == theirs[2]


def test_replayed_view_shares_memory_and_version():
    for _ in range(3):
        x = fg.tensor(X, requires_grad=True)
        y = x * 1
        v = y.view(2, 6)
        t = v.transpose(0, 1)
        assert v._base is y and t._base is y
        before = v._version
        y.add_(1)
        assert v._version == t._version == before + 1
        assert float(t[0, 0]) == float(y[0, 0])
        c = y.transpose(0, 1).reshape(12)  # not expressible as a view: a copy
        assert c._base is None
        c.add_(100)
        assert float(y[0, 0]) < 50


def test_writing_a_replayed_view_reaches_the_base_gradient():
    grads = []
    for lib in (fg, fg, fg, torch):
        x = lib.tensor(X, requires_grad=True)
        y = x * 2
        v = y.view(12)[2:8]
        v.mul_(5)
        y.sum().backward()
        grads.append(x.grad.numpy())
    for g in grads[:3]:
        np.testing.assert_allclose(g, grads[3], rtol=1e-6)
