"""The eager fast path (``eager.fast``) against the generic recording path.

* Every operation the fast path takes gives bit-identical values, the same
  ``grad_fn`` (name, next functions, saved tensors) and the same gradients
  as the generic path (``fast.run*`` switched off), for float64 and float32,
  broadcasting, repeated operands and each input requiring grad or not.
* The NumPy transcriptions of the VJP rules equal the rules themselves
  under ``create_graph`` (which runs the generic rules).
* Autograd semantics on fast nodes: version counters, freed graphs,
  saved-tensor hooks, tensor hooks, grad mode, traced data.
* Composite operations replayed from their first recording (``linear``,
  ``relu``, ``mean``) equal the generic path on every call.
* In-place arithmetic without the dispatch equals the general path.
* Large sin/cos through the math-library kernels (compiled): within
  ``mathlib.ULP_BOUND`` ulp of NumPy on ordinary and rare inputs, and the
  eager W1 gradient equals the functional one.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen import mathlib
from fusegrad.eager import bigmath, fast, record, replay, tensor_inplace
from tests.helpers import assert_close

RNG = np.random.default_rng(7)

#: (id, function of two tensors, positive inputs?) - the operations with a fast path.
CASES = [
    ("add", lambda a, b: a + b, False),
    ("sub", lambda a, b: a - b, False),
    ("rsub", lambda a, b: 1.5 - a, False),
    ("mul", lambda a, b: a * b, False),
    ("mul_scalar", lambda a, b: a * 2, False),
    ("div", lambda a, b: a / b, True),
    ("div_scalar", lambda a, b: 3.0 / (a + 4.0), True),
    ("pow", lambda a, b: a ** 3, False),
    ("pow0", lambda a, b: a ** 0, False),
    ("pow_tensor", lambda a, b: a ** b, True),
    ("neg", lambda a, b: -a, False),
    ("exp", lambda a, b: a.exp(), False),
    ("log", lambda a, b: a.log(), True),
    ("sin", lambda a, b: fg.sin(a), False),
    ("cos", lambda a, b: a.cos(), False),
    ("tanh", lambda a, b: a.tanh(), False),
    ("sqrt", lambda a, b: a.sqrt(), True),
    ("sigmoid", lambda a, b: a.sigmoid(), False),
    ("tan", lambda a, b: a.tan(), False),
    ("sum", lambda a, b: (a * b).sum(), False),
    ("same_mul", lambda a, b: a * a, False),
    ("same_sub", lambda a, b: a - a, False),
]

SHAPES = [((4, 3), (4, 3)), ((4, 3), (3,)), ((1, 3), (4, 1)), ((), (5,))]


def _inputs(shape_a, shape_b, dtype, positive):
    a = RNG.uniform(0.5, 2.0, shape_a) if positive else RNG.standard_normal(shape_a)
    b = RNG.uniform(0.5, 2.0, shape_b) if positive else RNG.standard_normal(shape_b)
    return a.astype(dtype), b.astype(dtype)


def _run(fn, a, b, rg_a, rg_b):
    ta = fg.tensor(a, requires_grad=rg_a)
    tb = fg.tensor(b, requires_grad=rg_b)
    out = fn(ta, tb)
    wrt = [t for t in (ta, tb) if t.requires_grad]
    grads = ()
    if out.requires_grad and wrt:
        v = fg.tensor(RNG.standard_normal(out.shape).astype(a.dtype))
        grads = fg.autograd.grad(out, wrt, grad_outputs=v, allow_unused=True, retain_graph=True)
    return out, grads


def _describe(node):
    if node is None:
        return None
    return (type(node).__name__, tuple(_describe(n) for n, _ in node.next_functions))


def _generic(monkeypatch):
    for name in ("run", "run1", "run2"):  # every entry of the fast path declines
        monkeypatch.setattr(fast, name, lambda *args, **kwargs: None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_fast_path_equals_generic_path(case, dtype, monkeypatch):
    _, fn, positive = case
    for shape_a, shape_b in SHAPES:
        a, b = _inputs(shape_a, shape_b, dtype, positive)
        for rg_a, rg_b in ((True, True), (True, False), (False, True)):
            state = RNG.bit_generator.state
            out, grads = _run(fn, a, b, rg_a, rg_b)
            with monkeypatch.context() as m:
                _generic(m)
                RNG.bit_generator.state = state
                ref, ref_grads = _run(fn, a, b, rg_a, rg_b)
            what = f"{shape_a} {shape_b} rg={rg_a, rg_b}"
            assert out.dtype == ref.dtype and out.shape == ref.shape, what
            np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy(), what)
            assert out.requires_grad == ref.requires_grad, what
            assert _describe(out.grad_fn) == _describe(ref.grad_fn), what
            if out.grad_fn is not None:
                assert sorted(out.grad_fn._saved) == sorted(ref.grad_fn._saved), what
            assert len(grads) == len(ref_grads), what
            for g, r in zip(grads, ref_grads):
                assert (g is None) == (r is None), what
                if g is not None:
                    assert g.dtype == r.dtype, what
                    kind = "exact64" if dtype == np.float64 else "f32"
                    assert_close(g.numpy(), r.numpy(), kind, what)


def test_fast_path_is_taken_for_the_common_cases():
    x = fg.tensor(RNG.standard_normal(16), requires_grad=True)
    for y in (x * 2.0, x + x, x.sin(), (x * x).sum(), -x, x ** 2):
        assert isinstance(y.grad_fn, fast.FastNode)
    # and not for what it does not handle
    assert not isinstance((x.int() * 2).grad_fn, fast.FastNode)
    assert not isinstance((x.reshape(4, 4)[0] * 2).grad_fn, fast.FastNode)  # views
    assert not isinstance((x * fg.tensor(2.0, dtype=fg.float32)).grad_fn, fast.FastNode)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "sum"], ids=lambda c: c[0])
def test_numpy_vjps_equal_rules_under_create_graph(case):
    """create_graph runs the generic VJP rules on Tensors: the same first derivative."""
    _, fn, positive = case
    a, b = _inputs((5,), (5,), np.float64, positive)
    ta, tb = fg.tensor(a, requires_grad=True), fg.tensor(b, requires_grad=True)
    out = fn(ta, tb).sum()
    fast_grads = fg.autograd.grad(out, [ta, tb], allow_unused=True, retain_graph=True)
    rule_grads = fg.autograd.grad(out, [ta, tb], allow_unused=True, create_graph=True)
    for g, r in zip(fast_grads, rule_grads):
        assert (g is None) == (r is None)
        if g is not None:
            assert_close(g.numpy(), r.detach().numpy(), "exact64")


def test_semantics_on_fast_nodes():
    x = fg.tensor(RNG.standard_normal(6), requires_grad=True)
    y = fg.tensor(RNG.standard_normal(6))
    # version counter: a saved input changed in place
    z = (x * y).sum()
    assert z.grad_fn.next_functions[0][0]._saved_other is y
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    # a saved output changed in place
    e = x.exp()
    e.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e.sum().backward()
    # a freed graph
    z = (x.sin() * 3.0).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.backward()
    # second derivative through fast nodes
    x.grad = None
    (g,) = fg.autograd.grad(x.sin().sum(), x, create_graph=True)
    (h,) = fg.autograd.grad(g.sum(), x)
    assert_close(h.numpy(), -np.sin(x.detach().numpy()), "exact64")
    # saved-tensor hooks see what the fast node saves
    packed = []
    with fg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        w = (x * x).exp().sum()
    assert len(packed) == 3  # x as self and as other (as PyTorch) and exp's result
    w.backward()
    # tensor hooks replace the gradient
    x.grad = None
    t = x * 2.0
    t.register_hook(lambda grad: grad * 10)
    t.sum().backward()
    assert_close(x.grad.numpy(), np.full(6, 20.0), "exact64")
    # no_grad and inference mode
    with fg.no_grad():
        assert not (x * 2.0).requires_grad
    with fg.inference_mode():
        assert (x * 2.0).is_inference()


def test_traced_tensors_take_the_generic_path():
    def f(a):
        t = fg.tensor(a, requires_grad=True) if not isinstance(a, fg.Tensor) else a
        return (fg.sin(t) * t + 1.0).sum()

    a = RNG.standard_normal(5)
    eager = fg.tensor(a, requires_grad=True)
    f(eager).backward()
    functional = fg.grad(lambda v: fnp.sum(fnp.sin(v) * v + 1.0))(a)
    assert_close(eager.grad.numpy(), functional, "exact64")


def _ulps(got, want):
    spacing = np.spacing(np.abs(want).astype(want.dtype))
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / spacing.astype(np.float64)


@pytest.mark.compiled
def test_large_sin_cos_use_the_math_library_within_its_bound():
    n = bigmath.THRESHOLD * 3
    for dtype in (np.float64, np.float32):
        x = RNG.uniform(-50, 50, n).astype(dtype)
        x[:6] = [0.0, -0.0, np.inf, np.nan, 3e7, -1e9]  # signed zeros, non-finite, rare
        for name, ref in (("sin", np.sin), ("cos", np.cos)):
            got = bigmath.call(name, x)
            with np.errstate(invalid="ignore"):
                want = ref(x)
            assert got.dtype == want.dtype
            finite = np.isfinite(want)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            assert _ulps(got[finite], want[finite]).max() <= mathlib.ULP_BOUND, (name, dtype)
            assert np.signbit(got[1]) == np.signbit(want[1])
        t = fg.tensor(x.reshape(3, -1))
        with np.errstate(invalid="ignore"):
            want = np.sin(x).reshape(3, -1)
        assert_close(t.sin().numpy(), want, "exact64" if dtype == np.float64 else "f32")


@pytest.mark.compiled
def test_large_eager_w1_gradient_equals_functional_gradient():
    a = RNG.standard_normal(bigmath.THRESHOLD * 2)
    x = fg.tensor(a, requires_grad=True)
    (fg.sin(x) * fg.exp(-0.5 * x * x) + fg.tanh(x) * x).sum().backward()
    functional = fg.grad(lambda v: fnp.sum(fnp.sin(v) * fnp.exp(-0.5 * v * v)
                                           + fnp.tanh(v) * v))(a)
    assert_close(x.grad.numpy(), functional, "exact64")


# --- composite operations replayed from their first recording ---------------------------

COMPOSITES = [
    # F.linear on Tensors is a fused node (tests/nn/test_fused_nodes.py)
    ("batched_matmul", lambda x, w, b: (x[None] @ w.t()[None]) * 2),
    ("relu", lambda x, w, b: (x @ w.t()).relu()),
    ("mean", lambda x, w, b: x.mean()),
    ("mean_dim", lambda x, w, b: x.mean(1, keepdim=True)),
    ("mm", lambda x, w, b: x @ w.t().contiguous()),
    ("mse", lambda x, w, b: fg.nn.functional.mse_loss(x @ w.t(), (x @ w.t()).detach() + 1)),
    # cross_entropy with class indices is a fused node (tests/nn/test_fused_nodes.py)
    ("soft_cross_entropy", lambda x, w, b: fg.nn.functional.cross_entropy(
        x @ w.t(), (x @ w.t()).detach().softmax(1), reduction="sum")),
]


def _composite_run(fn, arrays, rgs):
    ts = [fg.tensor(a, requires_grad=r) for a, r in zip(arrays, rgs)]
    outs = []
    for _ in range(3):  # the first call records, the next ones replay
        out = fn(*ts)
        wrt = [t for t in ts if t.requires_grad]
        g = fg.autograd.grad(out.sum(), wrt, allow_unused=True) if out.requires_grad else ()
        outs.append((out, g))
    return outs


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", COMPOSITES, ids=lambda c: c[0])
def test_replayed_composites_equal_the_generic_path(case, dtype, monkeypatch):
    _, fn = case
    arrays = [RNG.standard_normal(s).astype(dtype) for s in ((5, 3), (4, 3), (4,))]
    for rgs in ((True, True, True), (False, True, False), (False, False, False)):
        got = _composite_run(fn, arrays, rgs)
        with monkeypatch.context() as m:
            _generic(m)
            m.setattr(replay, "run", lambda name, key, f, *args, view=False: record.operation(
                name, f, *args, view=view))
            (ref, ref_g), = _composite_run(fn, arrays, rgs)[:1]
        for out, g in got:
            np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
            assert out.dtype == ref.dtype and out.requires_grad == ref.requires_grad
            assert _describe(out.grad_fn) == _describe(ref.grad_fn)
            if out.grad_fn is not None:
                assert sorted(out.grad_fn._saved) == sorted(ref.grad_fn._saved)
            for a, r in zip(g, ref_g, strict=True):
                assert (a is None) == (r is None)
                if a is not None:
                    kind = "exact64" if dtype == np.float64 else "f32"
                    assert_close(a.numpy(), r.numpy(), kind)


def test_replay_keeps_autograd_semantics():
    x = fg.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    for _ in range(2):
        y = x.relu()
        assert type(y.grad_fn).__name__ == "ReluBackward0"
    w = fg.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    for _ in range(2):
        y = fg.nn.functional.linear(x, w)  # saves x and w: an in-place change is caught
    with fg.no_grad():
        w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    captured = fg.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    for _ in range(2):  # a function that captures a Tensor is never replayed
        z = replay.run("MulBackward0", "captured", lambda t: t * captured, x)
        (gc,) = fg.autograd.grad(z.sum(), captured)
        assert_close(gc.numpy(), x.detach().numpy(), "exact64")
    (gx,) = fg.autograd.grad((x * x).mean(), x, create_graph=True)
    assert gx.requires_grad  # create_graph runs the generic rules on Tensors
    assert_close(gx.detach().numpy(), x.detach().numpy() / 3, "exact64")


def _inplace_results(dtype):
    out = []
    for name, kw in (("add_", {}), ("add_", {"alpha": -0.1}), ("sub_", {"alpha": 3}),
                     ("mul_", {}), ("div_", {})):
        for other in (RNG.standard_normal(3), RNG.standard_normal(()), 2.5, 3):
            t = fg.tensor(RNG.standard_normal((2, 3)).astype(dtype))
            o = fg.tensor(np.asarray(other, dtype)) if isinstance(other, np.ndarray) else other
            view = t[1]
            getattr(view, name)(o, **kw)
            out.append((t.numpy().copy(), t._version))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inplace_arithmetic_equals_the_generic_path(dtype, monkeypatch):
    state = RNG.bit_generator.state
    got = _inplace_results(dtype)
    with monkeypatch.context() as m:
        m.setattr(tensor_inplace, "_arith_in_place", lambda *args: False)
        RNG.bit_generator.state = state
        ref = _inplace_results(dtype)
    for (a, va), (r, vr) in zip(got, ref, strict=True):
        np.testing.assert_array_equal(a, r)
        assert va == vr == 1
    x = fg.tensor(RNG.standard_normal(3), requires_grad=True)
    assert not tensor_inplace._arith_in_place(np.add, x, 1.0, 1)  # records: general path
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.add_(1.0)
    with fg.no_grad():
        assert tensor_inplace._arith_in_place(np.add, x, 1.0, 1)
    with fg.inference_mode():
        i = fg.ones(2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        i.mul_(2.0)
