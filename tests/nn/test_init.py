"""``fg.nn.init``: gains and fans as PyTorch, the distributions' bounds and moments,
reproducibility under ``fg.manual_seed``, and no autograd history."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.nn import init

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None),
                                        ("tanh", None), ("relu", None), ("leaky_relu", None),
                                        ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)),
                                        ("selu", None)])
def test_calculate_gain_matches_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param), rel=1e-15)


@pytest.mark.parametrize("shape", [(5, 3), (8, 4, 3, 3), (6, 2, 5)])
def test_fans_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(fg.empty(*shape)) == (
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape)))


def test_fans_need_two_dims():
    with pytest.raises(ValueError):
        init._calculate_fan_in_and_fan_out(fg.empty(4))


def _draw(fn, shape=(400, 300), **kw):
    w = fg.nn.Parameter(fg.empty(*shape))
    out = fn(w, **kw)
    assert out is w and w.grad_fn is None and w.requires_grad
    return w.detach().numpy().astype(np.float64)


def test_uniform_family_bounds_and_spread():
    fan_in, fan_out = 300, 400
    cases = [(init.uniform_, {"a": -0.5, "b": 2.0}, -0.5, 2.0),
             (init.xavier_uniform_, {"gain": 2.0}, None, 2 * math.sqrt(6 / (fan_in + fan_out))),
             (init.kaiming_uniform_, {"a": math.sqrt(5)}, None, 1 / math.sqrt(fan_in)),
             (init.kaiming_uniform_, {"mode": "fan_out", "nonlinearity": "relu"}, None,
              math.sqrt(2) * math.sqrt(3 / fan_out))]
    for fn, kw, lo, hi in cases:
        lo = -hi if lo is None else lo
        w = _draw(fn, **kw)
        assert w.min() >= lo and w.max() <= hi
        assert w.min() < lo + 0.01 * (hi - lo) and w.max() > hi - 0.01 * (hi - lo)
        assert w.mean() == pytest.approx((lo + hi) / 2, abs=0.01 * (hi - lo))


def test_normal_family_moments():
    fan_in, fan_out = 300, 400
    for fn, kw, std in [(init.normal_, {"mean": 1.0, "std": 0.5}, 0.5),
                        (init.xavier_normal_, {}, math.sqrt(2 / (fan_in + fan_out))),
                        (init.kaiming_normal_, {"nonlinearity": "relu"},
                         math.sqrt(2 / fan_in))]:
        w = _draw(fn, **kw)
        assert w.std() == pytest.approx(std, rel=0.02)
        assert w.mean() == pytest.approx(kw.get("mean", 0.0), abs=0.01)
    w = _draw(init.trunc_normal_, std=1.0, a=-1.0, b=1.5)
    assert w.min() >= -1.0 and w.max() <= 1.5
    t = torch.empty(400, 300)
    torch.nn.init.trunc_normal_(t, std=1.0, a=-1.0, b=1.5)
    assert w.mean() == pytest.approx(t.mean().item(), abs=0.01)
    assert w.std() == pytest.approx(t.std().item(), rel=0.02)


def test_constant_eye_orthogonal():
    assert np.all(_draw(init.constant_, (3, 4), val=2.5) == 2.5)
    assert np.all(_draw(init.ones_, (3, 4)) == 1) and np.all(_draw(init.zeros_, (3, 4)) == 0)
    assert np.array_equal(_draw(init.eye_, (3, 5)), np.eye(3, 5))
    for shape in ((6, 4), (3, 8), (4, 2, 3)):
        q = _draw(init.orthogonal_, shape, gain=2.0).reshape(shape[0], -1)
        small = min(q.shape)
        gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
        np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_initialisers_repeat_after_manual_seed():
    fg.manual_seed(7)
    a = _draw(init.kaiming_normal_, (5, 5))
    fg.manual_seed(7)
    b = _draw(init.kaiming_normal_, (5, 5))
    assert np.array_equal(a, b)
    fg.manual_seed(7)
    lin1 = fg.nn.Conv2d(2, 3, 3)
    fg.manual_seed(7)
    lin2 = fg.nn.Conv2d(2, 3, 3)
    assert np.array_equal(lin1.weight.detach().numpy(), lin2.weight.detach().numpy())
