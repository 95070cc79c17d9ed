"""Reductions over the innermost axis of a loop nest accumulate in a local variable
(one store per row instead of a store and a load per element); the additions are the
same, in the same order, so compiled results equal the interpreter's bit for bit."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.transforms.inspection import stages

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
def test_row_reduction_accumulates_in_a_local(name):
    f, shapes = CASES[name]
    src = _source(f, shapes)
    entry = src.split("def entry(", 1)[1].split("\ndef ", 1)[0]
    assert "_acc" in entry
    # no per-element read-modify-write of the row accumulator array
    assert not any(line.strip().endswith("axes=[" + str(len(shapes[0]) - 1) + "]} : f64[*]")
                   and "[k" in line.split("=")[0] for line in entry.splitlines())


def test_grad_through_row_sums_matches_numpy():
    x, w = RNG.standard_normal((16, 8)), RNG.standard_normal(8)
    g = fg.grad(lambda w: fnp.sum(fnp.sum(fnp.tanh(x * w), axis=1) ** 2))(w)
    t = np.tanh(x * w)
    want = np.sum(2 * t.sum(1)[:, None] * (1 - t * t) * x, axis=0)
    np.testing.assert_allclose(g, want, rtol=1e-12)
