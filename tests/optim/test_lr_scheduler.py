"""Learning-rate schedulers: PyTorch's rates step for step, state dicts, compiled steps
that do not retrace when the rate changes."""

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.optim import lr_scheduler as S


def _schedules():
    return [
        ("StepLR", {"step_size": 3, "gamma": 0.5}),
        ("MultiStepLR", {"milestones": [2, 5, 5, 9], "gamma": 0.3}),
        ("ExponentialLR", {"gamma": 0.9}),
        ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.001}),
        ("CosineAnnealingLR", {"T_max": 4}),
        ("LambdaLR", {"lr_lambda": lambda e: 1.0 / (1 + e) ** 0.5}),
        ("OneCycleLR", {"max_lr": 0.5, "total_steps": 30}),
        ("OneCycleLR", {"max_lr": [0.5, 0.2], "total_steps": 30, "three_phase": True,
                        "anneal_strategy": "linear"}),
        ("OneCycleLR", {"max_lr": 0.5, "epochs": 3, "steps_per_epoch": 10,
                        "cycle_momentum": False, "pct_start": 0.2}),
    ]


def _rates(lib, name, kw, opt_name="SGD", steps=25):
    w = lib.zeros(2, dtype=lib.float64, requires_grad=True)
    b = lib.zeros(1, dtype=lib.float64, requires_grad=True)
    opt = getattr(lib.optim, opt_name)([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1,
                                       momentum=0.9) if opt_name == "SGD" else (
        getattr(lib.optim, opt_name)([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1))
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append([*sched.get_last_lr(), *(g.get("momentum", g.get("betas", (0,))[0])
                                            for g in opt.param_groups)])
    return np.array(out)


@pytest.mark.parametrize(("name", "kw"), _schedules())
def test_rates_match_pytorch(name, kw):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(_rates(fg, name, kw), _rates(torch, name, kw), rtol=1e-12,
                               atol=0)


def test_one_cycle_cycles_adam_beta1_as_pytorch():
    torch = pytest.importorskip("torch")
    kw = {"max_lr": 0.01, "total_steps": 25}
    np.testing.assert_allclose(_rates(fg, "OneCycleLR", kw, "Adam"),
                               _rates(torch, "OneCycleLR", kw, "Adam"), rtol=1e-12)


def test_plateau_matches_pytorch():
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.7] * 2

    def run(lib, **kw):
        opt = lib.optim.SGD([lib.zeros(1, requires_grad=True)], lr=1.0)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        out = []
        for m in metrics:
            sched.step(m)
            out.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr() == [out[-1]]
        return out

    for kw in ({"patience": 2}, {"patience": 1, "cooldown": 2, "factor": 0.5, "min_lr": 0.2},
               {"mode": "max", "patience": 0, "threshold_mode": "abs", "threshold": 0.01}):
        assert run(fg, **kw) == run(torch, **kw)


def test_step_lr_by_hand():
    opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=1.0)
    sched = S.StepLR(opt, step_size=2, gamma=0.1)
    seen = []
    for _ in range(5):
        seen.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert seen == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01])
    assert opt.param_groups[0]["initial_lr"] == 1.0


def test_cosine_reaches_eta_min_at_t_max():
    opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=2.0)
    sched = S.CosineAnnealingLR(opt, T_max=10, eta_min=0.5)
    for _ in range(10):
        sched.step()
    assert sched.get_last_lr()[0] == pytest.approx(0.5, abs=1e-12)
    assert math.isclose(S.CosineAnnealingLR(fg.optim.SGD([fg.zeros(1, requires_grad=True)],
                                                         lr=2.0), T_max=10).get_last_lr()[0], 2)


def test_state_dict_resumes_the_schedule():
    def make():
        opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=1.0)
        return opt, S.CosineAnnealingLR(opt, T_max=9)

    opt, sched = make()
    for _ in range(4):
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    opt2, sched2 = make()
    sched2.load_state_dict(sd)
    opt2.load_state_dict(opt.state_dict())
    for _ in range(3):
        sched.step()
        sched2.step()
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_lambda_state_dict_skips_functions():
    opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=1.0)
    sd = S.LambdaLR(opt, lambda e: 0.5 ** e).state_dict()
    assert sd["lr_lambdas"] == [None]


def test_one_cycle_rejects_too_many_steps():
    opt = fg.optim.SGD([fg.zeros(1, requires_grad=True)], lr=1.0, momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_compiled_step_takes_the_rate_as_input(opt_name):
    """A changing lr does not retrace the compiled step, and the compiled trajectory equals
    the eager one."""

    def run(jit):
        fg.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
        opt = getattr(fg.optim, opt_name)(model.parameters(), lr=0.05)
        sched = S.OneCycleLR(opt, max_lr=0.2, total_steps=12, cycle_momentum=False)
        x = fg.tensor(np.random.default_rng(1).standard_normal((8, 3)))
        y = x.sum(1, keepdim=True).sin()

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = fg.jit(step) if jit else step
        losses = []
        for _ in range(12):
            losses.append(float(f(x, y)))
            sched.step()
        return losses, f

    eager, _ = run(False)
    compiled, f = run(True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-12)
    assert len(set(eager)) == 12
    assert len(f._eager.cache) == 1  # one trace for 11 compiled calls at 11 different rates


def test_other_hyperparameters_still_retrace():
    """Momentum and betas are inputs while nonzero; other hyper-parameters (and a momentum
    switched to zero, which changes what the step computes) stay baked in the trace."""
    p = nn.Parameter(fg.tensor([1.0, 2.0]))
    opt = fg.optim.SGD([p], lr=0.1, momentum=0.5)

    @fg.jit
    def step():
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()

    for key, value in (("momentum", 0.5), ("momentum", 0.5), ("momentum", 0.6),
                       ("lr", 0.2), ("weight_decay", 0.1), ("momentum", 0.0)):
        opt.param_groups[0][key] = value
        step()
    assert len(step._eager.cache) == 3


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "RMSprop"])
def test_one_cycle_with_momentum_cycling_compiles_once(opt_name):
    def run(jit):
        fg.manual_seed(1)
        model = nn.Linear(3, 2).double()
        kw = {"momentum": 0.9} if opt_name != "Adam" else {}
        opt = getattr(fg.optim, opt_name)(model.parameters(), lr=0.05, **kw)
        sched = S.OneCycleLR(opt, max_lr=0.1, total_steps=10)
        x = fg.tensor(np.random.default_rng(2).standard_normal((8, 3)))

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = fg.jit(step) if jit else step
        out = []
        for _ in range(10):
            out.append(float(f(x)))
            sched.step()
        return out, f

    eager, _ = run(False)
    compiled, f = run(True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-12)
    assert len(f._eager.cache) == 1
