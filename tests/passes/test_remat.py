"""Rematerialisation (passes/remat.py): a loop kernel recomputes cheap values from
arrays it reads anyway instead of loading them; the copy is the same ops on the same
inputs, so compiled results are unchanged bit for bit."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir import TensorType
from fusegrad.ir.verifier import verify
from fusegrad.passes import fusion as FU
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.transforms.inspection import stages
from tests.helpers import check_grads

RNG = np.random.default_rng(11)


def _fused(f, *shapes, grad=False, remat=True):
    types = [TensorType(s, "f64") for s in shapes]
    fn = simplify(stages(f, *types, grad=grad)[1 if grad else 0][2])
    if remat:
        return fuse(fn)
    saved, FU.rematerialize = FU.rematerialize, lambda f: f
    try:
        return fuse(fn)
    finally:
        FU.rematerialize = saved


def _traffic(fn, shape):
    """(arrays of ``shape`` read, written) by the loop kernels."""
    kernels = [op for op in fn.ops if op.name == "fused"]
    reads = sum(v.type.shape == shape for op in kernels for v in op.operands)
    writes = sum(r.type.shape == shape for op in kernels for r in op.results)
    return reads, writes


def _net(x, w1, w2, v):
    h = fnp.tanh(x @ w1)
    s = 1.0 - h * h           # cheap from h
    hp = s * w1[0]            # cheap from h
    a = fnp.tanh(hp @ w2)     # hp goes to a product: it must be stored
    return fnp.sum(a * v) + fnp.sum(s * h * hp)


SHAPES = ((64, 8), (8, 16), (16, 16), (16,))


def _check_compiled(f, args):
    got = fg.jit(f)(*args)
    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        want = fg.jit(f)(*args)
    finally:
        config.DISABLE_JIT = old
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for a, b in zip(got, want):  # loops and NumPy reduce in different orders
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_pinn_like_gradient_reads_and_writes_fewer_arrays():
    g = fg.grad(_net, argnums=(1, 2, 3))
    before = _fused(_net, *SHAPES, grad=True, remat=False)
    after = _fused(_net, *SHAPES, grad=True)
    verify(after)
    rb, wb = _traffic(before, (64, 16))
    ra, wa = _traffic(after, (64, 16))
    assert ra <= rb and wa < wb
    args = [RNG.standard_normal(s) for s in SHAPES]
    _check_compiled(lambda *a: g(*a), args)


@pytest.mark.interpreted  # the interpreter's own behaviour
def test_recomputed_values_are_bitwise_the_stored_ones():
    def f(x, w):
        h = fnp.tanh(x * w)
        s = 1.0 - h * h
        return s, fnp.exp(s) * h  # the second kernel can recompute s from h

    x, w = RNG.standard_normal((32, 8)), RNG.standard_normal(8)
    fn = _fused(f, (32, 8), (8,))
    verify(fn)
    a = fg.jit(f)(x, w)
    h = np.tanh(x * w)
    s = 1.0 - h * h
    np.testing.assert_array_equal(a[0], s)


@pytest.mark.parametrize("order", [1, 2])
def test_gradients_through_recomputed_values(order):
    args = [RNG.standard_normal(s) for s in ((6, 3), (3, 4), (4, 4), (4,))]
    check_grads(_net, args, order=order)
    g = fg.grad(_net, argnums=(1, 2))
    _check_compiled(lambda *a: g(*a), args)


def test_expensive_values_are_not_recomputed():
    def f(x):
        e = fnp.exp(x)
        return fnp.sum(e, axis=0), fnp.sin(e)

    fn = _fused(f, (16, 4))
    for op in fn.ops:
        if op.name == "fused":
            assert sum(b.name == "exp" for b in op.regions[0].ops) <= 1
    x = RNG.standard_normal((16, 4))
    _check_compiled(f, [x])


def test_the_w3_gradient_after_fusion():
    from tests.passes.test_matmul_rewrites import _loss, _params

    ps, x = _params((1, 16, 16, 1)), np.linspace(-2, 2, 64)
    shapes = [p.shape for p in ps] + [x.shape]
    before = _fused(_loss, *shapes, grad=True, remat=False)
    after = _fused(_loss, *shapes, grad=True)
    verify(after)
    rb, wb = _traffic(before, (64, 16))
    ra, wa = _traffic(after, (64, 16))
    assert (ra, wa) < (rb, wb) and ra < rb and wa < wb
    g = fg.grad(_loss, argnums=tuple(range(6)))
    _check_compiled(lambda *a: g(*a), [*ps, x])
