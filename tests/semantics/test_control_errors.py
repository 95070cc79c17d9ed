"""Python control flow on traced values: the error names the construct, the user's
line and the traced op that replaces it (fg.cond, fg.while_loop, fg.fori_loop, fg.scan)."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.semantics.test_errors import _line_of, assert_clean

X = np.array([0.5, -1.0, 2.0])


def uses_if(x):
    if fnp.sum(x) > 0:  # if-line
        return x
    return -x


def uses_elif(x):
    if x.shape[0] > 5:
        return x
    elif fnp.sum(x) > 0:  # elif-line
        return -x
    return x


def uses_while(x):
    while fnp.max(x) < 10.0:  # while-line
        x = x * 2.0
    return x


def uses_range(x):
    n = fnp.sum(x > 0)
    for _ in range(n):  # range-line
        x = x * 2.0
    return x


def uses_ternary(x):
    return x if fnp.sum(x) > 0 else -x  # ternary-line


def uses_int(x):
    return x * int(fnp.sum(x))  # int-line


def uses_and(x):
    ok = (fnp.sum(x) > 0) and True  # and-line
    return x * ok


CASES = {
    "if": (uses_if, "if-line", ("an `if` condition", "fg.cond(pred, true_fn, false_fn")),
    "elif": (uses_elif, "elif-line", ("an `elif` condition", "fg.cond(")),
    "while": (uses_while, "while-line", ("a `while` loop condition",
                                         "fg.while_loop(cond_fn, body_fn, init)",
                                         "fg.fori_loop(")),
    "range": (uses_range, "range-line", ("range()", "fg.fori_loop(lower, upper, body_fn, init)")),
    "ternary": (uses_ternary, "ternary-line", ("conditional expression", "fg.cond(")),
    "int": (uses_int, "int-line", ("int()", "fg.fori_loop(", "fg.scan(")),
    "and": (uses_and, "and-line", ("bool()", "fg.cond(", "fg.while_loop(")),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("transform", ["jit(grad)", "jit"])
def test_python_control_flow_on_a_traced_value_names_construct_line_and_op(name, transform):
    fn, marker, parts = CASES[name]
    t = fg.jit(fn) if transform == "jit" else fg.jit(fg.grad(lambda x: fnp.sum(fn(x))))
    with pytest.raises(fg.TracerError) as info:
        t(X)
    where = f"{__file__}:{_line_of(fn, marker)}"
    assert_clean(info.value, *parts, where, "fnp.where")


def test_the_suggested_op_works():
    def fixed(x):
        return fg.while_loop(lambda y: fnp.max(y) < 10.0, lambda y: y * 2.0, x)

    assert np.array_equal(fg.jit(fixed)(X), uses_while(X))


def test_control_flow_function_errors_are_clean():
    with pytest.raises(fg.ControlFlowError) as info:
        fg.jit(lambda x: fg.scan(lambda c, t: (c.astype(np.float32), t), x, np.ones((2, 3))))(X)
    assert_clean(info.value, "fg.scan", "f64[3] vs f32[3]", "same structure, shapes and dtypes")
