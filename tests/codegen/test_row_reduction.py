"""Reductions over the innermost axis of a loop nest: the inner loop stores the terms
in a row buffer (so it has no loop-carried dependency and vectorises), then a local
accumulates them; the additions are the same, in the same order, so compiled results
equal the interpreter's bit for bit."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.transforms.inspection import stages

pytestmark = pytest.mark.numba_codegen  # the Numba generator's loops

RNG = np.random.default_rng(3)

CASES = {
    "sum_2d": (lambda x, b: fnp.sum(fnp.tanh(x) * b, axis=1), ((37, 19), (19,))),
    "max_2d": (lambda x, b: fnp.max(x * b, axis=-1), ((8, 33), (33,))),
    "min_3d": (lambda x, b: fnp.min(fnp.exp(x) - b, axis=2), ((3, 5, 17), (17,))),
    "sum_3d_and_elementwise": (lambda x, b: (fnp.sum(x * b, axis=2), fnp.sin(x) * b),
                               ((4, 6, 9), (9,))),
    # the column sum keeps its array accumulator, the row sum gets a local one
    "rows_and_columns": (lambda x, b: (fnp.sum(x * b, axis=1), fnp.sum(x * b, axis=0)),
                         ((21, 13), (13,))),
}


def _source(f, shapes):
    from fusegrad.ir import TensorType

    args = [TensorType(s, "f64") for s in shapes]
    return stages(f, *args, grad=False)[-1][2]


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_row_reduction_equals_interpreter_bitwise(name):
    f, shapes = CASES[name]
    args = [RNG.standard_normal(s) for s in shapes]
    got = fg.jit(f)(*args)
    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        want = fg.jit(f)(*args)
    finally:
        config.DISABLE_JIT = old
    for a, b in zip(np.atleast_1d(got) if not isinstance(got, tuple) else got,
                    np.atleast_1d(want) if not isinstance(want, tuple) else want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["sum_2d", "max_2d", "min_3d", "rows_and_columns"])
def test_row_reduction_goes_through_a_row_buffer(name):
    f, shapes = CASES[name]
    src = _source(f, shapes)
    entry = src.split("def entry(", 1)[1].split("\ndef ", 1)[0]
    last = f"{{axes=[{len(shapes[0]) - 1}]}}"
    reductions = [line.strip() for line in entry.splitlines()
                  if "= reduce_" in line and last in line]
    assert reductions
    # the inner loop stores the term (no read-modify-write of an accumulator array) ...
    assert all(line.split("[", 1)[0].split("_", 1)[1].startswith("row") for line in reductions)
    # ... and a local accumulates the row afterwards
    assert "_acc" in entry


def test_grad_through_row_sums_matches_numpy():
    x, w = RNG.standard_normal((16, 8)), RNG.standard_normal(8)
    g = fg.grad(lambda w: fnp.sum(fnp.sum(fnp.tanh(x * w), axis=1) ** 2))(w)
    t = np.tanh(x * w)
    want = np.sum(2 * t.sum(1)[:, None] * (1 - t * t) * x, axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-12)
