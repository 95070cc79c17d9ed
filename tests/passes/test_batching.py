"""The batching pass against a Python loop over the batch, for every op of the table.

Cases come from the op-table case lists of ``test_vjp_rules`` (every op with
inputs inside its domain). For each case the batched Function is compared with
the unbatched one evaluated example by example and stacked, for several
``in_axes`` (every operand batched at axis 0, at axis 1 or at its last axis; one
operand batched and the others shared by the batch; one shared and the others
batched) and ``out_axes``. Batched indices
(``take``/``index_*`` with different indices per example) have cases of their
own, since the shared case tables hold constant indices.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fusegrad.ir import OPS, TensorType, bind, evaluate, verify
from fusegrad.passes.autodiff import vjp
from fusegrad.passes.batching_rules import BATCH_RULES, NO_OPERANDS
from fusegrad.passes.vmap import BatchingError, batch
from fusegrad.tracer import trace
from tests.helpers import assert_close, check_grads
from tests.passes.test_vjp_rules import (
    CUSTOM_VJP_SINGLE,
    GRAD_CASES,
    INTERPRETER_ONLY,
    Case,
    const,
    inputs,
    normal,
)

SIZE = 3
CASES = [*GRAD_CASES, *INTERPRETER_ONLY, CUSTOM_VJP_SINGLE]


def _case_id(case: Case) -> str:
    return case.id


def in_axes_options(ranks: list[int]) -> list[tuple]:
    """All operands at axis 0; all at axis 1 (0 for scalars); all at their last axis (-1);
    and each operand alone batched (at 0) or alone shared, the others batched at 0."""
    n = len(ranks)
    opts = [(0,) * n, tuple(min(1, r) for r in ranks), (-1,) * n]
    for k in range(n):
        opts.append(tuple(0 if i == k else None for i in range(n)))
        opts.append(tuple(None if i == k else 0 for i in range(n)))
    return list(dict.fromkeys(o for o in opts if any(a is not None for a in o) or n == 0))


def batched_inputs(case: Case, in_axes) -> tuple[list, list]:
    """The batched arguments, and the per-example argument lists they stand for."""
    rows = [case.inputs(seed) for seed in range(SIZE)]
    per_example = [[row[i] if a is not None else rows[0][i] for i, a in enumerate(in_axes)]
                   for row in rows]
    batched = [rows[0][i] if a is None else np.stack([row[i] for row in rows], axis=a)
               for i, a in enumerate(in_axes)]
    return batched, per_example


def loop_reference(fn, per_example, out_axes):
    outs = [evaluate(fn, *args) for args in per_example]
    return [np.stack([o[j] for o in outs], axis=out_axes) for j in range(len(fn.results))]


def check_against_loop(fn, batched, per_example, in_axes, out_axes=0):
    b = batch(fn, in_axes, SIZE, out_axes)
    verify(b)
    got = evaluate(b, *batched)
    want = loop_reference(fn, per_example, out_axes)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, "exact64", f"in_axes={in_axes}, out_axes={out_axes}\n{b}")
    return b


# --- coverage ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_has_batching_rule_or_mark(name):
    assert (name in BATCH_RULES) != (name in NO_OPERANDS), (
        f"{name!r} must have a batching rule, or take no operands (NO_OPERANDS)"
    )


def test_rule_table_names_only_ops():
    assert set(BATCH_RULES) - set(OPS) == set()


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_has_batching_cases(name):
    assert name in {c.op for c in CASES}, f"add a case for {name!r} to the op-table cases"


# --- every op against a loop --------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_batched_op_matches_loop(case):
    args = case.inputs()
    fn = case.function(args)
    for in_axes in in_axes_options([a.ndim for a in args]):
        batched, per_example = batched_inputs(case, in_axes)
        check_against_loop(fn, batched, per_example, in_axes)
    if fn.results and all(r.type.ndim for r in fn.results):
        batched, per_example = batched_inputs(case, (0,) * len(args))
        check_against_loop(fn, batched, per_example, (0,) * len(args), out_axes=-1)


def _rows(*makes):
    """Per-example inputs: example k draws ``make(rng_k)`` for each operand."""
    return lambda rng: [m(rng) for m in makes]


def _index(n: int, shape):
    """Indices in ``-n..n-1`` (negative ones included), different in each example."""
    return lambda rng: rng.integers(-n, n, shape)


def _distinct_index(n: int, k: int):
    return lambda rng: rng.permutation(n)[:k] - n * rng.integers(0, 2)


BATCHED_INDEX_CASES = [
    Case("take", _rows(normal(4, 3), _index(4, (5,))), {"axis": 0}, "axis0"),
    Case("take", _rows(normal(3, 4, 2), _index(4, (2, 3))), {"axis": 1}, "2d-index-axis1"),
    Case("take", _rows(normal(3, 4), _index(4, ())), {"axis": -1}, "scalar-index"),
    Case("index_add", _rows(normal(4, 3), _index(4, (5,)), normal(5, 3)), {"axis": 0}, "axis0"),
    Case("index_add", _rows(normal(2, 4, 3), _index(4, (2, 2)), normal(2, 2, 2, 3)),
         {"axis": 1}, "2d-index-axis1"),
    Case("index_set", _rows(normal(3, 5), _distinct_index(5, 3), normal(3, 3)), {"axis": 1},
         "axis1"),
]


@pytest.mark.parametrize("case", BATCHED_INDEX_CASES, ids=_case_id)
def test_batched_indices_match_loop(case):
    """Indices differing per example, with x and v batched or shared."""
    args = case.inputs()
    fn = case.function(args)
    n = len(args)
    for in_axes in itertools.product(*([0, None] if i != 1 else [0] for i in range(n))):
        batched, per_example = batched_inputs(case, in_axes)
        check_against_loop(fn, batched, per_example, in_axes)


def test_matmul_of_batch_against_shared_matrix_is_one_2d_product():
    """A batch of rows times shared weights becomes one 2-D matmul, as written by hand."""
    fn = trace(lambda a, b: bind("matmul", a, b), TensorType((1, 4), np.float64),
               TensorType((4, 5), np.float64))
    b = batch(fn, (0, None), 7)
    assert [(op.operands[0].type.shape, op.operands[1].type.shape)
            for op in b.ops if op.name == "matmul"] == [((7, 4), (4, 5))]


VECTOR_MATMULS = [
    Case("matmul", inputs(normal(3, 1), normal(1, 5)), label="outer"),
    Case("matmul", inputs(normal(1, 4), normal(4, 5)), label="row-matrix"),
    Case("matmul", inputs(normal(3, 4), normal(4, 1)), label="matrix-column"),
    Case("matmul", inputs(normal(2, 1, 4), normal(4, 1)), label="batch-broadcast"),
]


@pytest.mark.parametrize("case", VECTOR_MATMULS, ids=_case_id)
def test_batched_vector_products_are_fused_elementwise(case):
    """Both operands batched with an extent of 1: a product and a sum, no matmul."""
    args = case.inputs()
    b = check_against_loop(case.function(args), *batched_inputs(case, (0, 0)), (0, 0))
    assert "matmul" not in {op.name for op in b.ops}
    check_grads(b, batched_inputs(case, (0, 0))[0], order=1)


def test_unbatched_ops_are_replayed_as_they_are():
    fn = trace(lambda x, w: bind("mul", x, bind("exp", w)), TensorType((3,), np.float64),
               TensorType((3,), np.float64))
    b = batch(fn, (0, None), 5)
    assert [(op.name, op.results[0].type.shape) for op in b.ops] == [("exp", (3,)),
                                                                     ("mul", (5, 3))]


def test_fused_kernel_is_batched_inline():
    (case,) = [c for c in GRAD_CASES if c.op == "fused"]
    args = case.inputs()
    b = batch(case.function(args), (0, None), SIZE)
    assert "fused" not in {op.name for op in b.ops}


def test_custom_vjp_regions_are_batched():
    args = CUSTOM_VJP_SINGLE.inputs()
    b = batch(CUSTOM_VJP_SINGLE.function(args), 0, SIZE)
    (op,) = [op for op in b.ops if op.name == "custom_vjp_call"]
    assert [r.in_types[0].shape for r in op.regions] == [(SIZE, 3, 4), (SIZE, 3, 4)]


# --- composition with reverse mode --------------------------------------------------


@pytest.mark.parametrize("case", [c for c in GRAD_CASES if c.op in (
    "matmul", "take", "index_add", "concatenate", "custom_vjp_call", "cumsum",
    "update_slice", "broadcast_to", "reduce_max", "select", "pow")], ids=_case_id)
def test_vjp_of_batched_function_matches_finite_differences(case):
    args = case.inputs()
    fn = case.function(args)
    in_axes = tuple(0 if a.dtype == np.float64 else None for a in args)
    batched, _ = batched_inputs(case, in_axes)
    check_grads(batch(fn, in_axes, SIZE), batched, order=2)


def test_batched_vjp_matches_vjp_of_each_example():
    """batch(vjp(f)) == vjp of each example: per-example gradients at the IR level."""
    case = Case("matmul", inputs(normal(3, 4), normal(4, 5)), label="2d")
    args = case.inputs()
    g = vjp(case.function(args), (0, 1))
    rng = np.random.default_rng(1)
    batched = [np.stack([case.inputs(k)[0] for k in range(SIZE)]), args[1],
               rng.standard_normal((SIZE, 3, 5))]
    per_example = [[batched[0][k], args[1], batched[2][k]] for k in range(SIZE)]
    check_against_loop(g, batched, per_example, (0, None, 0))


# --- errors -------------------------------------------------------------------------


def _f():
    return trace(lambda x, w: bind("mul", x, w), TensorType((3,), np.float64),
                 TensorType((3,), np.float64))


def test_error_out_axes_none_for_batched_result():
    with pytest.raises(BatchingError, match=r"result 0 .*depends on a batched input.*"
                                            r"out_axes None"):
        batch(_f(), (0, None), 4, out_axes=None)


def test_error_axis_out_of_range():
    with pytest.raises(BatchingError, match=r"parameter 1 in_axes axis 2 is out of range for a "
                                            r"batched array of rank 2 \(valid: -2 to 1\)"):
        batch(_f(), (0, 2), 4)


def test_error_in_axes_length():
    with pytest.raises(BatchingError, match="in_axes has 3 entries for 2 parameters"):
        batch(_f(), (0, 0, 0), 4)


def test_constant_result_is_broadcast_or_kept():
    fn = trace(lambda x: (bind("mul", x, 2.0), bind("constant", value=1.5, dtype="f64")),
               TensorType((2,), np.float64))
    b = batch(fn, 0, 4, out_axes=(1, None))
    got = evaluate(b, np.arange(8.0).reshape(4, 2))
    assert_close(got[0], 2 * np.arange(8.0).reshape(4, 2).T, "exact64")
    assert_close(got[1], np.array(1.5), "exact64")
    got = evaluate(batch(fn, 0, 4), np.zeros((4, 2)))
    assert_close(got[1], np.full(4, 1.5), "exact64")


def test_take_with_const_indices_gathers_shared_rows():
    case = Case("take", inputs(normal(4, 3), const([0, -1, 2])), {"axis": 0})
    args = case.inputs()
    batched, per_example = batched_inputs(case, (1, None))
    check_against_loop(case.function(args), batched, per_example, (1, None), out_axes=2)


def test_batched_index_out_of_range_raises_instead_of_reading_another_row():
    fn = trace(lambda x, i: bind("take", x, i, axis=0), TensorType((4,), np.float64),
               TensorType((), np.int64))
    b = batch(fn, (0, 0), 2)
    assert_close(evaluate(b, np.arange(8.0).reshape(2, 4), np.array([-1, 3]))[0],
                 np.array([3.0, 7.0]), "exact64")
    with pytest.raises(IndexError, match="out of bounds"):
        evaluate(b, np.arange(8.0).reshape(2, 4), np.array([4, 0]))
