"""``fg.nn`` and ``fg.optim``: PyTorch's Module / layer / loss / optimizer behaviour.

Optimizer trajectories are checked against NumPy transcriptions of PyTorch's
documented update rules (float64, the "exact64" tolerance), losses against
NumPy formulas for their values and gradients.
"""

from __future__ import annotations

import collections
import copy
import io
import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from fusegrad.ir.errors import ShapeError
from fusegrad.nn import functional as F
from tests.helpers import assert_close

# --- Module: registration, walking, modes ---------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(fg.ones(1))
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.head = nn.Linear(4, 2, bias=False)
        self.register_buffer("running", fg.zeros(2))
        self.register_buffer("scratch", fg.zeros(1), persistent=False)
        self.plain = fg.ones(3)  # a Tensor attribute that is neither parameter nor buffer

    def forward(self, x):
        return self.head(self.body(x)) * self.scale + self.running


def test_module_registers_parameters_and_children_in_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "body.0.weight", "body.0.bias", "head.weight"]
    assert [p.shape for p in net.parameters()] == [(1,), (4, 3), (4,), (2, 4)]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
               for p in net.parameters())
    assert [type(m).__name__ for m in net.children()] == ["Sequential", "Linear"]
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.0", "body.1", "head"]
    assert next(net.modules()) is net
    assert [n for n, _ in net.named_buffers()] == ["running", "scratch"]
    assert net.head.bias is None and "plain" not in dict(net.named_buffers())
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    net.head2 = net.head  # a shared module: its parameters are listed once
    assert len(list(net.parameters())) == 4
    assert list(net.state_dict())[-1] == "head2.weight"  # but state_dict has both names
    del net.head2
    assert "head2" not in dict(net.named_children())
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        net.nope  # noqa: B018


def test_module_registration_errors():
    net = Net()
    with pytest.raises(TypeError, match=r"cannot assign 'fusegrad\.FloatTensor' as parameter "
                                        "'scale'"):
        net.scale = fg.ones(1)
    net.scale = None  # allowed: the parameter becomes absent
    assert next(net.named_parameters())[0] == "body.0.weight"
    with pytest.raises(TypeError, match="object to parameter 'w'"):
        net.register_parameter("w", fg.ones(1, requires_grad=True) * 2)
    history = nn.Parameter(fg.ones(1), requires_grad=False)
    history.mul_(fg.ones(1, requires_grad=True))  # a Parameter that is no longer a leaf
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'w'"):
        net.register_parameter("w", history)
    with pytest.raises(KeyError, match=r'contain "\."'):
        net.register_buffer("a.b", fg.ones(1))
    with pytest.raises(KeyError, match="already exists"):
        net.register_buffer("plain", fg.ones(1))
    with pytest.raises(TypeError, match="as buffer 'running'"):
        net.running = 3.0

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(fg.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Early()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_train_eval_zero_grad_and_double():
    net = Net()
    assert net.training and net.body[1].training
    assert net.eval() is net and not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net(fg.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    params = list(net.parameters())
    assert net.double() is net and list(net.parameters()) == params  # same objects
    assert all(p.dtype == fg.float64 for p in params) and net.running.dtype == fg.float64
    assert net(fg.randn(2, 3, dtype=fg.float64)).dtype == fg.float64


def test_reprs_match_pytorch():
    model = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(inplace=True), nn.Tanh()),
                          nn.Sigmoid(), nn.MSELoss(), nn.CrossEntropyLoss())
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): Sequential(\n"
        "    (0): ReLU(inplace=True)\n"
        "    (1): Tanh()\n"
        "  )\n"
        "  (2): Sigmoid()\n"
        "  (3): MSELoss()\n"
        "  (4): CrossEntropyLoss()\n"
        ")")
    assert repr(nn.Linear(4, 1, bias=False)) == "Linear(in_features=4, out_features=1, bias=False)"
    assert repr(nn.Parameter(fg.tensor([1.0, 2.0]))) == (
        "Parameter containing:\ntensor([1., 2.], requires_grad=True)")


def test_sequential_container():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    seq.append(c)
    assert seq[2] is c and [n for n, _ in seq.named_children()] == ["0", "1", "2"]
    assert list(seq[1:]) == [b, c]
    named = nn.Sequential(collections.OrderedDict([("fc", a), ("act", b)]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    x = fg.randn(4, 2)
    assert_close(seq(x).detach().numpy(), c(b(a(x))).detach().numpy(), "f32")


# --- state_dict / load_state_dict ----------------------------------------------------------


def test_state_dict_is_detached_and_shares_memory():
    net = Net()
    sd = net.state_dict()
    assert type(sd) is collections.OrderedDict
    assert list(sd) == ["scale", "running", "body.0.weight", "body.0.bias", "head.weight"]
    assert all(not t.requires_grad and type(t) is fg.Tensor for t in sd.values())
    with fg.no_grad():
        net.scale.fill_(5.0)
    assert sd["scale"].item() == 5.0
    assert net.state_dict(keep_vars=True)["scale"] is net.scale


def test_load_state_dict_round_trip_through_fg_save():
    fg.manual_seed(0)
    src, dst = Net(), Net()
    buf = io.BytesIO()
    fg.save(src.state_dict(), buf)
    buf.seek(0)
    result = dst.load_state_dict(fg.load(buf))
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (n, p), q in zip(src.state_dict().items(), dst.state_dict().values()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=n)
    x = fg.randn(3, 3)
    np.testing.assert_array_equal(src(x).detach().numpy(), dst(x).detach().numpy())
    sd64 = {k: v.double() for k, v in src.state_dict().items()}
    assert Net().load_state_dict(sd64) is not None  # cast to the parameters' dtype
    assert dst.head.weight.dtype == fg.float32


def test_load_state_dict_assign_uses_the_given_tensors():
    fg.manual_seed(0)
    net = Net()
    net.body[0].weight.requires_grad_(False)
    sd = {k: v.double() for k, v in Net().state_dict().items()}
    sd["head.weight"] = nn.Parameter(sd["head.weight"])
    assert repr(net.load_state_dict(sd, assign=True)) == "<All keys matched successfully>"
    assert net.head.weight is sd["head.weight"]  # a Parameter is taken as it is
    w = net.body[0].weight
    assert isinstance(w, nn.Parameter) and w.dtype == fg.float64  # no cast with assign
    assert not w.requires_grad  # the old parameter's flag
    assert np.shares_memory(w.detach().numpy(), sd["body.0.weight"].numpy())
    assert net.running is sd["running"]  # buffers too
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in Net().named_parameters()]
    out = net(fg.randn(2, 3, dtype=fg.float64)).sum()
    out.backward()
    assert net.head.weight.grad is not None and w.grad is None
    with pytest.raises(RuntimeError, match=r"size mismatch for head\.weight"):
        net.load_state_dict({**sd, "head.weight": fg.ones(7)}, assign=True)


def _snapshot(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def _assert_unchanged(module, snapshot):
    for k, v in module.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), snapshot[k], err_msg=k)


def test_load_state_dict_errors_as_pytorch():
    net = Net()
    before = _snapshot(net)
    sd = Net().state_dict()
    del sd["head.weight"]
    sd["extra"] = fg.ones(1)
    sd["body.0.nope"] = fg.ones(1)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for Net:\n\t")
    assert 'Missing key(s) in state_dict: "head.weight". ' in msg
    assert 'Unexpected key(s) in state_dict: "extra", "body.0.nope". ' in msg  # module order
    _assert_unchanged(net, before)  # nothing is copied when loading fails
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert missing == ["head.weight"] and unexpected == ["extra", "body.0.nope"]
    np.testing.assert_array_equal(net.body[0].weight.detach().numpy(),
                                  sd["body.0.weight"].numpy())

    before = _snapshot(net)
    bad = Net().state_dict()
    bad["body.0.weight"] = fg.ones(3, 4)
    bad["scale"] = [1.0]
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(bad, strict=False)  # shape and type errors even when not strict
    assert ("size mismatch for body.0.weight: copying a param with shape "
            "fusegrad.Size([3, 4]) from checkpoint, the shape in current model is "
            "fusegrad.Size([4, 3]).") in str(info.value)
    assert 'While copying the parameter named "scale"' in str(info.value)
    _assert_unchanged(net, before)


# --- Linear -------------------------------------------------------------------------------


def test_linear_init_bounds_and_seeding():
    fg.manual_seed(123)
    a = nn.Linear(400, 50)
    fg.manual_seed(123)
    b = nn.Linear(400, 50)
    c = nn.Linear(400, 50)
    bound = 1 / math.sqrt(400)
    for p in a.parameters():
        v = p.detach().numpy()
        assert v.dtype == np.float32 and np.abs(v).max() <= bound
        assert np.abs(v).max() > 0.9 * bound and abs(v.mean()) < 0.2 * bound  # U(-b, b)
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    np.testing.assert_array_equal(a.bias.detach().numpy(), b.bias.detach().numpy())
    assert not np.array_equal(a.weight.detach().numpy(), c.weight.detach().numpy())
    d = nn.Linear(3, 2, dtype=fg.float64)
    assert d.weight.dtype == fg.float64 and d.bias.dtype == fg.float64
    assert [n for n, _ in nn.Linear(3, 2, bias=False).named_parameters()] == ["weight"]


def test_linear_forward_and_gradients_vs_numpy():
    lin = nn.Linear(3, 2, dtype=fg.float64)
    x = fg.randn(5, 3, dtype=fg.float64, requires_grad=True)
    y = lin(x)
    assert y.grad_fn.name() == "AddmmBackward0"
    W, b, xv = lin.weight.detach().numpy(), lin.bias.detach().numpy(), x.detach().numpy()
    assert_close(y.detach().numpy(), xv @ W.T + b, "exact64")
    g = np.random.default_rng(0).normal(size=(5, 2))
    y.backward(fg.tensor(g))
    assert_close(x.grad.numpy(), g @ W, "exact64")
    assert_close(lin.weight.grad.numpy(), g.T @ xv, "exact64")
    assert_close(lin.bias.grad.numpy(), g.sum(0), "exact64")
    assert_close(lin(x[0]).detach().numpy(), xv[0] @ W.T + b, "exact64")  # 1-D input
    with pytest.raises(ShapeError, match=r"input of shape \(5, 2\).*\(2, 3\)"):
        lin(fg.randn(5, 2, dtype=fg.float64))


# --- losses -------------------------------------------------------------------------------


def _np_log_softmax(x, axis=1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _ce_case():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 4)) * 3
    x[0] = [1000.0, -1000.0, 0.0, 999.0]  # huge logits stay finite
    t = np.array([0, 3, 1, 2, 1, 0])
    return x, t


def test_cross_entropy_value_and_gradient_vs_numpy():
    x, t = _ce_case()
    logits = fg.tensor(x, requires_grad=True)
    loss = nn.CrossEntropyLoss()(logits, fg.tensor(t))
    assert loss.grad_fn.name() == "NllLossBackward0"
    logp = _np_log_softmax(x)
    assert_close(loss.item(), -logp[np.arange(6), t].mean(), "exact64")
    loss.backward()
    onehot = np.eye(4)[t]
    assert_close(logits.grad.numpy(), (np.exp(logp) - onehot) / 6, "exact64")
    assert np.isfinite(logits.grad.numpy()).all()


def test_cross_entropy_weights_ignore_index_and_reductions():
    x, t = _ce_case()
    w = np.array([1.0, 2.0, 0.5, 3.0])
    logp = _np_log_softmax(x)
    keep = t != 1
    per = -w[t] * logp[np.arange(6), t]
    for reduction, expected in [("mean", per[keep].sum() / w[t][keep].sum()),
                                ("sum", per[keep].sum()), ("none", np.where(keep, per, 0.0))]:
        logits = fg.tensor(x, requires_grad=True)
        fn = nn.CrossEntropyLoss(weight=fg.tensor(w), ignore_index=1, reduction=reduction)
        loss = fn(logits, fg.tensor(t))
        assert_close(loss.detach().numpy(), expected, "exact64")
        v = np.random.default_rng(1).normal(size=6) if reduction == "none" else np.ones(())
        loss.backward(fg.tensor(v))
        scale = v if reduction == "none" else np.full(6, 1 / w[t][keep].sum()
                                                       if reduction == "mean" else 1.0)
        grad = (w[t] * keep * scale)[:, None] * (np.exp(logp) - np.eye(4)[t])
        assert_close(logits.grad.numpy(), grad, "exact64")


def test_cross_entropy_extra_dims_and_probability_targets():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 5))  # (N, C, d)
    t = rng.integers(0, 3, size=(2, 5))
    loss = F.cross_entropy(fg.tensor(x), fg.tensor(t))
    logp = _np_log_softmax(x)
    picked = np.take_along_axis(logp, t[:, None, :], axis=1)
    assert_close(loss.item(), -picked.mean(), "exact64")
    probs = rng.dirichlet(np.ones(3), size=4)
    xx = rng.normal(size=(4, 3))
    logits = fg.tensor(xx, requires_grad=True)
    soft = nn.CrossEntropyLoss()(logits, fg.tensor(probs))
    assert_close(soft.item(), -(probs * _np_log_softmax(xx)).sum(1).mean(), "exact64")
    soft.backward()
    assert_close(logits.grad.numpy(), (np.exp(_np_log_softmax(xx)) - probs) / 4, "exact64")


def test_cross_entropy_errors():
    x = fg.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, fg.tensor([0, 4, 1]))
    with pytest.raises(ShapeError, match=r"target of shape \(2,\).*\(3, 4\)"):
        F.cross_entropy(x, fg.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(x, fg.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="reduction"):
        nn.CrossEntropyLoss(reduction="avg")


def test_mse_loss_values_and_gradients_vs_numpy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    for reduction, scale in [("mean", 1 / 12), ("sum", 1.0), ("none", None)]:
        x, y = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
        loss = nn.MSELoss(reduction=reduction)(x, y)
        assert loss.grad_fn.name() == "MseLossBackward0"
        sq = (a - b) ** 2
        expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
        assert_close(loss.detach().numpy(), expected, "exact64")
        v = rng.normal(size=(4, 3)) if scale is None else np.ones(())
        loss.backward(fg.tensor(v))
        grad = 2 * (a - b) * (v if scale is None else scale)
        assert_close(x.grad.numpy(), grad, "exact64")
        assert_close(y.grad.numpy(), -grad, "exact64")
    with pytest.warns(UserWarning, match="target size"):
        nn.MSELoss()(fg.randn(4, 1), fg.randn(4))


# --- training loops -----------------------------------------------------------------------


def test_training_loop_regression_with_sgd():
    fg.manual_seed(0)
    x = fg.randn(128, 3)
    y = (x @ fg.tensor([[1.5], [-2.0], [0.5]])).tanh() + 0.3
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    loss_fn = nn.MSELoss()
    opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(80):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0], losses[::10]


def test_training_loop_classification_with_adam():
    fg.manual_seed(1)
    centers = fg.tensor([[2.0, 0.0], [-1.0, 2.0], [-1.0, -2.0]])
    labels = fg.arange(3).repeat(40)
    x = centers[labels] + 0.5 * fg.randn(120, 2)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = fg.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    accuracy = (model(x).argmax(1) == labels).float().mean().item()
    assert losses[-1] < 0.2 * losses[0] and accuracy > 0.95, (losses[::10], accuracy)


# --- optimizers vs NumPy transcriptions of PyTorch's formulas ------------------------------


_C = [np.array([[0.5, 1.0, 2.0], [0.3, 0.7, 1.5]]), np.array([0.2, 0.9])]


def _np_grads(ps):
    """Gradient of sum(c * p**2 + sin(p)) for each parameter."""
    return [2 * c * p + np.cos(p) for c, p in zip(_C, ps)]


def _fg_problem():
    rng = np.random.default_rng(7)
    init = [rng.normal(size=c.shape) for c in _C]
    ps = [fg.tensor(v, requires_grad=True) for v in init]
    unused = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)

    def loss():
        return sum((fg.tensor(c) * p * p + p.sin()).sum() for c, p in zip(_C, ps))

    return init, ps, unused, loss


def _run(opt, ps, loss, steps=20):
    for _ in range(steps):
        opt.zero_grad()
        loss().backward()
        opt.step()
    return [p.detach().numpy() for p in ps]


def _np_sgd(ps, lrs, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False, steps=20):
    ps, bufs = [p.copy() for p in ps], [None] * len(ps)
    for _ in range(steps):
        for i, g in enumerate(_np_grads(ps)):
            g = -g if maximize else g
            g = g + weight_decay * ps[i]
            if momentum != 0:
                bufs[i] = g if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            ps[i] = ps[i] - lrs[i] * g
    return ps


@pytest.mark.parametrize("kw", [
    {},
    {"momentum": 0.9},
    {"momentum": 0.8, "dampening": 0.3, "weight_decay": 0.1},
    {"momentum": 0.9, "nesterov": True, "weight_decay": 0.05},
    {"momentum": 0.5, "maximize": True},
])
def test_sgd_matches_pytorch_formulas(kw):
    init, ps, unused, loss = _fg_problem()
    opt = fg.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1], unused], "lr": 0.02}],
                       lr=0.05, **kw)
    got = _run(opt, ps, loss)
    for g, e in zip(got, _np_sgd(init, [0.05, 0.02], **kw)):
        assert_close(g, e, "exact64")
    assert unused.tolist() == [1.0, 2.0] and unused not in opt.state  # grad None: skipped
    if kw.get("momentum"):
        assert set(opt.state[ps[0]]) == {"momentum_buffer"}


def _np_adam(ps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, steps=20):
    b1, b2 = betas
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    vmax = [np.zeros_like(p) for p in ps]
    for t in range(1, steps + 1):
        for i, g in enumerate(_np_grads(ps)):
            g = -g if maximize else g
            g = g + weight_decay * ps[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1**t)
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
                v_hat = vmax[i] / (1 - b2**t)
            else:
                v_hat = v[i] / (1 - b2**t)
            ps[i] = ps[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return ps


@pytest.mark.parametrize("kw", [
    {},
    {"weight_decay": 0.1},
    {"amsgrad": True, "betas": (0.9, 0.9)},
    {"amsgrad": True, "weight_decay": 0.05, "betas": (0.8, 0.99), "eps": 1e-6},
    {"maximize": True},
])
def test_adam_matches_pytorch_formulas(kw):
    init, ps, unused, loss = _fg_problem()
    opt = fg.optim.Adam(ps + [unused], lr=0.1, **kw)
    got = _run(opt, ps, loss)
    for g, e in zip(got, _np_adam(init, 0.1, **kw)):
        assert_close(g, e, "exact64")
    assert unused.tolist() == [1.0, 2.0] and unused not in opt.state
    state = opt.state[ps[0]]
    assert state["step"].item() == 20 and state["step"].ndim == 0
    if kw.get("amsgrad"):  # the maximum mattered somewhere: the test can tell amsgrad apart
        assert (state["max_exp_avg_sq"] > state["exp_avg_sq"]).any().item()


def test_optimizers_update_float32_in_place():
    p = nn.Parameter(fg.tensor([1.0, -2.0]))
    for opt in (fg.optim.SGD([p], lr=0.1, momentum=0.9), fg.optim.Adam([p], lr=0.1)):
        before = p._version
        (p * p).sum().backward()
        opt.step()
        assert p.dtype == fg.float32 and p.is_leaf and p._version > before
        assert all(t.dtype == fg.float32 for t in opt.state[p].values() if t.ndim)
        opt.zero_grad()
        assert p.grad is None


def test_optimizer_state_dict_resume_is_exact():
    def make():
        fg.manual_seed(5)
        model = nn.Sequential(nn.Linear(3, 8, dtype=fg.float64), nn.Tanh(),
                              nn.Linear(8, 1, dtype=fg.float64))
        return model, fg.optim.Adam(model.parameters(), lr=0.05, amsgrad=True)

    x = fg.randn(16, 3, dtype=fg.float64)
    y = x.sum(1, keepdim=True).sin()

    def train(model, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            nn.MSELoss()(model(x), y).backward()
            opt.step()

    ref_model, ref_opt = make()
    train(ref_model, ref_opt, 6)
    model, opt = make()
    train(model, opt, 3)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1, 2, 3] and sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999)
    buf = io.BytesIO()
    fg.save({"model": model.state_dict(), "opt": sd}, buf)
    buf.seek(0)
    ck = fg.load(buf)
    model2, opt2 = make()
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    train(model2, opt2, 3)
    for p, q in zip(ref_model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt2.load_state_dict({"state": {}, "param_groups": []})


def test_param_groups_and_optimizer_errors():
    a, b = nn.Parameter(fg.ones(2)), nn.Parameter(fg.ones(3))
    opt = fg.optim.SGD([{"params": a}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["params"] == [a] and opt.param_groups[1]["momentum"] == 0.9
    assert repr(opt).startswith(  # PyTorch's text
        "SGD (\nParameter Group 0\n    dampening: 0\n    differentiable: False\n"
        "    foreach: None\n    fused: None\n    lr: 0.1\n    maximize: False\n"
        "    momentum: 0.9\n    nesterov: False\n    weight_decay: 0\n\nParameter Group 1\n")
    cases = [
        (lambda: fg.optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
        (lambda: fg.optim.SGD(a, lr=0.1), TypeError, "iterable of Tensors"),
        (lambda: fg.optim.SGD([a * 2], lr=0.1), ValueError, "non-leaf"),
        (lambda: fg.optim.SGD([np.ones(2)], lr=0.1), TypeError, "numpy.ndarray"),
        (lambda: fg.optim.SGD([{"params": {a}}], lr=0.1), TypeError, "ordered collections"),
        (lambda: fg.optim.SGD([a], lr=-1), ValueError, "Invalid learning rate"),
        (lambda: fg.optim.SGD([a], lr=0.1, nesterov=True), ValueError, "Nesterov"),
        (lambda: fg.optim.Adam([a], betas=(0.9, 1.0)), ValueError, "beta parameter at index 1"),
        (lambda: fg.optim.Adam([a], eps=-1.0), ValueError, "Invalid epsilon"),
        (lambda: opt.add_param_group({"params": [a]}), ValueError, "more than one"),
    ]
    for make, err, match in cases:
        with pytest.raises(err, match=match):
            make()
    closure_calls = []

    def closure():
        closure_calls.append(fg.is_grad_enabled())
        return 3.0

    with fg.no_grad():
        assert opt.step(closure) == 3.0
    assert closure_calls == [True]


def test_deepcopy_of_a_module_keeps_parameters():
    net = Net()
    twin = copy.deepcopy(net)
    assert isinstance(twin.scale, nn.Parameter) and twin.scale is not net.scale
    with fg.no_grad():
        twin.scale.fill_(2.0)
    assert net.scale.item() == 1.0
