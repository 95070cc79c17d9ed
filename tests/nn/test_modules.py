"""The new ``fg.nn`` modules: values against PyTorch, ``repr``, ``state_dict`` keys,
train/eval behaviour, and a small CNN trained eagerly and under ``fg.jit``."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad import nn
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _copy_params(fmod, tmod):
    """fusegrad parameters and buffers into the same-named PyTorch ones."""
    with torch.no_grad():
        for k, v in fmod.state_dict().items():
            tmod.state_dict()[k].copy_(torch.tensor(v.detach().numpy()))


def test_reprs_and_state_dict_keys_match_torch():
    fg.manual_seed(0)
    mods = [(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
             torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)),
            (nn.Conv1d(4, 6, 5, dilation=2, groups=2), torch.nn.Conv1d(4, 6, 5, dilation=2,
                                                                       groups=2)),
            (nn.BatchNorm2d(5, momentum=None), torch.nn.BatchNorm2d(5, momentum=None)),
            (nn.BatchNorm1d(5, affine=False), torch.nn.BatchNorm1d(5, affine=False)),
            (nn.LayerNorm((4, 5)), torch.nn.LayerNorm((4, 5))),
            (nn.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
            (nn.Dropout(0.3), torch.nn.Dropout(0.3)),
            (nn.Embedding(10, 3, padding_idx=0), torch.nn.Embedding(10, 3, padding_idx=0)),
            (nn.Flatten(), torch.nn.Flatten()), (nn.Unflatten(1, (2, 3)),
                                                 torch.nn.Unflatten(1, (2, 3))),
            (nn.Identity(), torch.nn.Identity()), (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
            (nn.ELU(), torch.nn.ELU()), (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
            (nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1)), (nn.GELU(), torch.nn.GELU())]
    for f, t in mods:
        assert repr(f) == repr(t)
        assert list(f.state_dict()) == list(t.state_dict())
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    md = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.Tanh()})
    assert repr(ml) == repr(torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.ReLU()]))
    assert list(md.state_dict()) == ["a.weight", "a.bias"]
    assert len(list(ml.parameters())) == 2 and ml[-1].__class__ is nn.ReLU


def test_conv_default_init_is_kaiming_uniform_a_sqrt5():
    fg.manual_seed(1)
    conv = nn.Conv2d(4, 16, 3)
    bound = 1 / np.sqrt(4 * 9)  # gain(leaky_relu, sqrt 5) * sqrt(3 / fan_in) = 1/sqrt(fan_in)
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound and w.std() == pytest.approx(bound / np.sqrt(3), rel=0.15)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_train_eval_and_running_stats_match_torch(momentum):
    rng = np.random.default_rng(0)
    f, t = nn.BatchNorm2d(3, momentum=momentum).double(), torch.nn.BatchNorm2d(
        3, momentum=momentum).double()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(rng.uniform(0.5, 2, 3)))
    _copy_params(f, t)
    for _ in range(3):
        x = rng.standard_normal((4, 3, 5, 5)) * 2 + 1
        fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fo, to = f(fx), t(tx)
        assert_close(fo.detach().numpy(), to.detach().numpy(), "exact64")
        (fo ** 3).sum().backward()
        (to ** 3).sum().backward()
        assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")
    for k in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(f.state_dict()[k].detach().numpy(), t.state_dict()[k].numpy(), "exact64")
    f.eval()
    t.eval()
    x = rng.standard_normal((2, 3, 4, 4))
    assert_close(f(fg.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), "exact64")
    b1f, b1t = nn.BatchNorm1d(3).double(), torch.nn.BatchNorm1d(3).double()
    x = rng.standard_normal((6, 3))
    assert_close(b1f(fg.tensor(x)).detach().numpy(), b1t(torch.tensor(x)).detach().numpy(),
                 "exact64")


def test_layernorm_embedding_activations_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5))
    f, t = nn.LayerNorm((4, 5)).double(), torch.nn.LayerNorm((4, 5)).double()
    with torch.no_grad():
        t.weight.copy_(torch.tensor(rng.standard_normal((4, 5))))
    _copy_params(f, t)
    fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (f(fx) ** 2 * fg.tensor(x)).sum().backward()
    (t(tx) ** 2 * torch.tensor(x)).sum().backward()
    assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")
    assert_close(f.weight.grad.numpy(), t.weight.grad.numpy(), "exact64")
    w = rng.standard_normal((6, 3))
    fe = nn.Embedding.from_pretrained(fg.tensor(w), freeze=False, padding_idx=2)
    te = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False, padding_idx=2)
    idx = np.array([[0, 2, 5], [2, 1, 0]])
    (fe(fg.tensor(idx)) ** 2).sum().backward()
    (te(torch.tensor(idx)) ** 2).sum().backward()
    assert_close(fe.weight.grad.numpy(), te.weight.grad.numpy(), "exact64")
    for fm, tm in ((nn.LeakyReLU(0.1), torch.nn.LeakyReLU(0.1)), (nn.ELU(0.5),
                   torch.nn.ELU(0.5)), (nn.GELU("tanh"), torch.nn.GELU("tanh"))):
        fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fm(fx).sum().backward()
        tm(tx).sum().backward()
        assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")


def test_dropout_train_eval_scaling_and_fresh_masks():
    fg.manual_seed(3)
    d = nn.Dropout(0.25)
    x = fg.ones(200, 50)
    a, b = d(x).numpy(), d(x).numpy()
    assert set(np.unique(a).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((a == 0).mean() - 0.25) < 0.02 and not np.array_equal(a, b)
    d.eval()
    assert np.array_equal(d(x).numpy(), x.numpy())
    y = fg.ones(10, requires_grad=True)
    out = nn.functional.dropout(y, 0.5, training=True)
    out.sum().backward()
    assert_close(y.grad.numpy(), out.detach().numpy(), "f32")  # mask * 2


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def test_small_cnn_trains_the_same_eagerly_and_under_jit():
    rng = np.random.default_rng(4)
    xs = [fg.tensor(rng.standard_normal((6, 1, 8, 8)).astype(np.float32)) for _ in range(3)]
    ys = [fg.tensor(rng.integers(0, 3, 6)) for _ in range(3)]
    models, losses = [], []
    for compiled in (False, True):
        fg.manual_seed(0)
        model = _cnn()
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def step(x, y, model=model, opt=opt, loss_fn=loss_fn):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run = fg.jit(step) if compiled else step
        losses.append([float(run(x, y)) for x, y in zip(xs, ys)])
        models.append(model)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    for (k, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        assert_close(b.detach().numpy(), a.detach().numpy(), "f32", k)
    assert int(models[1][1].num_batches_tracked) == 3
    keys = [m[4]._key.numpy() for m in models]  # the dropout key stepped as many times
    assert np.array_equal(keys[0], keys[1])


def test_conv_pool_shape_modules_match_torch_with_the_same_state():
    fg.manual_seed(5)
    torch.manual_seed(5)
    pairs = [(nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
              torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 9)),
             (nn.Conv2d(3, 5, (3, 2), padding="same", dilation=2),
              torch.nn.Conv2d(3, 5, (3, 2), padding="same", dilation=2), (2, 3, 7, 6)),
             (nn.MaxPool1d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool1d(3, 2, 1, ceil_mode=True),
              (2, 3, 10)),
             (nn.AvgPool1d(3, 2, 1), torch.nn.AvgPool1d(3, 2, 1), (2, 3, 10)),
             (nn.AvgPool2d(3, 2, 1, count_include_pad=False),
              torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 7, 6)),
             (nn.Unflatten(1, (2, 3)), torch.nn.Unflatten(1, (2, 3)), (4, 6, 2)),
             (nn.Flatten(0, 1), torch.nn.Flatten(0, 1), (4, 6, 2))]
    rng = np.random.default_rng(6)
    for f, t, shape in pairs:
        f.double()
        t.double()
        _copy_params(f, t)
        x = rng.standard_normal(shape)
        fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fo, to = f(fx), t(tx)
        assert_close(fo.detach().numpy(), to.detach().numpy(), "exact64", repr(f))
        (fo * fo).sum().backward()
        (to * to).sum().backward()
        assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64", repr(f))
        for (k, p), q in zip(f.named_parameters(), t.parameters()):
            assert_close(p.grad.numpy(), q.grad.numpy(), "exact64", k)
    md = nn.ModuleDict({"a": nn.ReLU()})
    md["b"] = nn.Tanh()
    assert list(md.keys()) == ["a", "b"] and "b" in md and len(md) == 2
    assert md.pop("a").__class__ is nn.ReLU and list(md) == ["b"]
