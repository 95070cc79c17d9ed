"""Matrix products on the lean generator: batches of any rank, broadcast batch axes and
transposed operands, all inside the compiled program (gemm per matrix)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.lean import products
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import lean_exec
from tests.helpers import assert_close, interpreted

pytestmark = pytest.mark.compiled


SHAPES = [
    ((3, 4), (4, 5)),  # a plain product
    ((2, 3, 4), (2, 4, 5)),  # a batch
    ((2, 3, 4), (4, 5)),  # the second operand broadcast along the batch
    ((4, 1, 3, 4), (2, 4, 2)),  # both broadcast: batch (4, 2)
    ((1, 3, 4), (3, 1, 4, 2)),
    ((2, 2, 1, 4), (2, 2, 4, 1)),  # matrix-vector shapes
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_batched_products_and_their_gradients_equal_the_interpreter(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.normal(size=s).astype(dtype) for s in (sa, sb))

    def f(a, b):
        return fnp.sum(fnp.tanh(a @ b) * (a @ b))

    vg = fg.value_and_grad(f, argnums=(0, 1))
    value, (ga, gb) = vg(a, b)
    rv, (ra, rb) = interpreted(vg, a, b)
    kind = "f32" if dtype == np.float32 else "exact64"
    for got, ref in ((value, rv), (ga, ra), (gb, rb)):
        assert np.shape(got) == np.shape(ref)
        assert_close(got, ref, kind)


def attention(q, k, v):
    s = q @ fnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s - fnp.max(s, axis=-1, keepdims=True)
    p = fnp.exp(s)
    p = p / fnp.sum(p, axis=-1, keepdims=True)
    return fnp.sum((p @ v) ** 2)


def test_attention_and_its_gradient_compile_to_one_segment():
    """Batched products, with ``k``'s transposed last axes read in place by gemm: the
    whole gradient is one compiled program (no product runs between segments)."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 3, 8, 4)) for _ in range(3))
    grad = fg.grad(attention, argnums=(0, 1, 2))
    got = grad(q, k, v)
    ref = interpreted(grad, q, k, v)
    for g, r in zip(got, ref):
        assert_close(g, r, "exact64")
    fn = fg.make_ir(grad)(q, k, v)
    fused = fuse(simplify(fn))
    assert [s for s in lean_exec.segments(fused)] == [fused]
    folded = products.folded_transposes(fused)
    assert any(len(r.type.shape) == 4 for r in folded)  # k^T is not copied


def test_batch_offsets_step_zero_along_broadcast_axes():
    # batch (2, 3): an operand with batch (1, 3) repeats its three matrices
    assert products._batch_offsets((2, 3), (1, 3, 4, 5)) == [0, 20, 40, 0, 20, 40]
    assert products._batch_offsets((2, 3), (2, 1, 4, 5)) == [0, 0, 0, 20, 20, 20]
    assert products._batch_offsets((2, 3), (4, 5)) == [0] * 6
