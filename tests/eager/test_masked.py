"""``fusegrad.masked``: reductions over unmasked elements, masked gradients."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.masked import MaskedTensor, as_masked_tensor, masked_tensor
from tests.helpers import assert_close

pytestmark = pytest.mark.usefixtures("default_float64")

DATA = np.arange(12.0).reshape(3, 4) - 5.0
MASK = (np.arange(12).reshape(3, 4) % 3) != 0


def _mt(requires_grad=True):
    return masked_tensor(fg.tensor(DATA), fg.tensor(MASK), requires_grad=requires_grad)


@pytest.mark.parametrize("fn,np_fn,fill", [("sum", np.sum, 0.0), ("amax", np.max, -np.inf),
                                           ("amin", np.min, np.inf), ("prod", np.prod, 1.0)])
def test_reductions_over_unmasked(fn, np_fn, fill):
    filled = np.where(MASK, DATA, fill)
    mt = _mt()
    assert_close(getattr(mt, fn)().get_data().detach().numpy(), np_fn(filled), "exact64")
    r = getattr(mt, fn)(dim=1, keepdim=True)
    assert_close(r.get_data().detach().numpy(), np_fn(filled, axis=1, keepdims=True), "exact64")
    assert r.get_mask().numpy().all()


def test_mean_and_mask_of_result():
    data = DATA.copy()
    mask = MASK.copy()
    mask[:, 0] = False
    mt = masked_tensor(fg.tensor(data), fg.tensor(mask))
    m = mt.mean(0)
    assert m.get_mask().tolist() == [False, True, True, True]
    cnt = mask.sum(0)
    want = np.where(mask, data, 0).sum(0)[1:] / cnt[1:]
    assert_close(m.get_data().numpy()[1:], want, "exact64")


def test_gradient_only_where_unmasked():
    mt = _mt()
    (mt.exp() * 2.0).sum().backward()
    g = mt.grad
    assert isinstance(g, MaskedTensor)
    assert (g.get_mask().numpy() == MASK).all()
    assert_close(g.get_data().numpy(), np.where(MASK, 2 * np.exp(DATA), 0.0), "exact64")
    mx = _mt()
    mx.amax().backward()
    want = np.zeros_like(DATA)
    want[np.unravel_index(np.argmax(np.where(MASK, DATA, -np.inf)), DATA.shape)] = 1
    assert_close(mx.grad.get_data().numpy(), want, "exact64")


def test_as_masked_tensor_keeps_the_graph():
    x = fg.tensor([1.0, 1.0], requires_grad=True)
    div = fg.tensor([0.0, 1.0])
    y = x / div  # [inf, 1]
    loss = as_masked_tensor(y, div != 0)
    loss.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]


def test_softmax_and_to_tensor_and_repr():
    mt = _mt(False)
    sm = mt.softmax(1).to_tensor(0.0).numpy()
    e = np.where(MASK, np.exp(DATA), 0)
    assert_close(sm, e / e.sum(1, keepdims=True), "exact64")
    assert "--" in repr(mt) and repr(mt.sum()).startswith("MaskedTensor(")
    with pytest.raises(NotImplementedError, match=r"MaskedTensor\.cumsum is not supported"):
        mt.cumsum(0)
    with pytest.raises(ValueError, match="masks must match"):
        mt + masked_tensor(fg.tensor(DATA), fg.tensor(~MASK))


def test_against_torch():
    torch = pytest.importorskip("torch")
    import warnings

    from torch.masked import masked_tensor as tmt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.masked is a prototype and says so
        t = tmt(torch.tensor(DATA), torch.tensor(MASK), requires_grad=True)
        t.sum().backward()
        want_grad = t.grad.get_data().numpy()
        for fn in ("sum", "amax", "amin"):
            want = getattr(t, fn)(1).get_data().detach().numpy()
            assert_close(getattr(_mt(), fn)(1).get_data().detach().numpy(), want, "exact64")
    mt = _mt()
    mt.sum().backward()
    assert_close(np.where(MASK, mt.grad.get_data().numpy(), 0), np.where(MASK, want_grad, 0),
                 "exact64")
