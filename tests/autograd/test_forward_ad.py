"""Eager forward-mode AD (``fg.autograd.forward_ad``) against ``fg.jvp`` and PyTorch."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.autograd import forward_ad as fwAD
from fusegrad.eager import dual, fast

RNG = np.random.default_rng(0)


def _arr(*shape):
    return RNG.standard_normal(shape)


def _eager_jvp(f, primals, tangents):
    """``f``'s value and JVP through dual eager tensors."""
    with fwAD.dual_level():
        duals = [fwAD.make_dual(fg.tensor(p), fg.tensor(t)) for p, t in zip(primals, tangents)]
        out = f(*duals)
        p, t = fwAD.unpack_dual(out)
        assert t is not None
        return p.numpy(), t.numpy()


def _mlp(x, w1, b1, w2):
    return ((x @ w1 + b1).tanh() @ w2).sum()


CASES = {
    "elementwise": (lambda x, y: (x * y).sin() + x.exp() / (1.0 + y * y), [(3, 4), (3, 4)]),
    "broadcast": (lambda x, y: x * y - y.cos(), [(3, 1), (4,)]),
    "reductions": (lambda x: x.sum(0) + x.mean(1).sum() * x.amax(), [(3, 4)]),
    "matmul": (lambda a, b: a @ b, [(2, 3), (3, 5)]),
    "views": (lambda x: x[1:, ::2].reshape(-1) * x.t()[0, :2].sum() + x.T.sum(), [(3, 4)]),
    "mlp": (_mlp, [(5, 3), (3, 8), (8,), (8, 2)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_fg_jvp(name):
    f, shapes = CASES[name]
    primals = [_arr(*s) for s in shapes]
    tangents = [_arr(*s) for s in shapes]
    val, tan = _eager_jvp(f, primals, tangents)

    # the same function written on fnp arrays, through the tracing fg.jvp
    ref_val, ref_tan = fg.jvp(lambda *xs: _as_fnp(name)(*xs), tuple(primals), tuple(tangents))
    np.testing.assert_allclose(val, ref_val, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tan, ref_tan, rtol=1e-9, atol=1e-12)


def _as_fnp(name):
    return {
        "elementwise": lambda x, y: fnp.sin(x * y) + fnp.exp(x) / (1.0 + y * y),
        "broadcast": lambda x, y: x * y - fnp.cos(y),
        "reductions": lambda x: fnp.sum(x, 0) + fnp.sum(fnp.mean(x, 1)) * fnp.max(x),
        "matmul": lambda a, b: a @ b,
        "views": lambda x: fnp.reshape(x[1:, ::2], (-1,)) * fnp.sum(x.T[0, :2]) + fnp.sum(x.T),
        "mlp": lambda x, w1, b1, w2: fnp.sum(fnp.tanh(x @ w1 + b1) @ w2),
    }[name]


#: Cases checked against PyTorch only (``f`` written for fusegrad, ``g`` for torch).
TORCH_ONLY = {
    "softmax": (lambda d: d.softmax(1) * d.log_softmax(0), None, [(3, 4)]),
    "sort_max_cumsum": (lambda d: d.sort(1)[0] + d.max(0)[0] + d.cumsum(1), None, [(3, 4)]),
    "cat_stack": (lambda d: fg.stack([fg.cat([d, d * 2]), d.exp().repeat(2, 1)]),
                  lambda d: __import__("torch").stack([__import__("torch").cat([d, d * 2]),
                                                       d.exp().repeat(2, 1)]), [(3, 4)]),
    "gather_index": (lambda d: d[d.argmax(1) % 3].clamp(-0.5, 0.5).abs() ** 1.5, None,
                     [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES) + sorted(TORCH_ONLY))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    tfw = torch.autograd.forward_ad
    if name in TORCH_ONLY:
        f, g, shapes = TORCH_ONLY[name]
    else:
        (f, shapes), g = CASES[name], None
    primals = [_arr(*s) for s in shapes]
    tangents = [_arr(*s) for s in shapes]
    val, tan = _eager_jvp(f, primals, tangents)
    with tfw.dual_level():
        duals = [tfw.make_dual(torch.tensor(p), torch.tensor(t))
                 for p, t in zip(primals, tangents)]
        p, t = tfw.unpack_dual((g or f)(*duals))
        np.testing.assert_allclose(val, p.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tan, t.numpy(), rtol=1e-9, atol=1e-12)


def test_finite_differences():
    f, shapes = CASES["mlp"]
    primals = [_arr(*s) for s in shapes]
    tangents = [_arr(*s) for s in shapes]
    _, tan = _eager_jvp(f, primals, tangents)
    eps = 1e-6
    plus = f(*[fg.tensor(p + eps * t) for p, t in zip(primals, tangents)]).item()
    minus = f(*[fg.tensor(p - eps * t) for p, t in zip(primals, tangents)]).item()
    np.testing.assert_allclose(tan, (plus - minus) / (2 * eps), rtol=1e-6)


def test_unpack_non_dual_and_level_exit():
    x = fg.tensor(_arr(3))
    assert fwAD.unpack_dual(x).tangent is None
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fg.ones(3, dtype=fg.float64))
        y = d * 2.0
        assert fwAD.unpack_dual(x).tangent is None
        assert fwAD.unpack_dual(d.detach()).tangent is None
        np.testing.assert_array_equal(fwAD.unpack_dual(y).tangent.numpy(), 2.0)
        primal = fwAD.unpack_dual(y).primal
        assert fwAD.unpack_dual(primal).tangent is None
        np.testing.assert_array_equal(primal.numpy(), x.numpy() * 2)
    assert fwAD.unpack_dual(y).tangent is None
    assert fwAD.unpack_dual(d).tangent is None
    assert isinstance(fwAD.unpack_dual(y), fwAD.UnpackedDualTensor)


def test_enter_exit_and_nesting():
    lvl = fwAD.enter_dual_level()
    try:
        assert lvl == 0
        with pytest.raises(RuntimeError, match="Nested forward mode"):
            fwAD.enter_dual_level()
        d = fwAD.make_dual(fg.tensor(_arr(2)), fg.tensor(_arr(2)))
        assert fwAD.unpack_dual(d.exp()).tangent is not None
    finally:
        fwAD.exit_dual_level(level=lvl)
    with pytest.raises(RuntimeError, match="dual_level"):
        fwAD.make_dual(fg.tensor(_arr(2)), fg.tensor(_arr(2)))


def test_inplace_updates_tangent():
    torch = pytest.importorskip("torch")
    tfw = torch.autograd.forward_ad
    p, t, o = _arr(4), _arr(4), _arr(4)
    with fwAD.dual_level():
        d = fwAD.make_dual(fg.tensor(p), fg.tensor(t)).clone()
        d.mul_(fg.tensor(o)).add_(3.0).sin_()
        mine = fwAD.unpack_dual(d).tangent.numpy()
        e = fg.tensor(o.copy())
        e.add_(fwAD.make_dual(fg.tensor(p), fg.tensor(t)))
        mine2 = fwAD.unpack_dual(e).tangent.numpy()
    with tfw.dual_level():
        d = tfw.make_dual(torch.tensor(p), torch.tensor(t)).clone()
        d.mul_(torch.tensor(o)).add_(3.0).sin_()
        ref = tfw.unpack_dual(d).tangent.numpy()
    np.testing.assert_allclose(mine, ref, rtol=1e-12)
    np.testing.assert_allclose(mine2, t, rtol=1e-12)


def test_inplace_with_grad():
    p, t = _arr(3), _arr(3)
    w = fg.tensor(_arr(3), requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(fg.tensor(p), fg.tensor(t))
        y = d * w
        y.mul_(2.0)
        tan = fwAD.unpack_dual(y).tangent
        np.testing.assert_allclose(tan.detach().numpy(), 2 * t * w.detach().numpy(), rtol=1e-12)
        # the tangent is differentiable in reverse mode (forward-over-reverse by hand)
        tan.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * t, rtol=1e-12)


def test_errors():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(fg.tensor(_arr(3)), fg.tensor(_arr(4)))
        with pytest.raises(ValueError, match="floating point"):
            fwAD.make_dual(fg.tensor(np.arange(3)), fg.tensor(np.arange(3)))
        with pytest.raises(RuntimeError, match="same dtype"):
            fwAD.make_dual(fg.tensor(_arr(3)), fg.tensor(_arr(3).astype(np.float32)))


class _Cube(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g

    @staticmethod
    def jvp(ctx, tx):
        (x,) = ctx.saved_tensors
        return 3 * x * x * tx


class _NoJvp(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_custom_function_jvp():
    p, t = _arr(4), _arr(4)
    with fwAD.dual_level():
        d = fwAD.make_dual(fg.tensor(p), fg.tensor(t))
        y = _Cube.apply(d).sin()
        tan = fwAD.unpack_dual(y).tangent.numpy()
        with pytest.raises(NotImplementedError, match="jvp"):
            _NoJvp.apply(d)
        # a non-dual input needs no jvp
        assert fwAD.unpack_dual(_NoJvp.apply(fg.tensor(p))).tangent is None
    np.testing.assert_allclose(tan, np.cos(p ** 3) * 3 * p * p * t, rtol=1e-12)


def test_fast_path_unaffected(monkeypatch):
    """Outside a dual level the fast path still runs; inside one it steps aside."""
    orig = fast._result

    x = fg.tensor(_arr(3))
    assert dual.ACTIVE[0] == 0
    seen = []
    monkeypatch.setattr(fast, "_result", lambda out: seen.append(1) or orig(out))
    y = x * 2.0
    z = x.sin()
    assert len(seen) == 2
    np.testing.assert_allclose(y.numpy() + z.numpy(), x.numpy() * 2 + np.sin(x.numpy()))
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fg.tensor(_arr(3)))
        assert fast.run2("mul", "mul", x, 2.0) is None
        assert fast.run1("sin", "sin", x) is None
        assert fwAD.unpack_dual(d.sin()).tangent is not None
    seen.clear()
    assert fast.run2("mul", "mul", x, 2.0) is not None
    assert fast.run1("sin", "sin", x) is not None
    x * 2.0
    assert len(seen) == 3
