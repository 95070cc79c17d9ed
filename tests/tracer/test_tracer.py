"""The tracer: golden IR text, NumPy protocol recording, errors, trace levels, threads."""

from __future__ import annotations

import os
import textwrap
import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.tracer import Trace
from fusegrad.tracer.core import _state

F64_3 = np.zeros(3)
F64_34 = np.zeros((3, 4))


def assert_ir(fn, expected: str) -> None:
    """``str(fn)`` equals ``expected`` (dedented, surrounding blank lines dropped)."""
    want = textwrap.dedent(expected).strip("\n")
    got = str(fn).strip("\n")
    assert got == want, f"IR differs.\n--- got ---\n{got}\n--- expected ---\n{want}"


# --- golden IR ----------------------------------------------------------------------


def chain(x, y):
    return fnp.exp(fnp.sin(x) * y - 1.0) / (1.0 + x * x)


def test_ir_elementwise_chain():
    assert_ir(fg.make_ir(chain)(F64_3, F64_3), """
        func @chain(%x: f64[3], %y: f64[3]) -> f64[3] {
          %0 = sin %x : f64[3]
          %1 = mul %0, %y : f64[3]
          %2 = constant {dtype=f64, value=1.0} : f64[]
          %3 = sub %1, %2 : f64[3]
          %4 = exp %3 : f64[3]
          %5 = mul %x, %x : f64[3]
          %6 = add %2, %5 : f64[3]
          %7 = div %4, %6 : f64[3]
          return %7
        }
    """)


def reductions(x):
    return fnp.mean(x, axis=-1, keepdims=True) + x.max(axis=0), fnp.sum(x)


def test_ir_reduction_axis_keepdims():
    assert_ir(fg.make_ir(reductions)(np.zeros((2, 3))), """
        func @reductions(%x: f64[2,3]) -> (f64[2,3], f64[]) {
          %0 = reduce_sum %x {axes=[1]} : f64[2]
          %1 = reshape %0 {shape=[2, 1]} : f64[2,1]
          %2 = count {axes=[1], dtype=f64, shape=[2, 3]} : f64[]
          %3 = div %1, %2 : f64[2,1]
          %4 = reduce_max %x {axes=[0]} : f64[3]
          %5 = add %3, %4 : f64[2,3]
          %6 = reduce_sum %x {axes=[0, 1]} : f64[]
          return %5, %6
        }
    """)


def matvec(a, v):
    return a @ v, v @ a


def test_ir_matmul_with_1d_operand():
    assert_ir(fg.make_ir(matvec)(np.zeros((3, 3)), F64_3), """
        func @matvec(%a: f64[3,3], %v: f64[3]) -> (f64[3], f64[3]) {
          %0 = reshape %v {shape=[3, 1]} : f64[3,1]
          %1 = matmul %a, %0 : f64[3,1]
          %2 = reshape %1 {shape=[3]} : f64[3]
          %3 = reshape %v {shape=[1, 3]} : f64[1,3]
          %4 = matmul %3, %a : f64[1,3]
          %5 = reshape %4 {shape=[3]} : f64[3]
          return %2, %5
        }
    """)


def basic_index(x):
    return x[1:3, -1, None], x[::-2, 0], x[...]


def test_ir_basic_indexing():
    assert_ir(fg.make_ir(basic_index)(np.zeros((4, 5))), """
        func @basic_index(%x: f64[4,5]) -> (f64[2,1], f64[2], f64[4,5]) {
          %0 = slice %x {starts=[1, 4], steps=[1, 1], stops=[3, 5]} : f64[2,1]
          %1 = slice %x {starts=[3, 0], steps=[-2, 1], stops=[-1, 1]} : f64[2,1]
          %2 = reshape %1 {shape=[2]} : f64[2]
          return %0, %2, %x
        }
    """)


def gather(x, i):
    return x[np.array([2, 0])], x[:, i]


def test_ir_integer_array_gather():
    # a concrete index array is a closed-over array (implicit parameter %c); a traced one
    # is an ordinary parameter; indexing a later axis gathers on the transposed array
    assert_ir(fg.make_ir(gather)(F64_34, np.array([1, 1, 3])), """
        func @gather(%x: f64[3,4], %i: i64[3], %c: i64[2]) -> (f64[2,4], f64[3,3]) {
          %0 = take %x, %c {axis=0} : f64[2,4]
          %1 = transpose %x {perm=[1, 0]} : f64[4,3]
          %2 = take %1, %i {axis=0} : f64[3,3]
          %3 = transpose %2 {perm=[1, 0]} : f64[3,3]
          return %0, %3
        }
    """)


def updates(x, v, i):
    return x.at[0].set(v), x.at[i].add(v), x.at[1:, ::2].add(1.0)


def test_ir_at_set_add():
    assert_ir(fg.make_ir(updates)(F64_34, np.zeros(4), np.array([1, 1])), """
        func @updates(%x: f64[3,4], %v: f64[4], %i: i64[2]) -> (f64[3,4], f64[3,4], f64[3,4]) {
          %0 = reshape %v {shape=[1, 4]} : f64[1,4]
          %1 = update_slice %x, %0 {starts=[0, 0], steps=[1, 1], stops=[1, 4]} : f64[3,4]
          %2 = broadcast_to %v {shape=[2, 4]} : f64[2,4]
          %3 = index_add %x, %i, %2 {axis=0} : f64[3,4]
          %4 = constant {dtype=f64, value=1.0} : f64[]
          %5 = broadcast_to %4 {shape=[2, 2]} : f64[2,2]
          %6 = slice %x {starts=[1, 0], steps=[1, 2], stops=[3, 4]} : f64[2,2]
          %7 = add %6, %5 : f64[2,2]
          %8 = update_slice %x, %7 {starts=[1, 0], steps=[1, 2], stops=[3, 4]} : f64[3,4]
          return %1, %3, %8
        }
    """)


C = np.arange(3.0)


def closure(x):
    return x * C + C.sum()


def test_ir_closure_over_array_is_implicit_parameter():
    # the closed-over array is an input (%c), not baked in; C.sum() is a concrete
    # NumPy scalar and so a constant
    assert_ir(fg.make_ir(closure)(F64_3), """
        func @closure(%x: f64[3], %c: f64[3]) -> f64[3] {
          %0 = mul %x, %c : f64[3]
          %1 = constant {dtype=f64, value=3.0} : f64[]
          %2 = add %0, %1 : f64[3]
          return %2
        }
    """)


def test_closures_over_different_arrays_share_ir():
    def make(c):
        def f(x):
            return x * c

        return f

    a = fg.make_ir(make(np.ones(3)))(F64_3)
    b = fg.make_ir(make(np.full(3, 7.0)))(F64_3)
    assert str(a) == str(b)
    assert [p.type for p in a.params] == [fg.TensorType((3,), np.float64)] * 2


def weak(x, i):
    return x * 2.0 + 1, i + 1, x * np.float64(2.0)


def test_ir_python_scalars_are_weak():
    # f32 * 2.0 stays f32 and i32 + 1 stays i32; a NumPy float64 scalar is strong
    assert_ir(fg.make_ir(weak)(np.zeros(3, np.float32), np.zeros(3, np.int32)), """
        func @weak(%x: f32[3], %i: i32[3]) -> (f32[3], i32[3], f64[3]) {
          %0 = constant {dtype=f32, value=2.0} : f32[]
          %1 = mul %x, %0 : f32[3]
          %2 = constant {dtype=f32, value=1.0} : f32[]
          %3 = add %1, %2 : f32[3]
          %4 = constant {dtype=i32, value=1} : i32[]
          %5 = add %i, %4 : i32[3]
          %6 = convert %x {dtype=f64} : f64[3]
          %7 = constant {dtype=f64, value=2.0} : f64[]
          %8 = mul %6, %7 : f64[3]
          return %3, %5, %8
        }
    """)


def test_ir_python_scalar_argument_is_f64():
    assert_ir(fg.make_ir(lambda x: x * x)(3.0), """
        func @"<lambda>"(%x: f64[]) -> f64[] {
          %0 = mul %x, %x : f64[]
          return %0
        }
    """)


def test_shape_dependent_control_flow_is_unrolled():
    def f(x):
        for _ in range(x.shape[0] - 1):
            x = x * 2.0
        return x if x.ndim == 1 else x.sum()

    assert_ir(fg.make_ir(f)(F64_3), """
        func @f(%x: f64[3]) -> f64[3] {
          %0 = constant {dtype=f64, value=2.0} : f64[]
          %1 = mul %x, %0 : f64[3]
          %2 = mul %1, %0 : f64[3]
          return %2
        }
    """)


# --- NumPy protocols ----------------------------------------------------------------

W = np.zeros((4, 2))

PROTOCOL_PAIRS = {
    "sin": (lambda x: np.sin(x), lambda x: fnp.sin(x)),
    "sum_axis": (lambda x: np.sum(x, axis=1), lambda x: fnp.sum(x, axis=1)),
    "matmul_op": (lambda x: x @ W, lambda x: fnp.matmul(x, W)),
    "rmatmul_op": (lambda x: W.T @ x.T, lambda x: fnp.matmul(W.T, x.T)),
    "where": (lambda x: np.where(x > 0, x, 0.0), lambda x: fnp.where(x > 0, x, 0.0)),
    "maximum": (lambda x: np.maximum(x, 0.5), lambda x: fnp.maximum(x, 0.5)),
    "mean_keepdims": (lambda x: np.mean(x, axis=0, keepdims=True),
                      lambda x: fnp.mean(x, axis=0, keepdims=True)),
    "exp_ufunc_on_expr": (lambda x: np.exp(-x) + np.tanh(x), lambda x: fnp.exp(-x) + fnp.tanh(x)),
    "dot": (lambda x: np.dot(x, W), lambda x: fnp.dot(x, W)),
    "einsum": (lambda x: np.einsum("ij,jk->ik", x, W), lambda x: fnp.einsum("ij,jk->ik", x, W)),
    "concatenate": (lambda x: np.concatenate([x, x], axis=1),
                    lambda x: fnp.concatenate([x, x], axis=1)),
    "reshape_transpose": (lambda x: np.transpose(np.reshape(x, (4, 3))),
                          lambda x: fnp.transpose(fnp.reshape(x, (4, 3)))),
    "array_op_tracer": (lambda x: np.ones(4) - x, lambda x: fnp.subtract(np.ones(4), x)),
}


@pytest.mark.parametrize("name", PROTOCOL_PAIRS)
def test_numpy_protocol_records_same_ir_as_fnp(name):
    via_numpy, via_fnp = PROTOCOL_PAIRS[name]
    assert str(fg.make_ir(via_numpy)(F64_34)) == str(fg.make_ir(via_fnp)(F64_34))


@pytest.mark.parametrize(
    "fn, name",
    [
        (lambda x: np.fft.hfft(x), "np.fft.hfft"),
        (lambda x: np.linalg.matrix_rank(x), "np.linalg.matrix_rank"),
        (lambda x: np.unique(x), "np.unique"),  # np.sort is supported (fnp.sort)
        (lambda x: np.add.accumulate(x), "np.add.accumulate"),
    ],
)
def test_unsupported_numpy_function_names_it(fn, name):
    with pytest.raises(TypeError, match="not supported") as info:
        fg.make_ir(fn)(F64_34)
    assert name in str(info.value)


def test_numpy_out_argument_is_refused():
    out = np.zeros((3, 4))
    with pytest.raises(TypeError, match="out="):
        fg.make_ir(lambda x: np.sin(x, out=out))(F64_34)


# --- concretisation errors ----------------------------------------------------------


def use_bool(x):
    return bool(x.sum())


def use_if(x):
    if x.sum() > 0:
        return x
    return -x


def use_while(x):
    while x.max() < 10.0:
        x = x * 2.0
    return x


def use_float(x):
    return x * float(x[0])


def use_int(x):
    return x[: int(x.sum())]


def use_item(x):
    return x * x.sum().item()


def use_asarray(x):
    return np.asarray(x) + 1.0


def use_index(x):
    return [1.0, 2.0, 3.0][x[0].astype(np.int64)]


# (function, line offset of the offending statement from `def`, words naming the construct)
CONCRETE = {
    "bool": (use_bool, 1, "bool()"),
    "if": (use_if, 1, "`if`"),
    "while": (use_while, 1, "`while`"),
    "float": (use_float, 1, "float()"),
    "int": (use_int, 1, "int()"),
    "item": (use_item, 1, ".item()"),
    "asarray": (use_asarray, 1, "np.asarray"),
    "index": (use_index, 1, "Python index"),
}


@pytest.mark.parametrize("name", CONCRETE)
def test_concretisation_error_names_construct_source_line_and_alternatives(name):
    fn, offset, construct = CONCRETE[name]
    with pytest.raises(fg.TracerError) as info:
        fg.make_ir(fn)(F64_3)
    msg = str(info.value)
    assert construct in msg
    assert f"{__file__}:{fn.__code__.co_firstlineno + offset}" in msg
    assert "fg.cond" in msg and "fnp.where" in msg


def test_concretisation_error_under_grad_and_jit():
    with pytest.raises(fg.TracerError, match=r"fg\.cond"):
        fg.jit(fg.grad(lambda x: x if x > 0 else -x))(1.0)
    with pytest.raises(fg.TracerError, match=r"fg\.vmap"):
        fg.vmap(fg.grad(lambda x: x if x > 0 else -x))(np.ones(3))
    with pytest.raises(fg.TracerError, match=r"fnp\.where"):
        fg.jit(use_if)(F64_3)


def test_error_location_of_user_file_beside_the_package():
    path = os.path.dirname(fg.__file__) + "_examples/script.py"
    namespace: dict = {}
    exec(compile("def f(x):\n    return bool(x)\n", path, "exec"), namespace)
    with pytest.raises(fg.TracerError) as info:
        fg.make_ir(namespace["f"])(F64_3)
    assert f"{path}:2" in str(info.value)


def test_error_says_which_alternatives_exist_today():
    """Besides fg.cond & co., the message names what works in this version."""
    with pytest.raises(fg.TracerError) as info:
        fg.make_ir(use_if)(F64_3)
    msg = str(info.value)
    assert "fnp.where" in msg and "static_argnums" in msg


def test_tracer_error_is_a_fusegrad_error():
    assert issubclass(fg.TracerError, fg.FusegradError)


def test_traced_boolean_mask_index_raises_pointing_to_where():
    def f(x):
        return x[x > 0].sum()

    with pytest.raises(fg.TracerError, match=r"fnp\.where"):
        fg.make_ir(f)(F64_3)


def test_concrete_boolean_mask_index_is_fine():
    mask = np.array([True, False, True])
    assert_ir(fg.make_ir(lambda x: x[mask])(F64_3), """
        func @"<lambda>"(%x: f64[3], %c: i64[2]) -> f64[2] {
          %0 = take %x, %c {axis=0} : f64[2]
          return %0
        }
    """)


LEAKED = []


def test_leaked_tracer_raises():
    def leak(x):
        LEAKED.append(x * 2.0)
        return x

    fg.make_ir(leak)(F64_3)
    try:
        with pytest.raises(fg.TracerError, match="leaked"):
            fg.make_ir(lambda y: y + LEAKED[0])(F64_3)
        with pytest.raises(fg.TracerError, match="leaked"):
            fg.make_ir(lambda y: LEAKED[0] * 3.0)(F64_3)
    finally:
        LEAKED.clear()
    assert _state.stack == []


# --- trace levels and threads -------------------------------------------------------


def test_trace_levels_nest_and_unwind():
    assert _state.stack == []
    with Trace("a") as a:
        assert a.level == 1
        with Trace("b") as b:
            assert b.level == 2
            with Trace("c") as c:
                assert c.level == 3
        with Trace("d") as d:
            assert d.level == 2
    assert _state.stack == []


def test_nested_transforms_get_increasing_levels():
    seen = []

    def innermost(z):
        seen.append(repr(z))
        return z * 2.0

    def inner(y):
        seen.append(repr(y))
        fg.make_ir(innermost)(F64_3)
        return y

    def outer(x):
        seen.append(repr(x))
        fg.make_ir(inner)(F64_3)
        return x

    fg.make_ir(outer)(F64_3)
    assert seen == [
        "Tracer<f64[3], level 1>",
        "Tracer<f64[3], level 2>",
        "Tracer<f64[3], level 3>",
    ]
    assert _state.stack == []


def test_nested_grad_of_closure_is_correct():
    # the outer x is a free variable of the inner trace (level 2), lifted to an input
    out = fg.grad(lambda x: x * fg.grad(lambda y: x * y * y)(1.0))(3.0)
    np.testing.assert_allclose(out, 4 * 3.0, rtol=1e-12)
    assert fg.grad(lambda x: x * fg.grad(lambda y: x + y)(1.0))(1.0) == 1.0


def test_trace_error_unwinds_the_trace_stack():
    with pytest.raises(fg.TracerError):
        fg.make_ir(use_bool)(F64_3)
    assert _state.stack == []


def test_trace_state_is_thread_local():
    barrier = threading.Barrier(2, timeout=10)
    results: dict[str, object] = {}

    def thread_a(x):
        barrier.wait()  # both traces are open now
        results["a_stack"] = len(_state.stack)
        y = fnp.sin(x)
        barrier.wait()  # interleave recording
        return y * x

    def thread_b(x):
        barrier.wait()
        results["b_stack"] = len(_state.stack)
        y = fnp.exp(x)
        barrier.wait()
        return fnp.sum(y)

    def run(name, fn, arg):
        try:
            results[name] = fg.make_ir(fn)(arg)
        except BaseException as e:  # reported by the main thread
            results[name] = e
            barrier.abort()

    threads = [
        threading.Thread(target=run, args=("a", thread_a, F64_3)),
        threading.Thread(target=run, args=("b", thread_b, F64_34)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for name in ("a", "b"):
        if isinstance(results[name], BaseException):
            raise results[name]
    assert results["a_stack"] == 1 and results["b_stack"] == 1
    assert_ir(results["a"], """
        func @thread_a(%x: f64[3]) -> f64[3] {
          %0 = sin %x : f64[3]
          %1 = mul %0, %x : f64[3]
          return %1
        }
    """)
    assert_ir(results["b"], """
        func @thread_b(%x: f64[3,4]) -> f64[] {
          %0 = exp %x : f64[3,4]
          %1 = reduce_sum %0 {axes=[0, 1]} : f64[]
          return %1
        }
    """)
    assert _state.stack == []
