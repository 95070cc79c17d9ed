"""The losses against PyTorch (values and gradients, every reduction), finite
differences to second order, and compiled gradients."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.nn import functional as F
from tests.helpers import assert_close, check_grads

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _inputs(name, rng, shape=(4, 5)):
    if name == "binary_cross_entropy":
        return rng.uniform(0.05, 0.95, shape), rng.uniform(0, 1, shape)
    if name == "kl_div":
        logp = np.log(rng.dirichlet(np.ones(shape[-1]), shape[0]))
        t = rng.dirichlet(np.ones(shape[-1]), shape[0])
        t[0, 1] = 0.0  # a zero target contributes 0
        return logp, t
    return rng.standard_normal(shape) * 2, rng.standard_normal(shape) * 2


CASES = [
    ("binary_cross_entropy", {}),
    ("binary_cross_entropy_with_logits", {}),
    ("binary_cross_entropy_with_logits", {"pos_weight": "pw"}),
    ("binary_cross_entropy", {"weight": "w"}),
    ("binary_cross_entropy_with_logits", {"weight": "w", "pos_weight": "pw"}),
    ("l1_loss", {}),
    ("smooth_l1_loss", {"beta": 0.7}),
    ("smooth_l1_loss", {"beta": 0.0}),
    ("huber_loss", {"delta": 1.3}),
    ("kl_div", {}),
    ("kl_div", {"log_target": True}),
    ("mse_loss", {}),
]


def _kw(kw, rng, lib):
    extra = {"w": rng.uniform(0.5, 2, (4, 5)), "pw": rng.uniform(0.5, 3, (5,))}
    return {k: (lib(extra[v]) if isinstance(v, str) else v) for k, v in kw.items()}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,kw", CASES, ids=lambda c: str(c))
def test_loss_matches_torch(name, kw, reduction):
    rng = np.random.default_rng(0)
    x, t = _inputs(name, rng)
    if name == "kl_div" and kw.get("log_target"):
        t = np.log(np.maximum(t, 1e-3))
    fkw, tkw = _kw(kw, np.random.default_rng(1), fg.tensor), _kw(kw, np.random.default_rng(1),
                                                                   torch.tensor)
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = getattr(F, name)(fx, fg.tensor(t), reduction=reduction, **fkw)
    ref = getattr(TF, name)(tx, torch.tensor(t), reduction=reduction, **tkw)
    assert_close(out.detach().numpy(), ref.detach().numpy(), "exact64")
    g = np.random.default_rng(2).standard_normal(ref.shape)
    out.backward(fg.tensor(g))
    ref.backward(torch.tensor(g))
    assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")


def test_kl_div_batchmean_and_bce_clamp_match_torch():
    rng = np.random.default_rng(3)
    x, t = _inputs("kl_div", rng)
    assert_close(F.kl_div(fg.tensor(x), fg.tensor(t), reduction="batchmean").numpy(),
                 TF.kl_div(torch.tensor(x), torch.tensor(t), reduction="batchmean").numpy(),
                 "exact64")
    p, y = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])
    assert_close(F.binary_cross_entropy(fg.tensor(p), fg.tensor(y), reduction="none").numpy(),
                 TF.binary_cross_entropy(torch.tensor(p), torch.tensor(y),
                                         reduction="none").numpy(), "exact64")


def test_bce_with_logits_is_finite_for_huge_logits():
    x = fg.tensor([1000.0, -1000.0], requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(x, fg.tensor([0.0, 1.0]), reduction="sum")
    ref = TF.binary_cross_entropy_with_logits(torch.tensor([1000.0, -1000.0]),
                                              torch.tensor([0.0, 1.0]), reduction="sum")
    assert_close(loss.detach().numpy(), ref.numpy(), "f32")
    loss.backward()
    assert np.all(np.isfinite(x.grad.numpy()))


@pytest.mark.parametrize("name,kw", [c for c in CASES if "weight" not in c[1]
                                     and "pos_weight" not in c[1]], ids=lambda c: str(c))
def test_loss_second_order_finite_differences(name, kw):
    rng = np.random.default_rng(4)
    x, t = _inputs(name, rng)
    if name in ("smooth_l1_loss", "huber_loss"):  # away from the switch points
        d = x - t
        x = np.where(np.abs(np.abs(d) - 1.0) < 0.1, x + 0.3, x)
    check_grads(lambda x, t: getattr(F, name)(x, t, reduction="sum", **kw), [x, t],
                wrt=(0,), order=2)


def test_loss_modules_and_compiled_gradient():
    rng = np.random.default_rng(5)
    x, t = _inputs("binary_cross_entropy_with_logits", rng)
    pw = rng.uniform(0.5, 2, (5,))
    mod = nn.BCEWithLogitsLoss(pos_weight=fg.tensor(pw))
    assert_close(mod(fg.tensor(x), fg.tensor(t)).numpy(),
                 torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pw))(
                     torch.tensor(x), torch.tensor(t)).numpy(), "exact64")

    def total(x):
        return (F.binary_cross_entropy_with_logits(x, t, pos_weight=pw)
                + F.smooth_l1_loss(x, t, beta=0.5) + F.huber_loss(x, t, delta=2.0)
                + F.l1_loss(x, t) + F.kl_div(F.log_softmax(x, 1), F.softmax(t, 1),
                                             reduction="batchmean"))

    tx = torch.tensor(x, requires_grad=True)
    tt = torch.tensor(t)
    (TF.binary_cross_entropy_with_logits(tx, tt, pos_weight=torch.tensor(pw))
     + TF.smooth_l1_loss(tx, tt, beta=0.5) + TF.huber_loss(tx, tt, delta=2.0)
     + TF.l1_loss(tx, tt) + TF.kl_div(TF.log_softmax(tx, 1), TF.softmax(tt, 1),
                                      reduction="batchmean")).backward()
    assert_close(fg.jit(fg.grad(total))(x), tx.grad.numpy(), "exact64")
    lp, p = _inputs("kl_div", rng)
    for cls, kw in ((nn.L1Loss, {}), (nn.SmoothL1Loss, {"reduction": "sum", "beta": 0.5}),
                    (nn.HuberLoss, {"reduction": "none", "delta": 2.0}),
                    (nn.KLDivLoss, {"reduction": "batchmean"})):
        tcls = getattr(torch.nn, cls.__name__)
        a, b = (lp, p) if cls is nn.KLDivLoss else (x, t)
        assert_close(cls(**kw)(fg.tensor(a), fg.tensor(b)).numpy(),
                     tcls(**kw)(torch.tensor(a), torch.tensor(b)).numpy(), "exact64")
