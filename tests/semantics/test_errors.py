"""SEMANTICS.md "Errors", functional API: every user mistake gets a clear exception.

Each test makes one mistake and checks the exception's type and that its
message says what was wrong (op name, shapes, dtype, index, the user's line)
and what to do, and never leaks Numba or raw NumPy internals.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp

#: Text that must never reach a user: Numba internals, tracebacks, NumPy's own messages.
LEAKS = (
    "numba",
    "traceback",
    "operands could not be broadcast together",
    "matmul: input operand",
    "core/",
    "site-packages",
)


def assert_clean(exc: BaseException, *must_contain: str) -> str:
    """``exc``'s message contains every string of ``must_contain`` and nothing of ``LEAKS``."""
    msg = str(exc)
    for part in must_contain:
        assert part in msg, f"{part!r} not in message: {msg}"
    for leak in LEAKS:
        assert leak not in msg.lower(), f"{leak!r} leaked into message: {msg}"
    return msg


def _line_of(fn, marker: str) -> int:
    """The line number of the first source line of ``fn`` containing ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


# --- shapes -------------------------------------------------------------------------


def test_shape_mismatch_under_grad():
    with pytest.raises(fg.ShapeError) as info:
        fg.grad(lambda x: fnp.sum(x + np.ones(4)))(np.ones(3))
    assert_clean(info.value, "add", "(3,)", "(4,)")


def test_shape_mismatch_in_a_binary_operator_between_arguments():
    with pytest.raises(fg.ShapeError) as info:
        fg.grad(lambda x, y: fnp.sum(x * y))(np.ones((2, 3)), np.ones((3, 2)))
    assert_clean(info.value, "mul", "(2, 3)", "(3, 2)")


def test_shape_mismatch_is_a_value_error_too():
    # fg.ShapeError is a ValueError, so code catching NumPy's errors keeps working
    with pytest.raises(ValueError, match="do not broadcast"):
        fg.jit(lambda x, y: x - y)(np.ones(3), np.ones(4))


def test_matmul_with_misaligned_shapes():
    with pytest.raises(fg.ShapeError) as info:
        fg.grad(lambda x: fnp.sum(x @ np.ones((4, 2))))(np.ones((2, 3)))
    assert_clean(info.value, "matmul", "(2, 3)", "(4, 2)")


def test_reshape_to_the_wrong_size():
    with pytest.raises(fg.ShapeError) as info:
        fg.grad(lambda x: fnp.sum(x.reshape(4)))(np.ones(3))
    assert_clean(info.value, "reshape", "(4,)", "3")


# --- grad -----------------------------------------------------------------------------


def test_non_scalar_output_to_grad():
    with pytest.raises(fg.GradError) as info:
        fg.grad(lambda x: x * 2.0)(np.ones(3))
    assert_clean(info.value, "f64[3]", "fg.jacobian", "scalar")


def test_tuple_output_to_grad_without_has_aux():
    with pytest.raises(fg.GradError) as info:
        fg.grad(lambda x: (x * x, x))(1.0)
    assert_clean(info.value, "one scalar")


@pytest.mark.parametrize(
    ("arg", "dtype"),
    [(3, "int64"), (np.arange(3, dtype=np.int32), "int32"), (np.array([True]), "bool")],
)
def test_integer_input_asked_for_a_gradient(arg, dtype):
    with pytest.raises(fg.GradError) as info:
        fg.grad(lambda x: fnp.sum(x * 1.0))(arg)
    assert_clean(info.value, dtype, "argument 0", "float")


def test_integer_leaf_of_a_pytree_asked_for_a_gradient():
    with pytest.raises(fg.GradError) as info:
        fg.grad(lambda p: p["w"] * p["n"])({"n": 2, "w": 1.5})
    assert_clean(info.value, "int64", "leaf", "argnums")


def test_integer_argument_outside_argnums_is_fine():
    assert fg.grad(lambda x, n: x * n)(3.0, 2) == 2.0


def test_argnums_out_of_range():
    with pytest.raises(fg.GradError) as info:
        fg.grad(lambda x: x * x, argnums=1)(3.0)
    assert_clean(info.value, "argnums=1", "1 positional argument")


def test_wrong_cotangent_shape_to_vjp_fn():
    _, vjp_fn = fg.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(fg.GradError) as info:
        vjp_fn(np.ones(4))
    assert_clean(info.value, "(4,)", "(3,)", "cotangent")


def test_wrong_cotangent_structure_to_vjp_fn():
    _, vjp_fn = fg.vjp(lambda x: (x, 2 * x), np.ones(3))
    with pytest.raises(fg.GradError) as info:
        vjp_fn(np.ones(3))
    assert_clean(info.value, "cotangent structure", "tuple")


def test_unsupported_argument_type():
    with pytest.raises(TypeError) as info:
        fg.grad(lambda x: x)("1.0")
    assert_clean(info.value, "str", "NumPy arrays")


# --- tracing ----------------------------------------------------------------------------


def _branchy(x):
    if x > 0:  # value-dependent branch
        return x
    return -x


def _loopy(x):
    while x < 10.0:  # value-dependent loop
        x = x * 2
    return x


def _to_float(x):
    return float(x) * x  # concrete conversion


@pytest.mark.parametrize(
    ("fn", "marker"),
    [(_branchy, "value-dependent branch"), (_loopy, "value-dependent loop"),
     (_to_float, "concrete conversion")],
    ids=["if", "while", "float"],
)
def test_value_dependent_control_flow_under_tracing(fn, marker):
    with pytest.raises(fg.TracerError) as info:
        fg.vmap(fg.grad(fn))(np.ones(2))
    assert_clean(info.value, "fg.cond", "fnp.where", f"{__file__}:{_line_of(fn, marker)}")


def test_value_dependent_control_flow_under_jit():
    with pytest.raises(fg.TracerError) as info:
        fg.jit(_branchy)(1.0)
    line = _line_of(_branchy, "value-dependent branch")
    assert_clean(info.value, "static_argnums", f"{__file__}:{line}")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda x: np.unique(x), "np.unique"),
        (lambda x: np.lexsort(x), "np.lexsort"),  # np.sort is supported (fnp.sort)
        (lambda x: np.linalg.matrix_rank(x.reshape(1, 3) * np.ones((3, 1))),
         "np.linalg.matrix_rank"),
        (lambda x: np.frexp(x)[0], "np.frexp"),
        (lambda x: np.add.reduce(x), "np.add.reduce"),
    ],
    ids=["unique", "lexsort", "matrix_rank", "frexp-ufunc", "ufunc-method"],
)
def test_unsupported_numpy_function_under_tracing(call, name):
    with pytest.raises(TypeError) as info:
        fg.grad(lambda x: fnp.sum(call(x)))(np.ones(3))
    assert_clean(info.value, name, "not supported", "fusegrad.numpy")


def test_numpy_out_argument_under_tracing():
    with pytest.raises(TypeError) as info:
        fg.grad(lambda x: fnp.sum(np.sin(x, out=np.empty(3))))(np.ones(3))
    assert_clean(info.value, "np.sin", "out=")


def test_leaked_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * x

    fg.grad(f)(1.0)
    with pytest.raises(fg.TracerError) as info:
        fg.grad(lambda y: leaked[0] * y)(2.0)
    assert_clean(info.value, "leaked tracer", "return it")


# --- non-differentiable ops ------------------------------------------------------------


def test_every_op_is_differentiable_or_marked():
    # an op on the differentiated path without a rule would raise NotDifferentiableError;
    # the op table leaves no such op, so that error cannot be reached from the API
    from fusegrad.ir import OPS
    from fusegrad.passes.autodiff import NON_DIFFERENTIABLE, VJP_RULES

    assert set(OPS) <= set(VJP_RULES) | NON_DIFFERENTIABLE


@pytest.mark.parametrize(
    ("f", "x"),
    [
        (lambda x: fnp.argmax(x) * 1.0, np.array([1.0, 5.0, 2.0])),
        (lambda x: fnp.sum(fnp.floor(x)), np.array([0.5, 1.5, 2.5])),
        (lambda x: fnp.sum(fnp.sign(x) * 3.0), np.array([-1.0, 2.0, 3.0])),
    ],
    ids=["argmax", "floor", "sign"],
)
def test_piecewise_constant_ops_give_zero_gradient(f, x):
    np.testing.assert_array_equal(fg.grad(f)(x), np.zeros_like(x))


def test_argmax_as_an_index_passes_the_gradient_to_the_selected_element():
    g = fg.grad(lambda x: x[fnp.argmax(x)] * 2.0)(np.array([1.0, 5.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 2.0, 0.0])


# --- indexing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "shape", "index", "axis", "size"),
    [
        (lambda x: x[5], (3,), "5", 0, 3),
        (lambda x: x[-4], (3,), "-4", 0, 3),
        (lambda x: x[1, 7], (3, 4), "7", 1, 4),
        (lambda x: fnp.sum(x[:, 9]), (3, 4), "9", 1, 4),
        (lambda x: fnp.sum(x[np.array([0, 7])]), (3,), "7", 0, 3),
        (lambda x: fnp.sum(x[np.array([-5, 0])]), (3,), "-5", 0, 3),
        (lambda x: fnp.sum(x[:, np.array([0, 4])]), (3, 4), "4", 1, 4),
    ],
    ids=["int", "negative-int", "2d-int", "int-after-slice", "int-array",
         "negative-int-array", "int-array-axis1"],
)
def test_index_out_of_bounds(f, shape, index, axis, size):
    with pytest.raises(IndexError) as info:
        fg.grad(f)(np.ones(shape))
    assert_clean(info.value, f"index {index}", f"axis {axis}", f"size {size}")


# --- custom rules and jit -----------------------------------------------------------------


def test_custom_vjp_bwd_returning_the_wrong_number_of_cotangents():
    @fg.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(fg.GradError) as info:
        fg.grad(f)(1.0, 2.0)
    assert_clean(info.value, "bwd", "one cotangent per argument", "(2)")


def test_custom_vjp_bwd_returning_a_wrongly_shaped_cotangent():
    @fg.custom_vjp
    def f(x):
        return 2.0 * x

    f.defvjp(lambda x: (2.0 * x, None), lambda _, g: (np.ones(3) * g,))
    with pytest.raises(fg.GradError) as info:
        fg.grad(f)(1.0)
    assert_clean(info.value, "bwd", "(3,)", "()", "argument 0")


def test_custom_vjp_bwd_returning_the_wrong_structure():
    @fg.custom_vjp
    def f(p):
        return p["a"] * p["b"]

    f.defvjp(lambda p: (p["a"] * p["b"], p), lambda p, g: ((g, g),))
    with pytest.raises(fg.GradError) as info:
        fg.grad(f)({"a": 1.0, "b": 2.0})
    assert_clean(info.value, "bwd", "tuple(*, *)", "dict(*, *)")


def test_jit_unhashable_static_argument():
    with pytest.raises(TypeError) as info:
        fg.jit(lambda x, n: x * len(n), static_argnums=1)(1.0, [1, 2])
    assert_clean(info.value, "static", "hashable")


@pytest.mark.parametrize("static", [2, (0, 2), -3])
def test_jit_static_argnums_out_of_range(static):
    with pytest.raises(ValueError) as info:
        fg.jit(lambda x, n: x * n, static_argnums=static)(1.0, 2)
    assert_clean(info.value, "static_argnums", "2 positional argument")
