"""The runnable snippets of shared/seeds/*.txt with ``torch`` renamed to ``fusegrad``.

Where a seed and PyTorch disagree PyTorch wins (the seed's ``arrange`` is
``arange``; ``y + 3`` prints ``AddBackward0``; a detached path leaves
``x.grad`` None). Values from random numbers are checked by relation.
The snippet that wraps a model in ``nn.DataParallel`` runs with fusegrad's
one-process wrapper; the disk hooks run with NumPy files and with ``fg.save``/``fg.load``.
"""

from __future__ import annotations

import os
import threading
import uuid
import warnings

import numpy as np
import pytest

import fusegrad as torch
from fusegrad.autograd import grad
from tests.helpers import assert_close


def _eq(t, expected):
    assert_close(t.detach().numpy(), np.asarray(expected, np.float32), "f32")


def test_seed_000_study_notes():
    x = torch.arange(4.0)
    assert repr(x) == "tensor([0., 1., 2., 3.])"
    x.requires_grad_(True)
    x = torch.arange(4.0, requires_grad=True)
    assert x.grad is None
    y = 2 * torch.dot(x, x)
    y.backward()
    x.grad.zero_()
    y = x * x
    y.backward(gradient=torch.ones(len(y)))
    _eq(x.grad, [0.0, 2.0, 4.0, 6.0])

    x = torch.tensor(2.0, requires_grad=True)
    y = x ** 2
    z = y + 3
    assert repr(z) == "tensor(7., grad_fn=<AddBackward0>)"
    z.backward()
    assert repr(x.grad) == "tensor(4.)"

    x = torch.tensor(2.0, requires_grad=True)
    w = torch.tensor(3.0, requires_grad=True)
    y = x * x
    z = w * w
    u = y * z
    u.backward(retain_graph=True)
    assert x.grad.item() == 36 and w.grad.item() == 24
    x.grad, w.grad = None, None
    u = y.detach() * z
    u.backward()
    assert x.grad is None and w.grad.item() == 24  # 2w * y


def test_seed_001_autograd_tutorial():
    x = torch.ones(2, 2, requires_grad=True)
    assert str(x) == "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)"
    y = x + 2
    assert str(y) == "tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)"
    assert repr(y.grad_fn).startswith("<AddBackward0 object at 0x")
    z = y * y * 3
    out = z.mean()
    assert str(z) == "tensor([[27., 27.],\n        [27., 27.]], grad_fn=<MulBackward0>)"
    assert str(out) == "tensor(27., grad_fn=<MeanBackward0>)"

    a = torch.randn(2, 2)
    a = ((a * 3) / (a - 1))
    assert a.requires_grad is False
    a.requires_grad_(True)
    assert a.requires_grad is True
    b = (a * a).sum()
    assert repr(b.grad_fn).startswith("<SumBackward0 object at")

    out.backward()
    assert str(x.grad) == "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])"

    x = torch.randn(3, requires_grad=True)
    y = x * 2
    k = 1
    while y.data.norm() < 1000:
        y = y * 2
        k += 1
    assert y.grad_fn.name() == "MulBackward0" and 1000 <= float(y.norm()) < 2000
    v = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(v)
    _eq(x.grad, np.array([0.1, 1.0, 0.0001]) * 2 ** k)

    assert x.requires_grad is True and (x ** 2).requires_grad is True
    with torch.no_grad():
        assert (x ** 2).requires_grad is False
    y = x.detach()
    assert y.requires_grad is False
    assert str(x.eq(y).all()) == "tensor(True)"


def test_seed_002_leaves_retain_grad_create_graph():
    a = torch.tensor([3.0], requires_grad=True)
    b = a * a
    c = torch.tensor([5.0])
    d = c * c
    assert a.requires_grad is True and a.is_leaf is True
    assert b.requires_grad is True and b.is_leaf is False
    assert c.requires_grad is False and c.is_leaf is True
    assert d.requires_grad is False and d.is_leaf is True
    a = torch.tensor([5.0], requires_grad=True)
    b = torch.tensor([5.0], requires_grad=True)
    c = torch.tensor([5.0], requires_grad=False)
    d = torch.sin(a * b * c)
    assert d.requires_grad == any(x.requires_grad for x in (a, b, c))

    a = torch.tensor([3.0], requires_grad=True)
    b = a * a
    b.backward()
    assert a.grad is not None
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert b.grad is None

    a = torch.tensor([3.0], requires_grad=True)
    b = a * a
    b.retain_grad()
    b.backward()
    assert isinstance(a.grad, torch.Tensor)
    assert a.grad.requires_grad is False and a.grad.retains_grad is False and a.grad.is_leaf
    assert b.grad.requires_grad is False and b.grad.retains_grad is False and b.grad.is_leaf
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        b.backward()

    a = torch.tensor([3.0], requires_grad=True)
    b = a * a
    b.retain_grad()
    b.backward(retain_graph=True)
    assert str(a.grad) == "tensor([6.])"
    b.backward(retain_graph=True)
    assert str(a.grad) == "tensor([12.])"
    b.backward(retain_graph=False)
    assert str(a.grad) == "tensor([18.])"
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        b.backward(retain_graph=False)

    a = torch.tensor([5.0], requires_grad=True)
    b = a * a
    b.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.backward(create_graph=True)
    assert a.grad.requires_grad is True and a.grad.is_leaf is False
    assert b.grad.requires_grad is False and b.grad.is_leaf is True

    a = torch.tensor([3.0], requires_grad=True)
    b = a * a * a
    db_da = grad(b, a, create_graph=True)[0]
    assert db_da.requires_grad is True
    d2b_da2 = grad(db_da, a, create_graph=True)[0]
    assert d2b_da2.item() == 18
    assert d2b_da2.requires_grad is True


def test_seed_003_saved_tensors_and_hooks():
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    assert x.equal(y.grad_fn._saved_self) and x is y.grad_fn._saved_self
    x = torch.randn(5, requires_grad=True)
    y = x.exp()
    assert y.equal(y.grad_fn._saved_result) and y is not y.grad_fn._saved_result


def test_seed_003_threads():
    grads = []

    def train_fn():
        x = torch.ones(5, 5, requires_grad=True)
        y = (x + 3) * (x + 4) * 0.5
        y.sum().backward()
        grads.append(x.grad)

    threads = []
    for _ in range(10):
        p = threading.Thread(target=train_fn, args=())
        p.start()
        threads.append(p)
    for p in threads:
        p.join()
    assert len(grads) == 10
    for g in grads:
        _eq(g, np.full((5, 5), 4.5))


class SelfDeletingTempFile:
    def __init__(self, tmp_dir):
        self.name = os.path.join(tmp_dir, str(uuid.uuid4()))

    def __del__(self):
        os.remove(self.name)


def _disk_hooks(tmp_dir, save, load, threshold=0):
    def pack_hook(tensor):
        if tensor.numel() < threshold:
            return tensor
        temp_file = SelfDeletingTempFile(tmp_dir)
        save(tensor, temp_file.name)
        return temp_file

    def unpack_hook(tensor_or_sctf):
        if isinstance(tensor_or_sctf, torch.Tensor):
            return tensor_or_sctf
        return load(tensor_or_sctf.name)

    return pack_hook, unpack_hook


def _np_save(tensor, name):
    with open(name, "wb") as f:
        np.save(f, tensor.detach().numpy())


def _np_load(name):
    with open(name, "rb") as f:
        return torch.from_numpy(np.load(f))


def test_seed_003_saved_tensors_on_disk(tmp_path):
    pack_hook, unpack_hook = _disk_hooks(str(tmp_path), _np_save, _np_load)
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(pack_hook, unpack_hook)
    assert len(os.listdir(tmp_path)) == 1
    y.sum().backward()
    _eq(x.grad, 2 * x.detach().numpy())

    pack_hook, unpack_hook = _disk_hooks(str(tmp_path), _np_save, _np_load, threshold=1000)

    class Model(torch.nn.Module):  # the seed's model, wrapped in DataParallel as there
        def forward(self, inp):
            with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
                return (inp * inp).sum() + (inp.exp() * 2).sum()

    forward = torch.nn.DataParallel(Model())

    big = torch.randn(2000, requires_grad=True)
    small = torch.randn(10, requires_grad=True)
    (forward(big) + forward(small)).backward()
    _eq(big.grad, 2 * big.detach().numpy() + 2 * np.exp(big.detach().numpy()))
    _eq(small.grad, 2 * small.detach().numpy() + 2 * np.exp(small.detach().numpy()))


def test_seed_003_saved_tensors_with_fg_save(tmp_path):
    pack_hook, unpack_hook = _disk_hooks(str(tmp_path), torch.save, torch.load)
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(pack_hook, unpack_hook)
    y.sum().backward()


def test_seed_003_optimizer_loop_edits_grads():
    torch.manual_seed(0)
    params = [torch.randn(3, requires_grad=True), torch.randn(2, 2, requires_grad=True)]

    def model(s):
        return (params[0] * s).sum() + (params[1] ** 2).sum()

    z_theta = [torch.zeros_like(p) for p in params]
    gamma, lamda, alpha, delta, lr = 0.9, 0.5, 0.1, 2.0, 1.0
    for _ in range(3):
        for p in params:
            p.grad = None
        v = model(torch.ones(3))
        v.backward()
        expected = [z.detach().numpy().copy() for z in z_theta]
        for i, p in enumerate(params):
            expected[i] = gamma * lamda * expected[i] + lr * p.grad.numpy()
            z_theta[i][:] = gamma * lamda * z_theta[i] + lr * p.grad
            p.grad[:] = alpha * delta * z_theta[i]
            _eq(z_theta[i], expected[i])
            _eq(p.grad, alpha * delta * expected[i])
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        assert all(p.is_leaf and p.requires_grad for p in params)


def test_seed_003_graph_and_non_scalar_backward():
    a = torch.randn((3, 3), requires_grad=True)
    w1 = torch.randn((3, 3), requires_grad=True)
    w2 = torch.randn((3, 3), requires_grad=True)
    w3 = torch.randn((3, 3), requires_grad=True)
    w4 = torch.randn((3, 3), requires_grad=True)
    b = w1 * a
    c = w2 * a
    d = w3 * b + w4 * c
    L = 10 - d
    assert a.grad_fn is None and d.grad_fn.name() == "AddBackward0"
    assert L.grad_fn.name() == "RsubBackward1"
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        L.backward()
    t1 = torch.randn((3, 3), requires_grad=True)
    t2 = torch.FloatTensor(3, 3)
    t2.requires_grad = True
    assert t1.requires_grad and t2.requires_grad and t2.dtype == torch.float32
    tsr = torch.Tensor(3, 5)
    assert tsr.shape == (3, 5) and tsr.dtype == torch.float32


def test_seed_004_backward_with_gradient_argument():
    a = torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.float, requires_grad=True)
    for i in range(2):
        for j in range(3):
            out = a[i, j] * a[i, j]
            out.backward()
    assert str(a.grad) == "tensor([[ 2.,  4.,  6.],\n        [ 8., 10., 12.]])"
    a.grad = None
    out = a * a
    out.backward(a)
    _eq(a.grad, 2 * a.detach().numpy() ** 2)
    a.grad = None
    out = a * a
    out.backward(torch.ones(2, 3))
    assert str(a.grad) == "tensor([[ 2.,  4.,  6.],\n        [ 8., 10., 12.]])"
