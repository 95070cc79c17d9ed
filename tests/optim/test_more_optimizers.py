"""RMSprop, Adagrad and Adadelta: PyTorch's trajectories, state, state dicts, fg.jit."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from tests.helpers import assert_close

INIT = [np.array([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]]), np.array([0.2, -0.7])]
X = np.random.default_rng(3).standard_normal((6, 3))

CASES = [
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.05, "alpha": 0.9, "momentum": 0.8}),
    ("RMSprop", {"lr": 0.02, "centered": True, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.02, "centered": True, "momentum": 0.5, "maximize": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.3, "lr_decay": 0.05, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.05}),
    ("Adadelta", {"maximize": True}),
]


def _trajectory(lib, name, kw, steps=25):
    """Parameters after each step of a small least-squares problem, two param groups."""
    w = lib.tensor(INIT[0].copy(), dtype=lib.float64, requires_grad=True)
    b = lib.tensor(INIT[1].copy(), dtype=lib.float64, requires_grad=True)
    x = lib.tensor(X, dtype=lib.float64)
    opt = getattr(lib.optim, name)([{"params": [w]}, {"params": [b], "lr": 0.03}], **kw)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        y = (x @ w.T + b).tanh()
        ((y - 0.5) ** 2).sum().backward()
        opt.step()
        out.append(np.concatenate([w.detach().numpy().ravel(), b.detach().numpy()]))
    return np.array(out), opt, (w, b)


@pytest.mark.parametrize(("name", "kw"), CASES)
def test_trajectory_matches_pytorch(name, kw):
    torch = pytest.importorskip("torch")
    got, opt, (w, _) = _trajectory(fg, name, kw)
    want, topt, (tw, _) = _trajectory(torch, name, kw)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert set(opt.state[w]) == set(topt.state[tw])
    for k, v in opt.state[w].items():
        np.testing.assert_allclose(v.numpy(), topt.state[tw][k].numpy(), rtol=1e-12, atol=1e-14)
    assert opt.param_groups[0].keys() == topt.param_groups[0].keys()


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta"])
def test_steps_move_downhill_and_keep_dtype(name):
    p = nn.Parameter(fg.tensor([1.0, -2.0]))
    opt = getattr(fg.optim, name)([p], lr=0.1)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        losses.append(loss.item())
        opt.step()
    assert losses[-1] < losses[0]
    assert p.dtype == fg.float32 and all(t.dtype == fg.float32 for t in opt.state[p].values()
                                         if t.ndim)
    assert opt.state[p]["step"].item() == 5


def test_rmsprop_first_step_by_hand():
    p = fg.tensor([2.0], dtype=fg.float64, requires_grad=True)
    opt = fg.optim.RMSprop([p], lr=0.1, alpha=0.5, eps=0.0)
    (p * p).sum().backward()  # g = 4: v = 0.5 * 16 = 8, step = 0.1 * 4 / sqrt(8)
    opt.step()
    assert p.item() == pytest.approx(2.0 - 0.1 * 4 / np.sqrt(8.0), abs=1e-15)


def test_adagrad_state_exists_before_the_first_step():
    p = fg.tensor([2.0, 3.0], requires_grad=True)
    opt = fg.optim.Adagrad([p], initial_accumulator_value=0.25)
    assert opt.state[p]["sum"].tolist() == [0.25, 0.25] and opt.state[p]["step"].item() == 0


@pytest.mark.parametrize(("name", "kw"), [("RMSprop", {"momentum": 0.9, "centered": True}),
                                          ("Adagrad", {"lr_decay": 0.1}),
                                          ("Adadelta", {"rho": 0.5})])
def test_state_dict_resume_is_exact(name, kw):
    def make():
        p = fg.tensor(INIT[0].copy(), dtype=fg.float64, requires_grad=True)
        return p, getattr(fg.optim, name)([p], lr=0.05, **kw)

    def train(p, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            (p.sin() * p).sum().backward()
            opt.step()

    ref, ref_opt = make()
    train(ref, ref_opt, 6)
    p, opt = make()
    train(p, opt, 3)
    sd = opt.state_dict()
    p2, opt2 = make()
    with fg.no_grad():
        p2.copy_(p)
    opt2.load_state_dict(sd)
    train(p2, opt2, 3)
    assert_close(p2.detach().numpy(), ref.detach().numpy(), "exact64")


@pytest.mark.parametrize(("name", "kw"), [("RMSprop", {"lr": 0.01, "momentum": 0.5,
                                                       "centered": True}),
                                          ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}),
                                          ("Adadelta", {})])
def test_compiled_step_equals_eager(name, kw):
    def run(jit):
        fg.manual_seed(0)
        model = nn.Linear(3, 2).double()
        opt = getattr(fg.optim, name)(model.parameters(), **kw)
        x = fg.tensor(X)

        def step(x):
            opt.zero_grad()
            loss = ((model(x) - 1.0) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = fg.jit(step) if jit else step
        return [float(f(x)) for _ in range(8)], model.weight.detach().numpy().copy(), f

    eager, w_eager, _ = run(False)
    compiled, w_jit, f = run(True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-12)
    np.testing.assert_allclose(w_jit, w_eager, rtol=1e-12, atol=1e-14)
    assert len(f._eager.cache) <= 2


def test_invalid_hyperparameters_raise():
    p = fg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        fg.optim.RMSprop([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid lr_decay"):
        fg.optim.Adagrad([p], lr_decay=-1)
    with pytest.raises(ValueError, match="Invalid rho"):
        fg.optim.Adadelta([p], rho=1.5)
