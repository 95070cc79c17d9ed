"""Adam's and AdamW's array step (``optim._fast``) against their Tensor step: the same
bits in the parameters and the state, and the same version counters."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.optim import _fast
from fusegrad.optim._fused import _fma32_exact, fma32

SETTINGS = {
    "adamw": ("AdamW", dict(lr=3e-3, weight_decay=0.1)),
    "adam": ("Adam", dict(lr=1e-2)),
    "adam-max-eps": ("Adam", dict(lr=1e-3, eps=1e-6, maximize=True)),
    "adamw-low-beta1": ("AdamW", dict(lr=1e-2, betas=(0.3, 0.9))),  # lerp weight >= 0.5
    "adamw-beta2-zero": ("AdamW", dict(lr=1e-2, betas=(0.9, 0.0))),
}


def _run(name: str, fast: bool, monkeypatch, steps: int = 25):
    cls, kw = SETTINGS[name]
    rng = np.random.default_rng(5)
    shapes = ((7, 5), (37,), (24, 40), ())
    params = [fg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in shapes]
    opt = getattr(fg.optim, cls)(params, **kw)
    taken = []
    real = _fast.adam_group
    monkeypatch.setattr(_fast, "adam_group", lambda *a: taken.append(1) or real(*a))
    if not fast:
        monkeypatch.setattr(_fast, "eligible", lambda group: False)
    for step in range(steps):
        for i, p in enumerate(params):
            g = rng.standard_normal(p.shape).astype(np.float32) * 10.0 ** -(i + step % 3)
            if i == 2:
                g[:5] = 0  # rows that never get a gradient keep zero moments
            p.grad = None if i == 1 and step % 4 == 1 else fg.tensor(g)  # steps differ
        opt.step()
    assert bool(taken) == fast
    state = [(opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"], opt.state[p]["step"])
             for p in params]
    return params, state


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_array_step_matches_tensor_step(name, monkeypatch):
    fast_p, fast_s = _run(name, True, monkeypatch)
    slow_p, slow_s = _run(name, False, monkeypatch)
    for a, b in zip(fast_p, slow_p):
        assert np.array_equal(a.detach().numpy().view(np.int32),
                              b.detach().numpy().view(np.int32))
        assert a._version == b._version
    for sa, sb in zip(fast_s, slow_s):
        for x, y in zip(sa, sb):
            assert x.dtype == y.dtype
            assert np.array_equal(x.numpy(), y.numpy())
            assert x._version == y._version


def test_fallbacks_take_the_tensor_step(monkeypatch):
    """AMSGrad, L2 weight decay and float64 parameters keep the Tensor code; a parameter
    listed twice is updated twice, one at a time."""
    calls = []
    real = _fast.adam_step
    monkeypatch.setattr(_fast, "adam_step", lambda *a: calls.append(1) or real(*a))
    p64 = fg.tensor(np.ones(3), requires_grad=True)
    p64.grad = fg.tensor(np.ones(3))
    fg.optim.AdamW([p64]).step()
    assert calls  # tried, and declined: float64
    assert p64.detach().numpy()[0] < 1
    calls.clear()
    for kw in (dict(amsgrad=True), dict(weight_decay=0.1)):
        p = fg.tensor(np.ones(3, np.float32), requires_grad=True)
        p.grad = fg.tensor(np.ones(3, np.float32))
        fg.optim.Adam([p], **kw).step()
        assert not calls
    with pytest.warns(UserWarning, match="duplicate"):
        p = fg.tensor(np.ones(3, np.float32), requires_grad=True)
        opt = fg.optim.Adam([p, p])
    p.grad = fg.tensor(np.ones(3, np.float32))
    opt.step()
    assert len(calls) == 2 and opt.state[p]["step"].item() == 2


def test_fma32_fast_check_agrees_with_the_exact_path():
    rng = np.random.default_rng(2)
    for scale in (1.0, 1e-3, 1e-20, 1e-38, 1e30):
        a, b, c = (rng.standard_normal(50_000).astype(np.float32) * np.float32(s)
                   for s in (1.0, scale, 1.0))
        c[:100] = 0
        a[100:200] = 0
        want = _fma32_exact(*(np.asarray(v, np.float64) for v in (a, b, c)))
        assert np.array_equal(fma32(a, b, c).view(np.int32), want.view(np.int32))
