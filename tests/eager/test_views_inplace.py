"""In-place operations on views of tensors in the graph, and view replay (as PyTorch).

* Writing to a view records the operation, gives the base a ``CopySlices``
  node and the view a fresh ``AsStridedBackward0`` history; gradients equal
  the analytic ones (including second derivatives through ``CopySlices``).
* A view whose base changed in place is replayed when used again.
* What PyTorch refuses stays refused: a view of a leaf that requires grad,
  and a saved value overwritten through a view.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from tests.helpers import assert_close

X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
W = np.array([0.5, -1.0, 2.0])


def test_inplace_on_views_gives_the_base_copyslices_and_right_gradients():
    x = fg.tensor(X, requires_grad=True)
    w = fg.tensor(W, requires_grad=True)
    y = x * 1
    v = y[0]
    v.mul_(w)  # row 0 scaled by w
    t = y.t()[1:]
    t.add_(3.0)  # columns 1 and 2 shifted, through a transposed view
    assert type(y.grad_fn).__name__ == "CopySlices"
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"
    assert y._version == v._version == t._version == 2
    shift = np.array([0.0, 3.0, 3.0])
    y0, y1 = X[0] * W + shift, X[1] + shift
    assert_close(y.detach().numpy(), np.stack([y0, y1]), "exact64")
    assert_close(v.detach().numpy(), y0, "exact64")
    ((y * y).sum() + (v * 2).sum()).backward()
    assert_close(x.grad.numpy(), np.stack([(2 * y0 + 2) * W, 2 * y1]), "exact64")
    assert_close(w.grad.numpy(), (2 * y0 + 2) * X[0], "exact64")


def test_inplace_on_a_view_with_a_value_that_requires_grad():
    base = fg.zeros(2, 3, dtype=fg.float64)
    value = fg.tensor(W, requires_grad=True)
    base[1].copy_(value.exp())
    assert base.requires_grad and type(base.grad_fn).__name__ == "CopySlices"
    (base * base).sum().backward()
    assert_close(value.grad.numpy(), 2 * np.exp(2 * W), "exact64")


def test_second_derivative_through_copyslices():
    x = fg.tensor(W, requires_grad=True)
    y = x * 1
    y[1:].mul_(y[1:].detach() * 0 + 1)  # identity write: the graph goes through CopySlices
    y[:2].pow_(3)
    (g,) = fg.autograd.grad(y.sum(), x, create_graph=True)
    assert_close(g.detach().numpy(), np.array([3 * W[0] ** 2, 3 * W[1] ** 2, 1.0]), "exact64")
    (h,) = fg.autograd.grad(g.sum(), x)
    assert_close(h.numpy(), np.array([6 * W[0], 6 * W[1], 0.0]), "exact64")


def test_views_are_replayed_after_their_base_changes():
    w = fg.tensor(X[:, :2].copy(), requires_grad=True)
    wt = w.t()
    with fg.no_grad():
        w.mul_(2)  # as an optimizer step does
    (wt * wt).sum().backward()
    assert_close(w.grad.numpy(), 2 * (2 * X[:, :2]), "exact64")
    assert type(wt.grad_fn).__name__ == "AsStridedBackward0"


def test_what_pytorch_refuses_stays_refused():
    x = fg.tensor(W, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation"):
        x[1:].mul_(2)
    y = x * 1
    q = y * y  # saves y
    y[0].mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        q.sum().backward()
    e = fg.ones(3, dtype=fg.float64).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.add_(x)
