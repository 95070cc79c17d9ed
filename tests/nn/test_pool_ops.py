"""The pooling ops (``ir.pool_ops``) against a loop-by-loop reference, the compiled
lowering against the NumPy one (float32 and float64), their derivatives to second
order (finite differences, compiled and interpreted), batching, the printed IR, and
``F.max_pool*`` / ``F.avg_pool*`` against PyTorch: values, gradients (bit for bit
for max pooling, ties and NaNs included) and ``return_indices``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir import bind
from fusegrad.ir.parser import parse_function
from fusegrad.ir.pool_ops import pool_out_shape
from fusegrad.ir.printer import print_function
from fusegrad.nn import functional as F
from fusegrad.runtime.interpreter import run
from tests.helpers import assert_close, check_grads
from tests.passes.pool_cases import GEOMETRIES, geo
from tests.transforms.test_random_programs import sampled

MAX_OPS = ("max_pool", "max_pool_argmax", "max_pool_grad", "max_pool_take")


def _rng(seed=0):
    return np.random.default_rng(seed)


def naive(x, g):
    """(maxima, selected flat index, window sums) by loops over planes, outputs, taps."""
    nd = len(g["kernel"])
    lead, sp = x.shape[:x.ndim - nd], x.shape[x.ndim - nd:]
    outs = pool_out_shape(sp, **g)
    best = np.full(lead + outs, -np.inf, x.dtype)
    idx = np.full(lead + outs, -1, np.int64)
    sums = np.zeros(lead + outs, x.dtype)
    for p in np.ndindex(*lead):
        for q in np.ndindex(*outs):
            sel, m, s = -1, None, x.dtype.type(0)
            for t in np.ndindex(*g["kernel"]):
                c = [q[i] * g["strides"][i] + t[i] * g["dilation"][i] - g["pad_lo"][i]
                     for i in range(nd)]
                if not all(0 <= c[i] < sp[i] for i in range(nd)):
                    continue
                v = x[p + tuple(c)]
                s += v
                if sel < 0 or v > m or np.isnan(v):
                    sel, m = int(np.ravel_multi_index(c, sp)), v
            if sel >= 0:
                best[p + q], idx[p + q] = m, sel
            sums[p + q] = s
    return best, idx, sums


def naive_grad(x, gy, idx, nd):
    out = np.zeros(x.shape, x.dtype)
    of = out.reshape(-1, math.prod(x.shape[x.ndim - nd:]))
    gf = gy.reshape(len(of), -1)
    for p, row in enumerate(idx.reshape(len(of), -1)):
        for q, i in enumerate(row):
            if i >= 0:
                of[p, i] += gf[p, q]
    return out


def _data(shape, rng, dtype, kind):
    if kind == "normal":
        return rng.standard_normal(shape).astype(dtype)
    x = rng.integers(-2, 3, shape).astype(dtype)  # many ties
    if kind == "special":
        flat = x.reshape(-1)
        k = rng.choice(flat.size, size=min(flat.size, max(2, flat.size // 6)), replace=False)
        flat[k[::2]] = np.nan
        flat[k[1::2]] = -np.inf
    return x


GEOS = [(label, shape, g) for label, shape, g in GEOMETRIES] + [
    ("2d-ceil-like-pad", (2, 5, 5), geo((3, 3), (2, 2), None, (1, 1), (2, 1))),
    ("1d-all-padding-window", (1, 2), geo((2,), (2,), None, (2,), (2,))),
]


@pytest.mark.parametrize("kind", ["normal", "ties", "special"])
@pytest.mark.parametrize("label,shape,g", GEOS, ids=[c[0] for c in GEOS])
def test_numpy_reference_matches_loops(label, shape, g, kind):
    rng = _rng(1)
    x = _data(shape, rng, np.float64, kind)
    best, idx, sums = naive(x, g)
    assert np.array_equal(bind("max_pool", x, **g), best, equal_nan=True)
    assert np.array_equal(bind("max_pool_argmax", x, **g), idx)
    gy = rng.standard_normal(best.shape)
    nd = len(g["kernel"])
    assert np.array_equal(bind("max_pool_grad", x, gy, **g), naive_grad(x, gy, idx, nd))
    c = rng.standard_normal(shape)
    cf = c.reshape(-1, math.prod(shape[len(shape) - nd:]))
    want = np.array([[cf[p, i] if i >= 0 else 0.0 for i in row]
                     for p, row in enumerate(idx.reshape(len(cf), -1))]).reshape(best.shape)
    assert np.array_equal(bind("max_pool_take", x, c, **g), want)
    if kind == "normal":
        assert_close(bind("sum_pool", x, **g), sums, "exact64")
        size = shape[len(shape) - nd:]
        t = bind("sum_pool_transpose", gy, size=size, **g)  # <sum_pool x, gy> = <x, T gy>
        assert_close(np.vdot(sums, gy), np.vdot(x, t), "exact64")


def _all_ops(g, size):
    def f(x, gy, c):
        return (bind("max_pool", x, **g), bind("max_pool_argmax", x, **g),
                bind("max_pool_grad", x, gy, **g), bind("max_pool_take", x, c, **g),
                bind("sum_pool", x, **g), bind("sum_pool_transpose", gy, size=size, **g))
    return f


@pytest.mark.compiled
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label,shape,g", GEOS, ids=[c[0] for c in GEOS])
def test_compiled_matches_numpy_reference(label, shape, g, dtype):
    rng = _rng(2)
    x = _data(shape, rng, dtype, "special")
    nd = len(g["kernel"])
    oshape = shape[:len(shape) - nd] + pool_out_shape(shape[len(shape) - nd:], **g)
    gy, c = rng.standard_normal(oshape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    f = _all_ops(g, shape[len(shape) - nd:])
    got = fg.jit(f)(x, gy, c)
    want = f(x, gy, c)
    for k, (a, b) in enumerate(zip(got, want)):
        assert np.asarray(a).dtype == b.dtype, k
        if k < 4:  # maxima, indices and the max-pool scatter/gather are exact
            assert np.array_equal(a, b, equal_nan=True), k
        else:
            assert_close(a, b, "f32" if dtype == np.float32 else "exact64")
    xs = np.where(np.isfinite(x), x, 0).astype(dtype)  # the sums of finite inputs
    assert_close(fg.jit(f)(xs, gy, c)[4], naive(xs, g)[2],
                 "f32" if dtype == np.float32 else "exact64")


def test_pool_function_ir_prints_and_parses_back():
    g = geo((3, 2), (2, 1), (1, 2), (1, 0), (1, 1))
    x, c = _rng(3).standard_normal((2, 7, 6)), _rng(4).standard_normal((2, 7, 6))
    gy = np.ones((2,) + pool_out_shape((7, 6), **g))
    fn = fg.make_ir(_all_ops(g, (7, 6)))(x, gy, c)
    text = print_function(fn)
    for op in ("max_pool ", "max_pool_argmax", "max_pool_grad", "max_pool_take", "sum_pool ",
               "sum_pool_transpose"):
        assert op in text
    back = parse_function(text)
    assert print_function(back) == text
    for a, b in zip(run(back, x, gy, c), run(fn, x, gy, c)):
        assert np.array_equal(a, b)


# --- derivatives: finite differences to second order, compiled and interpreted -----


POOL_F = [
    ("max1d", lambda x: F.max_pool1d(x, 3, 2, padding=1), (2, 3, 9)),
    ("max2d-overlap-dilate", lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0), (1, 2),
                                                    ceil_mode=True), (1, 2, 8, 7)),
    ("max3d", lambda x: F.max_pool3d(x, 2, (1, 2, 2)), (1, 2, 3, 4, 5)),
    ("avg1d", lambda x: F.avg_pool1d(x, 3, 2, padding=1, ceil_mode=True,
                                     count_include_pad=False), (2, 3, 10)),
    ("avg2d", lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True), (2, 2, 7, 8)),
    ("avg3d", lambda x: F.avg_pool3d(x, (2, 3, 2), 1, divisor_override=5), (1, 2, 3, 4, 3)),
]


def _distinct(shape, seed):
    return _rng(seed).permutation(math.prod(shape)).reshape(shape) * 0.1 - 1.0


@pytest.mark.parametrize("label,f,shape", POOL_F, ids=[c[0] for c in POOL_F])
def test_second_order_finite_differences(label, f, shape):
    x = _distinct(shape, 5)
    check_grads(lambda x: f(x) ** 3, [x], order=2)


@pytest.mark.compiled
@pytest.mark.parametrize("label,f,shape", POOL_F, ids=[c[0] for c in POOL_F])
def test_compiled_hvp_matches_interpreter_and_finite_differences(label, f, shape, monkeypatch):
    x = _distinct(shape, 6)
    v = _rng(7).standard_normal(shape)

    def loss(x):
        return fnp.sum(fnp.sin(f(x * x)) * f(x))

    hvp = fg.jit(fg.hvp(loss))(x, v)
    grad = fg.jit(fg.grad(loss))
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    assert_close(hvp, fg.jit(fg.hvp(loss))(x, v), "exact64")
    eps = 1e-6
    fd = (grad(x + eps * v) - grad(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


@pytest.mark.compiled
def test_vmap_of_pooling_and_its_gradient_matches_loop():
    x = _rng(8).standard_normal((3, 2, 2, 6, 5))

    def f(x):
        return fnp.sum(F.max_pool2d(x, 2, 1, padding=1) * F.avg_pool2d(x, 2, 1, padding=1))

    for fn in (fg.vmap(fg.grad(f)), fg.jit(fg.vmap(fg.grad(f)))):
        got = fn(x)
        for b in range(3):
            assert_close(got[b], fg.grad(f)(x[b]), "exact64")
    out = fg.vmap(lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True))(x)
    for b in range(3):
        assert np.array_equal(out[b], F.max_pool2d(x[b], 3, 2, ceil_mode=True))


def test_gradient_of_max_pool_is_one_scatter():
    """The backward of max pooling is one ``max_pool_grad``: no per-tap selects."""
    fn = fg.make_ir(fg.grad(lambda x: fnp.sum(fnp.sin(F.max_pool2d(x, 3, 2)))))(
        np.zeros((2, 3, 9, 9)))
    names = [op.name for op in fn.ops]
    assert names.count("max_pool_grad") == 1
    assert "select" not in names and "slice" not in names


# --- against PyTorch ------------------------------------------------------------------


TORCH = [  # (kind, nd, x shape, kwargs)
    ("max", 1, (2, 3, 11), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("max", 1, (2, 3, 10), {"kernel_size": 2, "stride": 1, "dilation": 3, "ceil_mode": True}),
    ("max", 2, (4, 16, 12, 12), {"kernel_size": 2}),
    ("max", 2, (2, 3, 9, 10), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("max", 2, (2, 2, 9, 9), {"kernel_size": (3, 2), "stride": (1, 2), "dilation": (2, 1),
                              "padding": (1, 1)}),
    ("max", 3, (1, 2, 5, 6, 7), {"kernel_size": 2, "stride": (1, 2, 2), "padding": 1}),
    ("avg", 1, (2, 3, 11), {"kernel_size": 4, "stride": 3, "padding": 2,
                            "count_include_pad": False}),
    ("avg", 2, (2, 3, 9, 10), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg", 2, (2, 2, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                              "count_include_pad": False}),
    ("avg", 3, (1, 2, 5, 6, 7), {"kernel_size": (2, 3, 3), "stride": 2, "padding": 1,
                                 "ceil_mode": True}),
]


def _ids(cases):
    return [f"{k}{nd}d-{'-'.join(f'{a}{b}' for a, b in kw.items())}" for k, nd, _, kw in cases]


@pytest.mark.compiled
@pytest.mark.parametrize("data", ["normal", "ties", "special"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind,nd,shape,kw", TORCH, ids=_ids(TORCH))
def test_matches_torch_eager_and_compiled(kind, nd, shape, kw, dtype, data):
    torch = pytest.importorskip("torch")
    if kind == "avg" and data == "special":
        data = "ties"  # a NaN spreads through every sum alike: nothing more to compare
    rng = _rng(9)
    x = _data(shape, rng, dtype, data)
    fpool = getattr(F, f"{kind}_pool{nd}d")
    tpool = getattr(torch.nn.functional, f"{kind}_pool{nd}d")
    tx = torch.tensor(x, requires_grad=True)
    ref = tpool(tx, **kw)
    gy = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    ref.backward(torch.tensor(gy))
    want, want_g = ref.detach().numpy(), tx.grad.numpy()
    fx = fg.tensor(x, requires_grad=True)
    out = fpool(fx, **kw)
    assert out.grad_fn.name() == (f"MaxPool{nd}DWithIndicesBackward0" if kind == "max"
                                  else f"AvgPool{nd}DBackward0")
    out.backward(fg.tensor(gy))
    grad = fg.jit(fg.grad(lambda a: fnp.sum(fpool(a, **kw) * gy)))(x)
    jit_out = fg.jit(lambda a: fpool(a, **kw))(x)
    tol = "f32" if dtype == np.float32 else "exact64"
    if kind == "max":  # bit for bit, ties and NaNs included
        for got in (out.detach().numpy(), jit_out):
            assert np.array_equal(got, want, equal_nan=True)
        for got in (fx.grad.numpy(), grad):
            assert np.array_equal(got, want_g, equal_nan=True)
    else:
        for got in (out.detach().numpy(), jit_out):
            assert_close(got, want, tol)
        for got in (fx.grad.numpy(), grad):
            assert_close(got, want_g, tol)


@pytest.mark.compiled
@pytest.mark.parametrize("kind,nd,shape,kw", [c for c in TORCH if c[0] == "max"],
                         ids=_ids([c for c in TORCH if c[0] == "max"]))
def test_return_indices_match_torch(kind, nd, shape, kw):
    torch = pytest.importorskip("torch")
    x = _data(shape, _rng(10), np.float32, "special")
    fpool = getattr(F, f"max_pool{nd}d")
    tv, ti = getattr(torch.nn.functional, f"max_pool{nd}d")(torch.tensor(x), **kw,
                                                            return_indices=True)
    for v, i in (fpool(fg.tensor(x), **kw, return_indices=True),
                 fg.jit(lambda a: fpool(a, **kw, return_indices=True))(x)):
        assert np.asarray(i).dtype == np.int64
        assert np.array_equal(np.asarray(i), ti.numpy())
        assert np.array_equal(np.asarray(v), tv.numpy(), equal_nan=True)


def test_max_pool_module_returns_indices_like_torch():
    torch = pytest.importorskip("torch")
    x = _data((2, 3, 8, 8), _rng(11), np.float64, "ties")
    v, i = fg.nn.MaxPool2d(3, 2, padding=1, return_indices=True)(fg.tensor(x))
    tv, ti = torch.nn.MaxPool2d(3, 2, padding=1, return_indices=True)(torch.tensor(x))
    assert np.array_equal(i.numpy(), ti.numpy())
    assert np.array_equal(v.numpy(), tv.numpy())


@pytest.mark.compiled
def test_windows_of_only_minus_infinity_route_to_the_first_input_as_torch():
    torch = pytest.importorskip("torch")
    x = np.full((1, 1, 4, 4), -np.inf)
    x[0, 0, 3, 3] = 1.0
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.max_pool2d(tx, 3, 2, padding=1).sum().backward()
    for grad in (fg.grad(lambda a: fnp.sum(F.max_pool2d(a, 3, 2, padding=1)))(x),
                 fg.jit(fg.grad(lambda a: fnp.sum(F.max_pool2d(a, 3, 2, padding=1))))(x)):
        assert np.array_equal(grad, tx.grad.numpy())
    assert tx.grad.numpy()[0, 0, 0, 0] > 0  # the only sanity: torch does route it there


# --- the op-table cases of every pooling op, compiled (the shared tests compile one) ---


POOL_OPS = {"max_pool", "max_pool_grad", "max_pool_take", "max_pool_argmax", "sum_pool",
            "sum_pool_transpose"}


@pytest.mark.compiled
def test_compiled_vjp_and_jvp_of_every_pool_case_equal_interpreter():
    from fusegrad.passes.autodiff import vjp
    from fusegrad.passes.simplify import simplify
    from tests.codegen.test_compiled import _run_chunks
    from tests.passes.test_jvp_rules import JVP_CASES
    from tests.passes.test_vjp_rules import GRAD_CASES, INTERPRETER_ONLY
    from tests.transforms.test_forward import _compiled_vs_interpreted

    rng = _rng(12)
    fns, args, ids = [], [], []
    for c in [*GRAD_CASES, *INTERPRETER_ONLY]:
        if c.op not in POOL_OPS:
            continue
        a = c.inputs()
        fn = c.function(a)
        wrt = [i for i, p in enumerate(fn.params) if p.type.is_inexact]
        if c.op == "max_pool_argmax":
            fns.append(fn), args.append(a), ids.append(c.id)
            continue
        cts = [rng.normal(size=r.type.shape).astype(r.type.dtype) for r in fn.results]
        fns.append(simplify(vjp(fn, wrt))), args.append([*a, *cts]), ids.append(c.id)
    assert {i.split("-")[0] for i in ids} == POOL_OPS
    for cid, (compiled, interpreted) in zip(ids, _run_chunks(fns, args, "poolvjps")):
        for got, want in zip(compiled, interpreted):
            assert np.asarray(got).dtype == np.asarray(want).dtype, cid
            assert_close(np.nan_to_num(got), np.nan_to_num(want), "exact64", cid)
    _compiled_vs_interpreted([c for c in JVP_CASES if c.op in POOL_OPS])


# --- random geometries: the NumPy references and the Numba kernels against loops ---------


@st.composite
def _geometries(draw):
    nd = draw(st.integers(1, 3))
    sp = tuple(draw(st.integers(1, 6)) for _ in range(nd))
    g = geo(tuple(draw(st.integers(1, 3)) for _ in range(nd)),
            tuple(draw(st.integers(1, 3)) for _ in range(nd)),
            tuple(draw(st.integers(1, 2)) for _ in range(nd)),
            tuple(draw(st.integers(0, 2)) for _ in range(nd)),
            tuple(draw(st.integers(0, 2)) for _ in range(nd)))
    lead = tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2))))
    return lead + sp, g, draw(st.sampled_from(["normal", "ties", "special"])), draw(
        st.integers(0, 2**16))


def _kernel_args(x, g):
    nd = len(g["kernel"])
    planes = math.prod(x.shape[:x.ndim - nd])
    x4 = x.reshape((planes,) + (1,) * (3 - nd) + x.shape[x.ndim - nd:])

    def arr(name, unit):
        return np.array((unit,) * (3 - nd) + tuple(g[name]), np.int64)

    return x4, (arr("kernel", 1), arr("strides", 1), arr("dilation", 1), arr("pad_lo", 0),
                arr("pad_hi", 0))


@sampled(_geometries(), default=50, full=150, deadline=None,
         suppress_health_check=[HealthCheck.too_slow])
def test_random_geometries_match_loops(drawn):
    from fusegrad.codegen import rt_pool

    shape, g, kind, seed = drawn
    rng = _rng(seed)
    x = _data(shape, rng, np.float64, kind)
    best, idx, sums = naive(x, g)
    nd = len(g["kernel"])
    gy = rng.standard_normal(best.shape)
    c = rng.standard_normal(shape)
    want_grad = naive_grad(x, gy, idx, nd)
    cf = c.reshape(-1, math.prod(shape[len(shape) - nd:]))
    want_take = np.array([[cf[p, i] if i >= 0 else 0.0 for i in row]
                          for p, row in enumerate(idx.reshape(len(cf), -1))]).reshape(best.shape)
    x4, ga = _kernel_args(x, g)
    c4 = c.reshape(x4.shape)
    g4 = gy.reshape((len(x4),) + (1,) * (3 - nd) + best.shape[len(best.shape) - nd:])
    size = np.array((1,) * (3 - nd) + shape[len(shape) - nd:], np.int64)
    for impl, got in [
        ("numpy", (bind("max_pool", x, **g), bind("max_pool_argmax", x, **g),
                   bind("max_pool_grad", x, gy, **g), bind("max_pool_take", x, c, **g),
                   bind("sum_pool", x, **g),
                   bind("sum_pool_transpose", gy, size=shape[len(shape) - nd:], **g))),
        ("numba", (rt_pool.max_pool(x4, -np.inf, *ga), rt_pool.max_pool_argmax(x4, *ga),
                   rt_pool.max_pool_grad(x4, g4, *ga), rt_pool.max_pool_take(x4, c4, *ga),
                   rt_pool.sum_pool(x4, *ga), rt_pool.sum_pool_transpose(g4, size, *ga))),
    ]:
        v, i, gr, tk, sm, tr = (np.asarray(a) for a in got)
        assert np.array_equal(v.reshape(best.shape), best, equal_nan=True), impl
        assert np.array_equal(i.reshape(idx.shape), idx), impl
        assert np.array_equal(gr.reshape(shape), want_grad), impl
        assert np.array_equal(tk.reshape(best.shape), want_take), impl
        if kind == "normal":
            assert_close(sm.reshape(best.shape), sums, "exact64", impl)
            assert_close(np.vdot(sums, gy), np.vdot(x, tr.reshape(shape)), "exact64", impl)


def test_3d_pooling_modules_match_torch():
    torch = pytest.importorskip("torch")
    x = _data((2, 3, 5, 6, 7), _rng(13), np.float64, "normal")
    for ours, theirs in [
        (fg.nn.MaxPool3d(3, 2, padding=1, ceil_mode=True),
         torch.nn.MaxPool3d(3, 2, padding=1, ceil_mode=True)),
        (fg.nn.AvgPool3d((2, 3, 2), 2, padding=1, count_include_pad=False),
         torch.nn.AvgPool3d((2, 3, 2), 2, padding=1, count_include_pad=False)),
    ]:
        fx, tx = fg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, ref = ours(fx), theirs(tx)
        assert_close(out.detach().numpy(), ref.detach().numpy(), "exact64")
        gy = _rng(14).standard_normal(tuple(ref.shape))
        out.backward(fg.tensor(gy))
        ref.backward(torch.tensor(gy))
        assert_close(fx.grad.numpy(), tx.grad.numpy(), "exact64")


@pytest.mark.compiled
def test_integer_max_pooling_keeps_its_dtype_as_torch():
    torch = pytest.importorskip("torch")
    x = _rng(15).integers(-50, 50, (2, 3, 7, 8)).astype(np.int32)
    kw = {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), **kw, return_indices=True)
    for v, i in (F.max_pool2d(fg.tensor(x), **kw, return_indices=True),
                 fg.jit(lambda a: F.max_pool2d(a, **kw, return_indices=True))(x)):
        assert np.asarray(v).dtype == np.int32
        assert np.array_equal(np.asarray(v), tv.numpy())
        assert np.array_equal(np.asarray(i), ti.numpy())
    y = np.iinfo(np.int64).min + np.zeros((1, 3, 4), np.int64)  # windows of the minimum only
    assert np.array_equal(fg.jit(lambda a: F.max_pool2d(a, 2, 2, padding=1))(y),
                          torch.nn.functional.max_pool2d(torch.tensor(y), 2, 2, 1).numpy())


def test_integer_average_pooling_is_float64():
    x = np.arange(16).reshape(1, 1, 4, 4)
    out = F.avg_pool2d(fg.tensor(x), 2)
    assert out.dtype == fg.float64
    assert np.array_equal(out.numpy(), [[[[2.5, 4.5], [10.5, 12.5]]]])
