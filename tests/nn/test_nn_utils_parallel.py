"""``nn.utils`` (gradient clipping, parameter vectors) and the one-process
``DataParallel`` / ``DistributedDataParallel`` wrappers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.nn.parallel import DistributedDataParallel
from tests.helpers import assert_close

pytestmark = pytest.mark.usefixtures("default_float64")

RNG = np.random.default_rng(11)
GRADS = [RNG.standard_normal((3, 4)), RNG.standard_normal(5), RNG.standard_normal((2, 2))]


def _params(grads=GRADS):
    ps = []
    for g in grads:
        p = nn.Parameter(fg.zeros(*g.shape))
        p.grad = fg.tensor(g)
        ps.append(p)
    ps.append(nn.Parameter(fg.zeros(2)))  # no gradient: skipped
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf, "inf"])
def test_clip_grad_norm_values(norm_type):
    flat = np.concatenate([g.ravel() for g in GRADS])
    p = float(norm_type)
    total = np.abs(flat).max() if math.isinf(p) else (np.abs(flat) ** p).sum() ** (1 / p)
    ps = _params()
    got = nn.utils.clip_grad_norm_(ps, max_norm=1.0, norm_type=norm_type)
    assert_close(got.numpy(), total, "exact64")
    coef = min(1.0, 1.0 / (total + 1e-6))
    for param, g in zip(ps, GRADS):
        assert_close(param.grad.numpy(), g * coef, "exact64")
    assert ps[-1].grad is None


def test_clip_grad_norm_no_clip_below_max_and_single_tensor():
    ps = _params()
    big = nn.utils.clip_grad_norm_(ps, 1e6)
    for param, g in zip(ps, GRADS):
        assert_close(param.grad.numpy(), g, "exact64")
    p = _params([np.array([3.0, 4.0])])[0]
    assert_close(nn.utils.clip_grad_norm_(p, 1.0).numpy(), 5.0, "exact64")
    assert_close(p.grad.numpy(), np.array([3.0, 4.0]) / (5.0 + 1e-6), "exact64")
    assert big.ndim == 0
    assert nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_clip_grad_norm_nonfinite():
    ps = _params([np.array([1.0, np.inf])])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert math.isinf(nn.utils.clip_grad_norm_(ps, 1.0, foreach=True).item())


def test_clip_grad_value_and_vectors():
    ps = _params()
    nn.utils.clip_grad_value_(ps, 0.5)
    for param, g in zip(ps, GRADS):
        assert_close(param.grad.numpy(), np.clip(g, -0.5, 0.5), "exact64")
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    assert tuple(vec.shape) == (8,)
    assert_close(vec.detach().numpy(), np.concatenate([lin.weight.detach().numpy().ravel(),
                                                       lin.bias.detach().numpy()]), "exact64")
    (vec * fg.arange(8.0)).sum().backward()
    assert_close(lin.weight.grad.numpy(), np.arange(6.0).reshape(2, 3), "exact64")
    nn.utils.vector_to_parameters(fg.arange(8.0), lin.parameters())
    assert_close(lin.bias.detach().numpy(), np.array([6.0, 7.0]), "exact64")


def test_clip_grad_norm_inside_a_jitted_step():
    def build():
        fg.manual_seed(0)
        m = nn.Linear(4, 3)
        return m, fg.optim.SGD(m.parameters(), lr=0.1)

    m1, o1 = build()
    m2, o2 = build()
    x, y = fg.tensor(RNG.standard_normal((8, 4)) * 10), fg.tensor(RNG.standard_normal((8, 3)))

    def step(model, opt):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return norm

    jitted = fg.jit(lambda: step(m2, o2))
    for _ in range(3):
        n1, n2 = step(m1, o1), jitted()
        assert_close(n2.numpy(), n1.numpy(), "exact64")
    assert_close(m2.weight.detach().numpy(), m1.weight.detach().numpy(), "exact64")


@pytest.mark.parametrize("wrap", [nn.DataParallel, DistributedDataParallel])
def test_parallel_wrappers_are_transparent(wrap):
    fg.manual_seed(0)
    inner = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model = wrap(inner)
    assert model.module is inner
    assert list(model.state_dict()) == [f"module.{k}" for k in inner.state_dict()]
    assert [id(p) for p in model.parameters()] == [id(p) for p in inner.parameters()]
    x = fg.tensor(RNG.standard_normal((5, 3)))
    assert_close(model(x).detach().numpy(), inner(x).detach().numpy(), "exact64")
    model(x).sum().backward()
    assert inner[0].weight.grad is not None
    model.eval()
    assert not inner.training
    fresh = wrap(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    fresh.load_state_dict(model.state_dict())
    assert_close(fresh(x).detach().numpy(), model(x).detach().numpy(), "exact64")
    assert repr(model).startswith(f"{wrap.__name__}(\n  (module): Sequential(")


def test_ddp_arguments():
    with pytest.raises(ValueError, match="device_ids"):
        DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])
    ddp = DistributedDataParallel(nn.Linear(2, 2))
    with ddp.no_sync():
        ddp(fg.ones(1, 2)).sum().backward()
    assert ddp.module.weight.grad is not None
    assert nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1]).device_ids == []


def test_against_torch():
    torch = pytest.importorskip("torch")
    for norm_type in (2.0, 0.5, math.inf):
        tps = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in GRADS]
        for p, g in zip(tps, GRADS):
            p.grad = torch.tensor(g)
        want = torch.nn.utils.clip_grad_norm_(tps, 0.8, norm_type=norm_type)
        ps = _params()
        got = nn.utils.clip_grad_norm_(ps, 0.8, norm_type=norm_type)
        assert_close(got.numpy(), want.numpy(), "exact64")
        for a, b in zip(ps, tps):
            assert_close(a.grad.numpy(), b.grad.numpy(), "exact64")
    lin = torch.nn.Linear(3, 2).double()
    ours = nn.Linear(3, 2)
    ours.load_state_dict({k: fg.tensor(v.detach().numpy()) for k, v in lin.state_dict().items()})
    assert_close(nn.utils.parameters_to_vector(ours.parameters()).detach().numpy(),
                 torch.nn.utils.parameters_to_vector(lin.parameters()).detach().numpy(),
                 "exact64")
    assert list(nn.DataParallel(ours).state_dict()) == \
        list(torch.nn.DataParallel(lin).state_dict())
