"""Kernels and host entries read their sizes at run time (``codegen.lean.extents``,
``codegen.lean.sizes``): a function called at a new shape of the same structure
compiles nothing (a loop nest's row length, and the extents of kernels of at most
``extents.SMALL`` elements, excepted: they are constants of their kernels' text), and
the machine code it reuses computes what the interpreter computes at that shape."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import lean
from fusegrad.codegen.lean import engine
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.tracer.pytree import tree_flatten
from tests.helpers import interpreted

pytestmark = pytest.mark.compiled


def _compiled(f, *args):
    """``f(*args)`` and the number of modules that call compiled (not reused or loaded)."""
    before = engine.stats()["compiled"]
    out = f(*args)
    return out, engine.stats()["compiled"] - before


def _close(got, want, rtol):
    got, want = tree_flatten(got)[0], tree_flatten(want)[0]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def _model(x, y, s):
    # broadcasting (a row, a column), full, row and column reductions, means (counts)
    a = fnp.sum(fnp.sin(x) * y + fnp.mean(x, axis=0) * 0.8125)
    b = fnp.sum(fnp.exp(y).sum(axis=1) * s) + fnp.sum(fnp.max(x * y, axis=0))
    return a + b + fnp.mean(fnp.tanh(x[:, :1] + y))


def test_new_shape_compiles_nothing():
    vg = fg.jit(fg.value_and_grad(_model, argnums=(0, 1, 2)))
    rng = np.random.default_rng(1)
    counts = []
    # rows of another length: the nests' kernels (row and column sums) compile anew;
    # (kernels of at most ``SMALL_KERNEL`` iterations are others, compiled apart:
    # every kernel here has more, those over the rows alone too)
    assert lean.SMALL_KERNEL < 130
    for shape in [(130, 4), (200, 4), (300, 4), (400, 4), (300, 9)]:
        args = (rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape[0]))
        got, compiled = _compiled(vg, *args)
        counts.append(compiled)
        _close(got, interpreted(vg, *args), 1e-12)
    assert counts[0] > 1 and counts[1:4] == [0, 0, 0] and counts[4] > 0


def test_small_kernels_are_compiled_once_apart_then_in_full():
    """A small program's kernels (at most ``SMALL_KERNEL`` iterations) are compiled at
    their own level (``engine.LEVELS``) under names of their own; at sizes past it
    they compile once in full; each is then reused at any size on its side (no axis
    of 16 or fewer here: such extents are constants of the text)."""
    def model(x, y, s):  # kernels no other test compiles
        return _model(x * 1.375, y, s)

    vg = fg.jit(fg.value_and_grad(model, argnums=(0, 1, 2)))
    rng = np.random.default_rng(3)
    counts = []
    for shape in [(20, 4), (30, 4), (150, 4), (300, 4), (25, 4)]:
        args = (rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape[0]))
        got, compiled = _compiled(vg, *args)
        counts.append(compiled)
        _close(got, interpreted(vg, *args), 1e-12)
    assert counts[0] > 1 and counts[1] == 0 and counts[2] > 0 and counts[3:] == [0, 0]
    args = [np.zeros((20, 4)), np.zeros((20, 4)), np.zeros(20)]
    text = lean.source(fuse(simplify(fg.make_ir(fg.value_and_grad(model))(*args))))
    assert 'define external void @"s_' in text and '@"k_' not in text


def test_extents_of_one_keep_their_own_kernels():
    # a size-1 axis broadcasts: its kernels differ in structure, not only in extents
    vg = fg.jit(fg.value_and_grad(_model, argnums=(0, 1)))
    rng = np.random.default_rng(2)
    for shape in [(40, 5), (1, 5), (5, 1), (1, 1), (1, 300), (300, 1)]:
        args = (rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape[0]))
        _close(vg(*args), interpreted(vg, *args), 1e-12)


def test_float32_means_divide_by_their_run_time_count():
    def f(x):
        return fnp.mean(x * 1.5, axis=1) + fnp.mean(x)

    jf = fg.jit(f)
    rng = np.random.default_rng(3)
    outs = []
    for shape in [(20, 1001), (50, 1001)]:  # both past the GIL-free threshold
        x = rng.normal(size=shape).astype(np.float32)
        got, compiled = _compiled(jf, x)
        outs.append(compiled)
        want = interpreted(jf, x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    assert outs[1] == 0


@pytest.mark.parametrize("shape", [(300, 1000), (20, 20_000)])
def test_chunked_kernels_at_two_sizes(shape):
    # above the parallel threshold kernels run in chunks: the chunk axis's extent and
    # the chunk width come from the table too (the second size has a ragged last chunk)
    assert np.prod(shape) >= config.PARALLEL_THRESHOLD

    def f(x, w):
        return fnp.sum(fnp.cos(x) * w, axis=0) * 0.40625 + fnp.sum(x * x, axis=1).sum()

    jf = fg.jit(f)
    rng = np.random.default_rng(4)
    counts = []
    for rows in (shape[0], shape[0] + 37):
        x = rng.normal(size=(rows, shape[1]))
        w = rng.normal(size=shape[1])
        got, compiled = _compiled(jf, x, w)
        counts.append(compiled)
        np.testing.assert_allclose(got, interpreted(jf, x, w), rtol=1e-11, atol=1e-9)
    assert counts[1] == 0


@pytest.mark.parametrize("shapes", [((30, 4), (90, 4)), ((300, 1000), (301, 999))])
def test_kernels_of_one_key_have_one_text(shapes):
    # ``kernel_key`` leaves extents out: kernels it calls equal must build equal text
    # (the one-per-process memo hands out the first's)
    from fusegrad.codegen import lean
    from fusegrad.codegen.lean import kernel
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify

    def fused_kernels(shape):
        fn = fg.make_ir(fg.value_and_grad(_model, argnums=(0, 1)))(
            np.ones(shape), np.ones(shape), np.ones(shape[0]))
        fused = fuse(simplify(fn))
        chunked = lean.chunked_kernels(fused)
        return [(op, op in chunked) for op in fused.ops if op.name == "fused"]

    def text(op, chunked):
        return lean._named(lean.mathcalls.prepare(kernel.build(op, chunked)[0]),
                           kernel.PLACEHOLDER, "k_")[0]

    first, second = fused_kernels(shapes[0]), fused_kernels(shapes[1])
    assert len(first) == len(second)
    for (a, ca), (b, cb) in zip(first, second):
        if lean.kernel_key(a, ca) == lean.kernel_key(b, cb):
            assert text(a, ca) == text(b, cb)
    assert any(lean.kernel_key(a, ca) == lean.kernel_key(b, cb)
               for (a, ca), (b, cb) in zip(first, second))


def _mixed(a, b):
    # batched products (their per-matrix offsets a run of the table), slices, a
    # concatenation and a transpose (strided copies), a mean
    p = a @ b
    q = fnp.concatenate([p[:, 1:, :], p[:, :1, :] * 2.0], axis=1)
    return fnp.sum(fnp.mean(fnp.tanh(q), axis=(0, 2)) * fnp.sum(fnp.swapaxes(q, 1, 2)[:, :, 0]))


_MIXED_SHAPES = [((4, 30, 4), (4, 4, 5)), ((6, 20, 3), (6, 3, 5)), ((3, 5, 2), (1, 2, 9))]


def test_products_and_copies_at_new_shapes():
    jf = fg.jit(fg.value_and_grad(_mixed, argnums=(0, 1)))
    rng = np.random.default_rng(6)
    counts = []
    for sa, sb in _MIXED_SHAPES[:2]:
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        got, compiled = _compiled(jf, a, b)
        counts.append(compiled)
        _close(got, interpreted(jf, a, b), 1e-12)
    assert counts[1] == 0
    a, b = (rng.normal(size=s) for s in _MIXED_SHAPES[2])  # b broadcast over the batch
    _close(jf(a, b), interpreted(jf, a, b), 1e-12)


_WARM = """
import sys, numpy as np
sys.path.insert(0, {root!r})
import fusegrad as fg
from tests.codegen.test_lean_extents import _mixed, _MIXED_SHAPES
from fusegrad.codegen import lean
from fusegrad.codegen.lean import engine
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
rng = np.random.default_rng(7)
a, b = (rng.normal(size=s) for s in _MIXED_SHAPES[1])
v, (ga, gb) = fg.jit(fg.value_and_grad(_mixed, argnums=(0, 1)))(a, b)
np.save({out!r}, np.concatenate([np.ravel(v), ga.ravel(), gb.ravel()]))
print(engine.stats()["compiled"])
"""


def test_a_new_process_reads_the_size_table_from_the_manifest(tmp_path):
    # the second process compiles nothing: it loads the entry and its size table
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "FUSEGRAD_CACHE_DIR": str(tmp_path / "cache")}
    outs = []
    for i in range(2):
        out = str(tmp_path / f"out{i}.npy")
        r = subprocess.run([sys.executable, "-c", _WARM.format(root=root, out=out)], env=env,
                           capture_output=True, text=True, timeout=300, check=True)
        outs.append((int(r.stdout.split()[-1]), np.load(out)))
    assert outs[0][0] > 0 and outs[1][0] == 0
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    rng = np.random.default_rng(7)
    a, b = (rng.normal(size=s) for s in _MIXED_SHAPES[1])
    v, (ga, gb) = interpreted(fg.value_and_grad(_mixed, argnums=(0, 1)), a, b)
    np.testing.assert_allclose(outs[1][1], np.concatenate([np.ravel(v), ga.ravel(), gb.ravel()]),
                               rtol=1e-12, atol=1e-12)


def _rnn(w, xs):
    # a scan over rows (its length and row sizes from the table), a while loop's
    # gradient (its stack rows too)
    def body(h, x):
        h = fnp.tanh(x @ w + h * 0.5)
        return h, fnp.sum(h * h)

    h, ys = fg.scan(body, fnp.zeros((xs.shape[1], w.shape[1])), xs)
    z = fg.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, fnp.sin(c[1]) * 1.25),
                      (0, h))[1]
    return fnp.sum(ys) + fnp.sum(z)


def test_control_flow_at_new_shapes():
    g = fg.jit(fg.value_and_grad(_rnn, argnums=(0, 1)))
    rng = np.random.default_rng(8)
    counts = []
    for steps, batch, width in [(20, 40, 5), (30, 20, 7), (25, 30, 6)]:
        w = rng.normal(size=(width, width)) / width
        xs = rng.normal(size=(steps, batch, width))
        got, compiled = _compiled(g, w, xs)
        counts.append(compiled)
        _close(got, interpreted(g, w, xs), 1e-12)
    assert counts[0] > 0 and counts[1:] == [0, 0]


@pytest.mark.parametrize("f", [lambda x, b: fnp.tanh(x + b) * x,  # a nest: rows of 64
                               lambda x, b: fnp.exp(x) * x + 1.0],  # one flat loop
                         ids=["nest", "flat"])
def test_kernels_with_run_time_extents_vectorise(f):
    from fusegrad.codegen.lean import mathcalls, mathlib_ir
    from fusegrad.codegen.lean.kernel import PLACEHOLDER, build
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify

    fn = fg.make_ir(f)(np.ones((300, 64)), np.ones(64))
    op = next(o for o in fuse(simplify(fn)).ops if o.name == "fused")
    text = mathcalls.prepare(build(op)[0])
    assert "i64 300" not in text and "19200" not in text  # the outer extent is read
    asm = engine.assembly(text.replace(PLACEHOLDER, "k_test"), mathlib_ir.link_into)
    body = asm.split("k_test:")[1].split(".Lfunc_end")[0]
    assert "ymm" in body or "zmm" in body
    assert any(f"{v}pd" in body for v in ("vmul", "vfmadd", "vadd"))
