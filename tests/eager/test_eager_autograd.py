"""SEMANTICS.md "Eager Tensor": creation, attributes, repr, and autograd items 1-14.

One test per numbered autograd item (``test_item_NN_...``), asserting values,
flags and PyTorch's error messages.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import fusegrad as fg
from tests.helpers import assert_close


def _close(t, expected):
    assert_close(t.detach().numpy(), np.asarray(expected, dtype=t.detach().numpy().dtype), "f32")


# --- creation, dtypes, attributes, repr --------------------------------------------


def test_creation_functions_and_default_dtypes():
    assert fg.tensor([1, 2]).dtype == fg.int64 == fg.long
    assert fg.tensor([1.0, 2]).dtype == fg.float32 == fg.float
    assert fg.tensor(True).dtype == fg.bool
    assert fg.tensor(np.zeros(2)).dtype == fg.float64 == fg.double
    assert fg.arange(4.0).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert fg.arange(4).dtype == fg.int64
    x = fg.arange(4.0, requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    assert fg.zeros(2, 3).shape == (2, 3) and fg.ones((2,)).tolist() == [1.0, 1.0]
    assert fg.full((2,), 7).dtype == fg.int64 and fg.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert fg.zeros_like(x).shape == x.shape and fg.ones_like(x).dtype == fg.float32
    assert fg.empty(3).shape == (3,) and fg.empty_like(x).shape == (4,)
    assert fg.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    t = fg.Tensor(3, 5)
    assert t.shape == (3, 5) and t.dtype == fg.float32
    f = fg.FloatTensor(3, 3)
    f.requires_grad = True
    assert isinstance(f, fg.FloatTensor) and not isinstance(f, fg.DoubleTensor)
    assert isinstance(fg.DoubleTensor([1.0]), fg.DoubleTensor)
    assert repr(fg.float32) == "fusegrad.float32"
    assert repr(fg.Size([2, 2])) == "fusegrad.Size([2, 2])"


def test_random_tensors_are_seedable():
    fg.manual_seed(3)
    a, b = fg.rand(4), fg.randn(2, 2)
    fg.manual_seed(3)
    assert a.equal(fg.rand(4)) and b.equal(fg.randn(2, 2))
    assert float(a.min()) >= 0 and float(a.max()) < 1


def test_default_dtype_can_change():
    fg.set_default_dtype(fg.float64)
    try:
        assert fg.tensor(1.5).dtype == fg.float64 and fg.get_default_dtype() == fg.float64
        assert repr(fg.tensor([1.0], dtype=fg.float32)) == "tensor([1.], dtype=fusegrad.float32)"
    finally:
        fg.set_default_dtype(fg.float32)


def test_numpy_interop_shares_memory():
    a = np.zeros(3, np.float32)
    t = fg.from_numpy(a)
    a[0] = 5
    assert t[0].item() == 5
    t.add_(1)
    assert a.tolist() == [6, 1, 1]
    assert t.numpy() is a
    c = fg.tensor(a)
    a[1] = 9
    assert c[1].item() == 1  # fg.tensor copies
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        fg.ones(2, requires_grad=True).numpy()


def test_attributes_and_conversions():
    x = fg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3 and x.size(-1) == 3
    assert x.ndim == x.dim() == 2 and x.numel() == 6 and len(x) == 2
    assert x.T.shape == (3, 2) and x.t().tolist() == [[1, 4], [2, 5], [3, 6]]
    assert x.tolist() == [[1, 2, 3], [4, 5, 6]] and x[1, 2].item() == 6.0
    assert x.double().dtype == fg.float64 and x.long().dtype == fg.int64
    assert x.to(fg.float64).dtype == fg.float64 and x.float() is x
    assert x.type() == "fusegrad.FloatTensor" and x.type(fg.DoubleTensor).dtype == fg.float64
    assert x.clone().equal(x) and x.eq(x).all().item() is True
    assert not fg.tensor([1, 0]).all() and fg.tensor([1, 0]).any()
    assert x.sum().item() == 21 and x.sum(0).tolist() == [5, 7, 9]
    assert x.sum(dim=1, keepdim=True).shape == (2, 1)
    assert x.mean().item() == 3.5 and x.prod().item() == 720
    values, indices = x.max(dim=1)
    assert values.tolist() == [3, 6] and indices.tolist() == [2, 2]
    assert x.max().item() == 6 and x.min().item() == 1 and x.argmax().item() == 5
    assert x.view(3, 2).shape == (3, 2) and x.reshape(-1).shape == (6,)
    assert x.unsqueeze(0).shape == (1, 2, 3) and x.unsqueeze(0).squeeze().shape == (2, 3)
    assert x.permute(1, 0).shape == (3, 2) and x.transpose(0, 1).shape == (3, 2)
    assert x.flatten().shape == (6,) and x[:, None].shape == (2, 1, 3)
    assert fg.tensor([1.0, 2.0]).expand(3, 2).shape == (3, 2)
    assert (x @ x.T).tolist() == [[14, 32], [32, 77]] and x.mm(x.t()).shape == (2, 2)
    assert fg.tensor([1.0, 2.0]).dot(fg.tensor([3.0, 4.0])).item() == 11
    assert fg.tensor([3.0, 4.0]).norm().item() == 5.0
    assert fg.tensor([-1.0, 2.0]).clamp(0, 1).tolist() == [0.0, 1.0]
    assert fg.tensor([-1.0, 2.0]).relu().tolist() == [0.0, 2.0]
    assert float(fg.tensor(2.5)) == 2.5 and int(fg.tensor(3)) == 3


def test_pytorch_type_promotion():
    i = fg.tensor([1, 2])
    assert (i * 2.5).dtype == fg.float32 and (i * 2).dtype == fg.int64
    assert (i / i).dtype == fg.float32 and (i / 2).tolist() == [0.5, 1.0]
    f = fg.ones(3)
    assert (f + fg.tensor(1.0, dtype=fg.float64)).dtype == fg.float32
    assert (f + fg.ones(3, dtype=fg.float64)).dtype == fg.float64
    assert (fg.tensor([True]) + 1).dtype == fg.int64
    assert (i < 1.5).tolist() == [True, False]


def test_repr_matches_pytorch():
    assert repr(fg.arange(4.0, requires_grad=True)) == (
        "tensor([0., 1., 2., 3.], requires_grad=True)")
    assert repr(fg.ones(2, 2, requires_grad=True)) == (
        "tensor([[1., 1.],\n        [1., 1.]], requires_grad=True)")
    x = fg.tensor(2.0, requires_grad=True)
    assert repr(x ** 2 + 3) == "tensor(7., grad_fn=<AddBackward0>)"
    assert repr(fg.tensor([4.5, 4.5]).mean()) == "tensor(4.5000)"
    assert repr(fg.tensor([102.4, 1024.0, 0.1024])) == (
        "tensor([1.0240e+02, 1.0240e+03, 1.0240e-01])")
    assert repr(fg.tensor([-285.0968, -947.5601])) == "tensor([-285.0968, -947.5601])"
    assert repr(fg.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(fg.tensor(True)) == "tensor(True)"
    assert repr(fg.tensor([1.0], dtype=fg.float64)) == "tensor([1.], dtype=fusegrad.float64)"
    assert repr(fg.tensor([1], dtype=fg.int32)) == "tensor([1], dtype=fusegrad.int32)"
    assert repr(fg.zeros(0)) == "tensor([])" and repr(fg.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(fg.arange(2000.0)).startswith("tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ...,")
    y = fg.ones(2, 2, requires_grad=True).mean()
    assert repr(y) == "tensor(1., grad_fn=<MeanBackward0>)"


# --- autograd, items 1-14 -------------------------------------------------------------


def test_item_01_requires_grad_property_and_propagation():
    x = fg.tensor([1.0, 2.0])
    assert x.requires_grad_(True) is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    a = fg.tensor([5.0], requires_grad=True)
    b = fg.tensor([5.0], requires_grad=True)
    c = fg.tensor([5.0], requires_grad=False)
    d = fg.sin(a * b * c)
    assert d.requires_grad == any(t.requires_grad for t in (a, b, c))
    assert not (c * c).requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        fg.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        (a * 2).requires_grad = False


def test_item_02_leaves_grad_fn_names_and_saved_tensors():
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a
    c = fg.tensor([5.0])
    d = c * c
    assert a.is_leaf and not b.is_leaf and c.is_leaf and d.is_leaf
    assert a.grad_fn is None and b.grad_fn.name() == "MulBackward0"
    assert type(b.grad_fn).__name__ == "MulBackward0"
    acc, nr = b.grad_fn.next_functions[0]
    assert acc.name() == "AccumulateGrad" and acc.variable is a and nr == 0
    names = {
        "AddBackward0": a + 1, "SubBackward0": a - 1, "RsubBackward1": 2 - a,
        "DivBackward0": a / 2, "PowBackward0": a ** 2, "PowBackward1": a ** a,
        "PowBackward2": 2 ** a, "NegBackward0": -a, "ExpBackward0": a.exp(),
        "SumBackward0": a.sum(), "SumBackward1": a.sum(0), "MeanBackward0": a.mean(),
        "MeanBackward1": a.mean(0), "MaxBackward1": a.max(), "TanhBackward0": a.tanh(),
        "SigmoidBackward0": a.sigmoid(), "LinalgVectorNormBackward0": a.norm(),
        "SelectBackward0": a[0], "ViewBackward0": a.view(1, 1), "CloneBackward0": a.clone(),
        "PermuteBackward0": a.view(1, 1).T, "TBackward0": a.view(1, 1).t(),
        "MmBackward0": a.view(1, 1) @ a.view(1, 1), "DotBackward0": a.dot(a),
        "MulBackward0": 2 / a, "IndexBackward0": a[[0, 0]], "SliceBackward0": a[1:],
    }
    for name, t in names.items():
        assert t.grad_fn.name() == name, (name, t.grad_fn)
    assert (2 / a).grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    x = fg.randn(5, requires_grad=True)
    y = x.pow(2)
    assert x.equal(y.grad_fn._saved_self) and x is y.grad_fn._saved_self
    y = x.exp()
    assert y.equal(y.grad_fn._saved_result) and y is not y.grad_fn._saved_result
    with pytest.raises(AttributeError):
        (x + 1).grad_fn._saved_self  # noqa: B018  (AddBackward0 saves nothing)


def test_item_03_backward_scalar_only_and_vector_jacobian_products():
    x = fg.tensor([[2.0]], requires_grad=True)
    (x * x).backward()  # one element, any shape
    _close(x.grad, [[4.0]])
    a = fg.randn(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (10 - a).backward()
    x = fg.arange(4.0, requires_grad=True)
    y = x * x
    y.backward(gradient=fg.ones(len(y)))
    _close(x.grad, [0.0, 2.0, 4.0, 6.0])
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
        (x * 2).backward(fg.ones(3))


def test_item_04_gradients_accumulate_until_zeroed():
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a
    for expected in (6.0, 12.0, 18.0):
        b.backward(retain_graph=True)
        _close(a.grad, [expected])
    g = a.grad
    assert not g.requires_grad and g.is_leaf and isinstance(g, fg.Tensor)
    a.grad.zero_()
    b.backward(retain_graph=True)
    _close(a.grad, [6.0])
    a.grad = None
    b.backward()
    _close(a.grad, [6.0])


def test_item_05_non_leaf_grad_warns_unless_retained():
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a
    b.backward()
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert b.grad is None
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a
    b.retain_grad()
    b.backward()
    assert b.retains_grad and not a.retains_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(b.grad, [1.0])
    assert not b.grad.requires_grad and b.grad.is_leaf


def test_item_06_saved_tensors_freed_by_backward():
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a
    b.backward()
    with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time "
                       r"(.|\n)*Specify retain_graph=True"):
        b.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        b.grad_fn._saved_self  # noqa: B018
    c = a + 1  # AddBackward0 saves nothing: a second backward works, as in PyTorch
    c.backward()
    c.backward()


def test_item_07_create_graph_makes_differentiable_grads():
    a = fg.tensor([5.0], requires_grad=True)
    b = a * a
    b.retain_grad()
    with pytest.warns(UserWarning, match="reference cycle"):
        b.backward(create_graph=True)
    assert a.grad.requires_grad and not a.grad.is_leaf
    assert not b.grad.requires_grad and b.grad.is_leaf
    b.backward()  # retain_graph defaulted to create_graph
    _close(a.grad, [20.0])


def test_item_08_autograd_grad_second_and_third_derivatives():
    a = fg.tensor([3.0], requires_grad=True)
    b = a * a * a
    (db,) = fg.autograd.grad(b, a, create_graph=True)
    assert db.requires_grad
    (d2,) = fg.autograd.grad(db, a, create_graph=True)
    assert d2.item() == 18 and d2.requires_grad
    (d3,) = fg.autograd.grad(d2, [a])
    assert d3.item() == 6
    assert a.grad is None
    x, y = fg.tensor(1.0, requires_grad=True), fg.tensor(2.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        fg.autograd.grad(x * 2, [x, y])
    gx, gy = fg.autograd.grad(x * 2, [x, y], allow_unused=True)
    assert gx.item() == 2 and gy is None


def test_item_09_detach_and_grad_modes():
    x = fg.tensor(2.0, requires_grad=True)
    w = fg.tensor(3.0, requires_grad=True)
    y, z = x * x, w * w
    u = y.detach() * z
    u.backward()
    assert x.grad is None and w.grad.item() == 24
    d = x.detach()
    assert not d.requires_grad and d.is_leaf and d._version == x._version
    d.zero_()  # shares data
    assert x.item() == 0
    e = fg.tensor([1.0], requires_grad=True)
    (e * 2).detach_()
    with fg.no_grad():
        assert not (e * 2).requires_grad
        with fg.enable_grad():
            assert (e * 2).requires_grad
    with fg.set_grad_enabled(False):
        assert not fg.is_grad_enabled()
    assert fg.is_grad_enabled()
    with fg.inference_mode():
        t = e * 2
    assert not t.requires_grad and t.is_inference()

    @fg.no_grad()
    def f(v):
        return v * 2

    @fg.no_grad
    def g(v):
        return v * 2

    assert not f(e).requires_grad and not g(e).requires_grad
    seen = []

    def other_thread():
        seen.append(fg.is_grad_enabled())

    with fg.no_grad():
        th = threading.Thread(target=other_thread)
        th.start()
        th.join()
    assert seen == [True]


def test_item_10_hooks():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 2)
    (x * 3).sum().backward()
    _close(x.grad, [6.0, 6.0])
    handle.remove()
    x.grad = None
    y = x * 3
    y.register_hook(lambda g: g + 1)
    y.sum().backward()
    _close(x.grad, [6.0, 6.0])
    packed = []

    def pack(t):
        packed.append(t)
        return t.detach().numpy().copy()

    def unpack(a):
        return fg.from_numpy(a)

    x.grad = None
    with fg.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x.pow(2)
    assert packed and packed[0] is x
    y.sum().backward()
    _close(x.grad, [2.0, 4.0])
    y = x.pow(2)
    y.grad_fn._raw_saved_self.register_hooks(pack, unpack)
    x.grad = None
    y.sum().backward()
    _close(x.grad, [2.0, 4.0])


def test_item_11_custom_function():
    class Cube(fg.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return 3 * x ** 2 * g * ctx.k, None

    x = fg.tensor(2.0, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward" and y.item() == 16
    (g,) = fg.autograd.grad(y, x, create_graph=True)
    assert g.item() == 24
    (g2,) = fg.autograd.grad(g, x)
    assert g2.item() == 24  # d/dx 6 x^2 = 12 x


def test_item_12_version_counters_and_inplace_rules():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"a leaf Variable that requires grad is being used in "
                                           r"an in-place operation\."):
        x.add_(1)
    y = x.exp()
    assert y._version == 0
    y.add_(1)
    assert y._version == 1 and y.grad_fn.name() == "AddBackward0"
    with pytest.raises(RuntimeError, match=(
            r"one of the variables needed for gradient computation has been modified by an "
            r"inplace operation: \[fusegrad.FloatTensor \[3\]\], which is output 0 of "
            r"ExpBackward0, is at version 1; expected version 0 instead")):
        y.sum().backward()
    z = x * 2
    z.mul_(3)
    z.sum().backward()
    _close(x.grad, [6.0, 6.0, 6.0])
    with fg.no_grad():
        x -= 0.5 * x.grad
    assert x.is_leaf and x.requires_grad and x._version == 1
    _close(x, [-2.0, -1.0, 0.0])
    w = fg.zeros(3)
    w[1] = 5.0
    w[fg.tensor([0, 2])] = fg.tensor([1.0, 2.0])
    assert w.tolist() == [1.0, 5.0, 2.0] and w._version == 2
    v = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    u = v * 1
    u[0] = 0.0
    assert u.grad_fn.name() == "CopySlices"
    u.sum().backward()
    _close(v.grad, [0.0, 1.0, 1.0])


def test_item_13_backward_is_thread_safe():
    errors = []
    shared = fg.ones(3, requires_grad=True)

    def work():
        try:
            for _ in range(20):
                x = fg.ones(5, 5, requires_grad=True)
                y = (x + 3) * (x + 4) * 0.5
                y.sum().backward()
                assert np.allclose(x.grad.numpy(), 4.5)
                (shared * 2).sum().backward()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    _close(shared.grad, [8 * 20 * 2.0] * 3)


def test_item_14_data_dependent_control_flow():
    fg.manual_seed(0)
    x = fg.randn(3, requires_grad=True)
    y = x * 2
    k = 1
    while y.data.norm() < 1000:
        y = y * 2
        k += 1
    v = fg.tensor([0.1, 1.0, 0.0001], dtype=fg.float)
    y.backward(v)
    _close(x.grad, np.array([0.1, 1.0, 0.0001]) * 2.0 ** k)
    assert y.grad_fn.name() == "MulBackward0"
