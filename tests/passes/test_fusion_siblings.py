"""Sibling kernels merged (``passes.fusion._merge_siblings``).

Groups over one iteration space that read the same array and do not depend on each
other become one kernel; groups one of which depends on the other (through a product,
say) stay apart, or the kernels would form a cycle. Compiled results keep the
interpreter's bits.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.verifier import verify
from fusegrad.passes import fusion
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime.interpreter import run
from fusegrad.runtime.lean_exec import build
from fusegrad.tracer import trace
from tests.helpers import same_results


def _fused(f, *args):
    fn = fuse(simplify(trace(f, *args)))
    verify(fn)
    return fn


def _kernels(fn) -> int:
    return sum(op.name == "fused" for op in fn.ops)


def _merged_and_apart(f, *args):
    """``f``'s compiled results with siblings merged and with every group apart."""
    fn = simplify(trace(f, *args))
    merged = fuse(fn)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fusion, "_merge_siblings", lambda *a: None)
        apart = fuse(fn)
    assert _kernels(merged) < _kernels(apart)
    return (build(fn, merged, "test")(*args), build(fn, apart, "test")(*args),
            run(fn, *args))


def _same_as_apart(f, *args, reductions=()):
    """Elementwise results: the same bits merged or apart; reductions (their positions)
    may sum in another order: to rounding, and near the interpreter's."""
    merged, apart, want = _merged_and_apart(f, *args)
    for i, (g, h, w) in enumerate(zip(merged, apart, want)):
        if i in reductions:
            rtol = 1e-5 if g.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, h, rtol=rtol)
            np.testing.assert_allclose(g, w, rtol=rtol)
        else:
            same_results(g, h)
            same_results(g, w)


def siblings(a, b):
    # three loops reading ``a`` with nothing between them: one kernel
    return (fnp.sum(a * b, axis=0), fnp.sum(a * a, axis=0), a * 3.0 + 1.0)


def test_siblings_reading_one_array_are_one_kernel():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 8)), rng.standard_normal((64, 8))
    assert _kernels(_fused(siblings, a, b)) == 1
    _same_as_apart(siblings, a, b, reductions=(0, 1))
    _same_as_apart(siblings, a.astype(np.float32), b.astype(np.float32), reductions=(0, 1))


def dependent(a, w):
    h = fnp.tanh(a)          # group 1 reads a
    m = h @ w                # a product of its result
    return a * m + 1.0       # group 2 reads a and the product: depends on group 1


def test_a_group_depending_on_its_sibling_stays_apart():
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    fn = _fused(dependent, a, w)
    assert _kernels(fn) == 2
    np.testing.assert_allclose(fg.jit(dependent)(a, w), run(trace(dependent, a, w), a, w)[0],
                               rtol=1e-12)


def chain(a, w):
    # siblings at both ends of a product: the two reading ``a`` around it may not merge
    # with the one after it, which reads the product
    s = fnp.sum(a * a, axis=0)
    h = fnp.tanh(a) @ w
    return s, fnp.sum(h * a, axis=0), a - 2.0


def test_merges_around_a_product_form_no_cycle():
    rng = np.random.default_rng(2)
    a, w = rng.standard_normal((32, 32)), rng.standard_normal((32, 32))
    fn = _fused(chain, a, w)
    assert _kernels(fn) == 2  # sum(a*a), tanh(a), exp(a) together; h*a after the product
    _same_as_apart(chain, a, w, reductions=(0, 1))


def test_gradient_with_merged_reductions():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((64, 16)), rng.standard_normal((16, 16))

    def loss(w, x):
        h = fnp.tanh(x @ w)
        return fnp.sum(fnp.tanh(h @ w) * h)

    g = fg.grad(loss)(w, x)
    fn = trace(fg.grad(loss), w, x)
    np.testing.assert_allclose(g, run(fn, w, x)[0], rtol=1e-10)
