"""``fg.jit`` over PyTorch-style steps: eager modules and optimizers, compiled.

Each test runs the same step twice, on two identical models: once eagerly and
once under ``fg.jit``, and requires the same losses, parameters, gradients and
optimizer state after every step (float64, the "exact64" tolerance; the
compiled math library's tanh differs from NumPy's by an ulp or so, far below
it). Tests run the traced step with the NumPy interpreter unless marked
``compiled``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.eager.jit_eager import UnsupportedEagerJit
from fusegrad.ir.errors import TracerError
from tests.helpers import assert_close

STEPS = 22


pytestmark = pytest.mark.usefixtures("default_float64")


def _mlp(seed: int = 0):
    fg.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))


def _batches(n: int, dtype=np.float64, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [(fg.tensor(rng.normal(size=(8, 3)).astype(dtype)),
             fg.tensor(rng.normal(size=(8, 2)).astype(dtype))) for _ in range(n)]


def _train_step(model, opt, loss_fn):
    """The PyTorch-style step every test here runs eagerly and under ``fg.jit``."""
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _pair(opt_cls, **hyper):
    """(eager step, jitted step, eager model, jitted model, eager opt, jitted opt)."""
    m1 = _mlp()
    m2 = copy.deepcopy(m1)
    o1, o2 = opt_cls(m1.parameters(), **hyper), opt_cls(m2.parameters(), **hyper)
    loss_fn = nn.MSELoss()
    eager_step, jit_step = _train_step(m1, o1, loss_fn), fg.jit(_train_step(m2, o2, loss_fn))
    return eager_step, jit_step, m1, m2, o1, o2


def _assert_same_state(m1, m2, o1, o2, kind="exact64"):
    for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
        assert_close(p2.detach().numpy(), p1.detach().numpy(), kind, name)
        assert (p1.grad is None) == (p2.grad is None), name
        if p1.grad is not None:
            assert_close(p2.grad.numpy(), p1.grad.numpy(), kind, f"{name}.grad")
        s1, s2 = o1.state.get(p1, {}), o2.state.get(p2, {})
        assert sorted(s1) == sorted(s2), name
        for k in s1:
            assert_close(s2[k].numpy(), s1[k].numpy(), kind, f"{name} state {k}")


def _run(eager_step, jit_step, batches, m1, m2, o1, o2, kind="exact64"):
    for i, (x, y) in enumerate(batches):
        l1, l2 = eager_step(x, y), jit_step(x, y)
        assert isinstance(l2, fg.Tensor) and l2.grad_fn is None
        assert_close(l2.numpy(), l1.detach().numpy(), kind, f"loss at step {i}")
        _assert_same_state(m1, m2, o1, o2, kind)


OPTIMIZERS = [
    (fg.optim.SGD, dict(lr=0.1)),
    (fg.optim.SGD, dict(lr=0.05, momentum=0.9)),
    (fg.optim.SGD, dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    (fg.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.01)),
    (fg.optim.Adam, dict(lr=0.01)),
    (fg.optim.Adam, dict(lr=0.01, weight_decay=0.01, amsgrad=True)),
    (fg.optim.AdamW, dict(lr=0.01)),
    (fg.optim.AdamW, dict(lr=0.02, weight_decay=0.1, betas=(0.8, 0.99))),
]


@pytest.mark.parametrize("opt_cls, hyper", OPTIMIZERS,
                         ids=[f"{c.__name__}-{'-'.join(h)}" for c, h in OPTIMIZERS])
def test_jitted_step_equals_the_eager_step(opt_cls, hyper):
    eager_step, jit_step, m1, m2, o1, o2 = _pair(opt_cls, **hyper)
    _run(eager_step, jit_step, _batches(STEPS), m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == 1  # one trace served every later step


@pytest.mark.compiled
@pytest.mark.parametrize("opt_cls, hyper", [OPTIMIZERS[3], OPTIMIZERS[7]],
                         ids=["SGD-nesterov", "AdamW"])
def test_compiled_step_equals_the_eager_step(opt_cls, hyper):
    eager_step, jit_step, m1, m2, o1, o2 = _pair(opt_cls, **hyper)
    _run(eager_step, jit_step, _batches(STEPS), m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == 1


@pytest.mark.compiled
def test_float32_step():
    fg.set_default_dtype(fg.float32)
    eager_step, jit_step, m1, m2, o1, o2 = _pair(fg.optim.Adam, lr=0.01)
    assert m2[0].weight.dtype == fg.float32
    _run(eager_step, jit_step, _batches(STEPS, np.float32), m1, m2, o1, o2, kind="f32")
    assert m2[0].weight.grad.dtype == fg.float32


def test_lazy_state_first_call_runs_eagerly():
    eager_step, jit_step, m1, m2, o1, o2 = _pair(fg.optim.Adam, lr=0.01)
    (x, y), (x2, y2) = _batches(2)
    assert not o2.state
    jit_step(x, y)
    eager_step(x, y)
    assert not jit_step._eager.cache  # the state did not exist: the first call ran eagerly
    assert sorted(o2.state[m2[0].weight]) == ["exp_avg", "exp_avg_sq", "step"]
    jit_step(x2, y2)
    eager_step(x2, y2)
    assert len(jit_step._eager.cache) == 1
    assert o2.state[m2[0].weight]["step"].item() == 2.0
    _assert_same_state(m1, m2, o1, o2)


def test_lr_change_is_an_input_and_param_group_change_retraces():
    eager_step, jit_step, m1, m2, o1, o2 = _pair(fg.optim.SGD, lr=0.1, momentum=0.9)
    batches = _batches(9)
    _run(eager_step, jit_step, batches[:3], m1, m2, o1, o2)
    n = len(jit_step._eager.cache)
    for o in (o1, o2):
        o.param_groups[0]["lr"] = 0.01
    _run(eager_step, jit_step, batches[3:6], m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == n  # the learning rate is an input of the step
    for o in (o1, o2):
        o.param_groups[0]["dampening"] = 0.5
    _run(eager_step, jit_step, batches[6:], m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == n + 1


class _Noisy(nn.Module):
    """Scales its input in training mode only (a stand-in for dropout-like layers)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        h = self.lin(x)
        return h * 0.5 if self.training else h


def test_train_eval_is_part_of_the_key():
    fg.manual_seed(0)
    m1 = _Noisy()
    m2 = copy.deepcopy(m1)
    jm = fg.jit(m2)
    x = _batches(1)[0][0]
    for mode in (True, False, True, False):
        m1.train(mode)
        m2.train(mode)
        with fg.no_grad():
            assert_close(jm(x).numpy(), m1(x).numpy(), "exact64", f"training={mode}")
    assert len(jm._eager.cache) == 2


def test_objects_see_their_updates():
    eager_step, jit_step, m1, m2, o1, o2 = _pair(fg.optim.SGD, lr=0.1, momentum=0.9)
    w = m2[0].weight
    view = w.detach().numpy()  # a NumPy view of the parameter's memory
    version = w._version
    batches = _batches(3)
    _run(eager_step, jit_step, batches, m1, m2, o1, o2)
    assert m2[0].weight is w  # the same Parameter object, updated in place
    np.testing.assert_array_equal(view, w.detach().numpy())
    assert w._version > version
    assert w.grad is not None and w.grad.grad_fn is None and not w.grad.requires_grad
    buf = o2.state[w]["momentum_buffer"]
    assert buf.shape == w.shape and buf is not w.grad
    assert not np.shares_memory(buf.numpy(), w.grad.numpy())


def test_zero_grad_in_place_and_closed_over_buffer_written_in_place():
    counts = [fg.zeros(()), fg.zeros(())]
    models = [_mlp(), None]
    models[1] = copy.deepcopy(models[0])
    opts = [fg.optim.SGD(m.parameters(), lr=0.1) for m in models]

    def make(i):
        def step(x, y):
            opts[i].zero_grad(set_to_none=False)
            loss = ((models[i](x) - y) ** 2).mean()
            loss.backward()
            opts[i].step()
            counts[i].add_(loss.detach())
            return loss
        return step

    eager_step, jit_step = make(0), fg.jit(make(1))
    for x, y in _batches(5):
        eager_step(x, y)
        jit_step(x, y)
        assert_close(counts[1].numpy(), counts[0].numpy(), "exact64")
    _assert_same_state(models[0], models[1], opts[0], opts[1])


def test_module_and_optimizer_as_arguments():
    _, _, m1, m2, o1, o2 = _pair(fg.optim.Adam, lr=0.01)

    @fg.jit
    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return {"loss": loss}

    def ref(x, y):
        o1.zero_grad()
        loss = ((m1(x) - y) ** 2).mean()
        loss.backward()
        o1.step()
        return loss

    for x, y in _batches(4):
        assert_close(step(m2, o2, x, y)["loss"].numpy(), ref(x, y).detach().numpy(), "exact64")
    _assert_same_state(m1, m2, o1, o2)


# --- what cannot be compiled is said clearly ----------------------------------------------


def test_item_inside_the_step_is_a_clear_error():
    _, _, _, m2, _, o2 = _pair(fg.optim.SGD, lr=0.1)

    @fg.jit
    def step(x, y):
        o2.zero_grad()
        loss = ((m2(x) - y) ** 2).mean()
        loss.backward()
        o2.step()
        return loss.item()

    (x, y), (x2, y2) = _batches(2)
    step(x, y)  # eager
    before = [p.detach().numpy().copy() for p in m2.parameters()]
    with pytest.raises(TracerError, match=r"item\(\) needs the Tensor's value"):
        step(x2, y2)
    for b, p in zip(before, m2.parameters()):  # a failed trace leaves the objects as they were
        np.testing.assert_array_equal(p.detach().numpy(), b)
        assert p.grad is not None and fg.is_tensor(p.grad)


def test_inside_another_transform_is_refused():
    m = _mlp()
    jm = fg.jit(m)

    def f(x):
        return jm(fg.tensor(np.ones((2, 3)))).sum() * x

    with pytest.raises(UnsupportedEagerJit, match="cannot run inside another transform"):
        fg.grad(f)(1.0)


def test_returning_a_module_is_refused():
    m = _mlp()
    jm = fg.jit(lambda x: (m(x), m))
    with pytest.raises(UnsupportedEagerJit, match="returned a Sequential"):
        jm(_batches(1)[0][0])


def test_cross_entropy_step_with_numpy_batches():
    """Integer targets, a loss that builds constants (class indices) inside the trace, and
    batches passed as NumPy arrays rather than Tensors."""
    m1 = _mlp()
    m2 = copy.deepcopy(m1)
    o1 = fg.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
    o2 = fg.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(fg.tensor(x)), fg.tensor(y))
            loss.backward()
            opt.step()
            return loss
        return step

    eager_step, jit_step = make(m1, o1), fg.jit(make(m2, o2))
    rng = np.random.default_rng(3)
    for i in range(STEPS):
        x, y = rng.normal(size=(8, 3)), rng.integers(0, 2, size=8)
        assert_close(jit_step(x, y).numpy(), eager_step(x, y).detach().numpy(), "exact64",
                     f"step {i}")
    _assert_same_state(m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == 1


class _RunningMean(nn.Module):
    """Keeps a running mean of its input in a buffer reassigned in training mode."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("mean", fg.zeros(3))

    def forward(self, x):
        if self.training:
            self.mean = 0.9 * self.mean + 0.1 * x.detach().mean(0)
        return self.lin(x - self.mean)


def test_buffer_reassigned_in_the_step():
    fg.manual_seed(0)
    m1 = _RunningMean()
    m2 = copy.deepcopy(m1)
    o1, o2 = fg.optim.SGD(m1.parameters(), lr=0.1), fg.optim.SGD(m2.parameters(), lr=0.1)
    loss_fn = nn.MSELoss()
    eager_step, jit_step = _train_step(m1, o1, loss_fn), fg.jit(_train_step(m2, o2, loss_fn))
    for x, y in _batches(6):
        assert_close(jit_step(x, y).numpy(), eager_step(x, y).detach().numpy(), "exact64")
        assert fg.is_tensor(m2.mean) and isinstance(m2.mean._data, np.ndarray)
        assert_close(m2.mean.numpy(), m1.mean.numpy(), "exact64")
    _assert_same_state(m1, m2, o1, o2)


def test_gradient_accumulation_over_micro_batches():
    """Two backward passes per step accumulate into .grad; the step also returns a loss
    recomputed after the update."""
    m1 = _mlp()
    m2 = copy.deepcopy(m1)
    o1 = fg.optim.SGD(m1.parameters(), lr=0.05, momentum=0.5)
    o2 = fg.optim.SGD(m2.parameters(), lr=0.05, momentum=0.5)

    def make(model, opt):
        def step(a, b, y):
            opt.zero_grad()
            ((model(a) - y) ** 2).mean().backward()
            ((model(b) - y) ** 2).mean().backward()
            opt.step()
            return ((model(a) - y) ** 2).mean()
        return step

    eager_step, jit_step = make(m1, o1), fg.jit(make(m2, o2))
    for (a, y), (b, _) in zip(_batches(6), _batches(6, seed=4)):
        assert_close(jit_step(a, b, y).numpy(), eager_step(a, b, y).detach().numpy(),
                     "exact64")
        _assert_same_state(m1, m2, o1, o2)
    assert len(jit_step._eager.cache) == 1
