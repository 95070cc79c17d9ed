"""Control flow lowered natively by the lean code generator (codegen/lean/control.py):
``cond``, ``while_loop``, ``scan`` (and so ``fori_loop``) and ``checkpoint`` whose regions
it lowers run inside the compiled program, one segment with no op left to Python, and
give the interpreter's results, and the segmented path's bits; a region with an op it
does not lower keeps its loop between segments."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import lean
from fusegrad.ir import Function
from fusegrad.ir.control_ops import CONTROL_OPS
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import compiled, lean_exec
from fusegrad.runtime.interpreter import run
from fusegrad.scipy.linalg import sqrtm
from fusegrad.tracer import trace_pytree
from tests.helpers import assert_close, interpreted

pytestmark = pytest.mark.compiled

X = np.array([0.3, -0.7, 1.1])
XS = np.linspace(-1.0, 1.0, 12).reshape(4, 3)  # row sums < 0, < 0, > 0, > 0


def fori(x):
    """A static trip count: a ``scan`` carrying the counter."""
    return fnp.sum(fg.fori_loop(0, 7, lambda i, c: fnp.sin(c) * 0.9 + x * i, x) ** 2)


def traced_bound(x, n):
    """A traced trip count: a ``while_loop``."""
    y = fg.fori_loop(0, n, lambda i, c: c * fnp.cos(x) + 0.1, x)
    return fnp.sum(y * y)


def doubling(x):
    """A data-dependent ``while_loop``."""
    y = fg.while_loop(lambda y: fnp.sqrt(fnp.sum(y * y)) < 1000.0, lambda y: y * 2.0, x)
    return fnp.sum(y * y * x)


def counted(x):
    """A ``while_loop`` with an integer and a float carry, both returned."""
    return fg.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, fnp.tanh(s[1]) * 1.5),
                         (np.int64(0), x))


def counted_sum(x):
    return fnp.sum(counted(x)[1] * x)


def scaled(x):
    """A ``while_loop`` closing over a traced scalar (a float const of the loop)."""
    a = fnp.sum(x) * 0.25 + 1.5
    y = fg.while_loop(lambda y: fnp.sum(y * y) < 100.0, lambda y: y * a + 0.1, x)
    return fnp.sum(y * x)


def scans(x, xs):
    """Forward (scalar ys) and reverse (array ys) scans."""
    def step(c, t):
        c = fnp.tanh(c * t + 1.0)
        return c, fnp.sum(c * t)

    c, ys = fg.scan(step, x, xs)
    d, zs = fg.scan(lambda c, t: (c + fnp.sin(t), c * t), x, xs, reverse=True)
    return fnp.sum(c) + fnp.sum(ys * fnp.arange(1.0, 5.0)) + fnp.sum(d * d) + fnp.sum(zs * xs)


def nested(x):
    """A loop in a loop's body."""
    def outer(i, c):
        return fg.fori_loop(0, 3, lambda j, d: fnp.sin(d) + c * 0.1 * j, c) * 0.5

    return fnp.sum(fg.fori_loop(0, 4, outer, x) ** 2)


def branchy(x, xs):
    """A ``cond`` in a scan's body, taking either branch by row, after a ``cond`` that
    takes the branch the sign of ``x`` selects."""
    y = fg.cond(fnp.sum(x) > 0, lambda a: fnp.sin(a) * 2.0, lambda a: a * a, x)

    def step(c, t):
        c = fg.cond(fnp.sum(t) > 0, lambda v: fnp.sin(v) + t, lambda v: v * t, c)
        return c, fnp.sum(c * c)

    c, ys = fg.scan(step, y, xs, reverse=True)
    return fnp.sum(c) + fnp.sum(ys * fnp.arange(1.0, 5.0))


def int_pred(x, n):
    """A ``cond`` on an integer predicate (nonzero: the true branch)."""
    return fnp.sum(fg.cond(n, lambda a: fnp.exp(a) * n, lambda a: a - 1.0, x))


def _build(f, *args, native: bool = True):
    """``f`` traced at ``args`` and built by the lean generator, and its arguments (with
    the arrays it closes over); with ``native=False`` control-flow ops are kept out of
    compiled segments (their regions compiled on their own, run from Python), as
    before they were lowered."""
    traced = trace_pytree(f, args)
    fn = traced.function
    with pytest.MonkeyPatch.context() as m:
        if not native:
            real = lean.lowers
            m.setattr(lean, "lowers", lambda op: op.name not in CONTROL_OPS and real(op))
        exe = lean_exec.build(fn, fuse(simplify(fn)), "test", compiled._run_region)
    return exe, (*args, *traced.free)


def _one_segment(exe) -> bool:
    """Whether ``exe`` runs as one compiled program (no op left to Python)."""
    return len(exe.steps) == 1 and exe.steps[0] is exe.fused


def _same(got, want, kind="exact64") -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).dtype
        assert_close(g, w, kind)


PROGRAMS = [
    (fori, (X,)),
    (traced_bound, (X, np.int64(4))),
    (traced_bound, (X, np.int64(0))),
    (traced_bound, (X, np.int64(100))),  # while_grad's stack grows seven times
    (doubling, (X,)),
    (doubling, (np.full(3, 2000.0),)),  # no iteration
    (counted_sum, (X,)),
    (scaled, (X,)),
    (scans, (X, XS)),
    (nested, (X,)),
    (branchy, (X, XS)),
    (branchy, (-X, XS)),
    (int_pred, (X, np.int64(-3))),
    (int_pred, (X, np.int64(0))),
]


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "value_and_grad"])
@pytest.mark.parametrize("f,args", PROGRAMS, ids=lambda c: getattr(c, "__name__", None))
def test_control_flow_compiles_to_one_segment_equal_to_the_interpreter(f, args, grad):
    """Forward and gradient (``while_loop``'s is ``while_grad``): one compiled program,
    the interpreter's results, and the bits of the control-flow ops run between
    segments."""
    g = fg.value_and_grad(f) if grad else f
    exe, full = _build(g, *args)
    assert _one_segment(exe)
    assert any(op.name in CONTROL_OPS for op in exe.fused.ops)
    got = exe(*full)
    _same(got, run(exe.fn, *full))
    segmented, _ = _build(g, *args, native=False)
    assert not _one_segment(segmented)
    assert [r.tobytes() for r in got] == [r.tobytes() for r in segmented(*full)]


@pytest.mark.parametrize("f,args", PROGRAMS[:4], ids=lambda c: getattr(c, "__name__", None))
def test_jitted_gradients_equal_the_interpreter(f, args):
    g = fg.value_and_grad(f)
    _same(fg.jit(g)(*args), interpreted(g, *args))


def test_while_grad_is_lowered():
    exe, _ = _build(fg.grad(doubling), X)
    assert "while_grad" in [op.name for op in exe.fused.ops]
    assert "; region @adjoint" in exe.source or "; region @body_vjp" in exe.source


def test_while_loop_with_an_integer_carry():
    got = fg.jit(counted)(X)
    want = interpreted(counted, X)
    assert got[0].dtype == np.int64 and int(got[0]) == 5
    _same(got, want)
    assert _one_segment(_build(counted, X)[0])


def test_a_region_with_an_op_not_lowered_runs_between_segments():
    def unlowered(x):  # (sqrtm has no native lowering)
        def body(i, c):
            return sqrtm(c[:, None] * c[None, :] + 4.0 * np.eye(3)) @ c * 0.3 + 0.5 * i
        y = fg.fori_loop(0, 3, body, x)
        return fnp.sum(fnp.sin(y) * x)

    exe, full = _build(unlowered, X)
    assert [s.name for s in exe.steps if not isinstance(s, Function)] == ["scan"]
    _same(exe(*full), run(exe.fn, *full))
    g = fg.value_and_grad(unlowered)
    _same(fg.jit(g)(X), interpreted(g, X))


def test_checkpoint_given_to_the_generator_calls_its_body():
    """``fuse`` inlines ``checkpoint``; a fused Function that keeps one compiles it."""
    fn = simplify(fg.make_ir(fg.checkpoint(lambda a: fnp.exp(a) * a - 1.0))(X))
    (op,) = fn.ops
    assert op.name == "checkpoint"
    fused = fn.replace(ops=(op.replace(regions=(fuse(op.regions[0]),)),))
    exe = lean_exec.build(fn, fused, "test", compiled._run_region)
    assert _one_segment(exe)
    _same(exe(X), run(fn, X))


def test_large_loop_bodies_run_in_chunks_with_the_segmented_bits():
    """A kernel of at least ``PARALLEL_THRESHOLD`` iterations in a loop body runs in
    chunks, as it does compiled on its own."""
    x = np.linspace(-1.0, 1.0, config.PARALLEL_THRESHOLD)

    def big(x):
        c, ys = fg.scan(lambda c, t: (fnp.tanh(c) + t, fnp.sum(c * c)), x, fnp.arange(3.0))
        return fnp.sum(c) + fnp.sum(ys)

    exe, full = _build(big, x)
    assert _one_segment(exe)
    assert lean.chunked_kernels(exe.fused) - set(exe.fused.ops)  # chunked in the body
    got = exe(*full)
    _same(got, run(exe.fn, *full))
    segmented, _ = _build(big, x, native=False)
    assert [g.tobytes() for g in got] == [s.tobytes() for s in segmented(*full)]


def test_source_annotates_the_loop_and_its_regions():
    text = _build(branchy, X, XS)[0].source
    assert "between segments" not in text
    assert "= scan %" in text and "= cond %" in text  # the ops' comments in the entry
    assert "; region @step" in text and "; region @true_branch" in text
    body = text.split("; region @step")[1].split("\n}")[0]
    assert "; %0 = fused %t" in body and "call void @\"region" in body
