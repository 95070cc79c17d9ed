"""The verifier: valid IR passes, and each kind of broken IR raises a VerifyError naming the op."""

from __future__ import annotations

import numpy as np
import pytest

from fusegrad.ir.core import Builder, Function, Op, Value
from fusegrad.ir.errors import ShapeError, VerifyError
from fusegrad.ir.optable import OPS, OpDef
from fusegrad.ir.parser import parse_function
from fusegrad.ir.types import TensorType
from fusegrad.ir.verifier import verify

V3 = TensorType((3,), np.float64)
S = TensorType((), np.float64)


def emit(b: Builder, name: str, *operands: Value, **attrs):
    """Emit op ``name`` with result types from the op table's rule."""
    types = OPS[name].rule(tuple(v.type for v in operands), **attrs)
    return b.emit(name, operands, attrs, types)


def call_rule(types, *, regions):
    """``call(args) {region}``: applies its one region to its operands."""
    (region,) = regions
    if types != region.in_types:
        raise TypeError(f"call: operands {types} do not match the region's {region.in_types}")
    return region.out_types


@pytest.fixture
def call_op(monkeypatch):
    monkeypatch.setitem(OPS, "call", OpDef("call", None, (), call_rule, None, "region"))


def sin_mul_sum() -> tuple[Function, Builder]:
    b = Builder("f")
    x = b.param(V3, "x")
    (s,) = emit(b, "sin", x)
    (m,) = emit(b, "mul", s, x)
    (r,) = emit(b, "reduce_sum", m, axes=(0,))
    return b.build((r,)), b


def with_op(fn: Function, index: int, **changes) -> Function:
    """``fn`` with op ``index`` changed."""
    ops = list(fn.ops)
    ops[index] = ops[index].replace(**changes)
    return fn.replace(ops=tuple(ops))


def check_fails(fn: Function, *fragments: str) -> VerifyError:
    with pytest.raises(VerifyError) as info:
        verify(fn)
    for frag in fragments:
        assert frag in str(info.value)
    return info.value


def negate_region(name: str = "r") -> Function:
    b = Builder(name)
    a = b.param(V3, "a")
    return b.build(emit(b, "neg", a))


def test_valid_functions_pass(call_op):
    fn, _ = sin_mul_sum()
    assert verify(fn) is None
    b = Builder("g")
    x = b.param(V3, "x")
    (c,) = emit(b, "constant", value=2, dtype="f64")
    (y,) = b.emit("call", (x,), {}, (V3,), regions=(negate_region(),))
    (z,) = emit(b, "mul", y, c)
    verify(b.build((z, y, x)))
    verify(Builder("empty").build(()))


def test_parsed_text_verifies():
    verify(
        parse_function(
            "func @f(%x: f64[3], %y: f64[]) -> f64[3] {\n  %0 = add %x, %y : f64[3]\n  return %0\n}"
        )
    )


def test_message_names_function_op_index_and_line():
    fn, _ = sin_mul_sum()
    bad = with_op(fn, 1, results=(Value(TensorType((3,), np.float32)),))
    err = check_fails(
        bad, "@f: op #1 'mul': result types (f32[3]) differ from the shape rule's (f64[3])"
    )
    assert str(err).splitlines()[1].strip() == "%1 = mul %0, %x : f32[3]"


def test_operand_not_defined():
    fn, _ = sin_mul_sum()
    stranger = Value(V3, "y")
    bad = with_op(fn, 1, operands=(fn.ops[0].results[0], stranger))
    err = check_fails(bad, "op #1 'mul': operand 1 is not defined in this function")
    assert "%1 = mul %0, %?0 : f64[3]" in str(err)


def test_operand_used_before_definition():
    fn, _ = sin_mul_sum()
    bad = fn.replace(ops=(fn.ops[1], fn.ops[0], fn.ops[2]))
    check_fails(bad, "op #0 'mul': operand 0 (%1) is used before its definition")


def test_result_defined_twice():
    fn, _ = sin_mul_sum()
    bad = with_op(fn, 1, results=fn.ops[0].results)
    check_fails(bad, "op #1 'mul': result 0 (%0) is already defined")


def test_result_repeated_within_one_op(monkeypatch):
    monkeypatch.setitem(OPS, "two", OpDef("two", 1, (), lambda ts: (ts[0], ts[0]), None, "x"))
    b = Builder("f")
    x = b.param(V3, "x")
    (y,) = emit(b, "neg", x)
    b.ops.append(Op("two", (x,), {}, (y, y)))
    check_fails(b.build(()), "op #1 'two': result 0 (%0) is already defined")


def test_param_also_a_result():
    fn, _ = sin_mul_sum()
    bad = with_op(fn, 0, results=fn.params)
    check_fails(bad, "op #0 'sin': result 0 (%x) is already defined")


def test_param_listed_twice():
    fn, _ = sin_mul_sum()
    check_fails(
        fn.replace(params=fn.params * 2), "@f: parameter %x is already defined in this function"
    )


def test_unknown_op():
    fn, _ = sin_mul_sum()
    check_fails(
        with_op(fn, 0, name="sine"), "op #0 'sine': unknown op 'sine'", "%0 = sine %x : f64[3]"
    )


def test_wrong_operand_count():
    fn, _ = sin_mul_sum()
    x = fn.params[0]
    check_fails(with_op(fn, 0, operands=(x, x)), "op #0 'sin': takes 1 operands, got 2")


def test_variadic_op_takes_any_count():
    b = Builder("f")
    xs = [b.param(V3) for _ in range(4)]
    (y,) = emit(b, "concatenate", *xs, axis=0)
    verify(b.build((y,)))
    assert y.type == TensorType((12,), np.float64)


@pytest.mark.parametrize(
    ("attrs", "shown"),
    [
        ({}, "()"),
        ({"axes": (0,), "keepdims": True}, "('axes', 'keepdims')"),
        ({"axis": 0}, "('axis',)"),
    ],
)
def test_attr_keys_must_match_the_table(attrs, shown):
    fn, _ = sin_mul_sum()
    check_fails(
        with_op(fn, 2, attrs=attrs),
        f"op #2 'reduce_sum': attributes are {shown}, but the op table says ('axes',)",
    )


def test_attr_value_without_text_form():
    fn, _ = sin_mul_sum()
    check_fails(
        with_op(fn, 2, attrs={"axes": np.array([0])}),
        "op #2 'reduce_sum': attribute 'axes': attribute value array([0])",
    )


def test_wrong_result_count():
    fn, _ = sin_mul_sum()
    extra = (fn.ops[0].results[0], Value(V3))
    check_fails(
        with_op(fn, 0, results=extra),
        "op #0 'sin': result types (f64[3], f64[3]) differ from the shape rule's (f64[3])",
    )


def test_shape_rule_error_becomes_verify_error():
    b = Builder("f")
    x = b.param(V3, "x")
    y = b.param(TensorType((4,), np.float64), "y")
    b.emit("mul", (x, y), {}, (V3,))
    err = check_fails(
        b.build(()),
        "op #0 'mul': the shape rule rejects it: mul: operand shapes "
        "(3,) and (4,) do not broadcast together",
    )
    assert isinstance(err.__cause__, ShapeError)


def test_other_rule_failure_becomes_verify_error():
    b = Builder("f")
    b.emit("constant", (), {"value": 1.0, "dtype": "f65"}, (S,))
    check_fails(b.build(()), "op #0 'constant': the shape rule failed with KeyError: 'f65'")


def test_function_result_not_defined():
    fn, _ = sin_mul_sum()
    check_fails(fn.replace(results=(Value(S),)), "@f: result 0 is an undefined value")


def test_regions_on_a_non_region_op():
    fn, _ = sin_mul_sum()
    check_fails(
        with_op(fn, 0, regions=(negate_region(),)),
        "op #0 'sin': has 1 regions, but sin is not a region op",
    )


def test_region_rule_gets_the_regions(call_op):
    b = Builder("f")
    x = b.param(V3, "x")
    b.emit("call", (x,), {}, (S,), regions=(negate_region(),))
    check_fails(
        b.build(()), "op #0 'call': result types (f64[]) differ from the shape rule's (f64[3])"
    )
    b = Builder("f")
    b.emit("call", (b.param(S),), {}, (V3,), regions=(negate_region(),))
    check_fails(b.build(()), "the shape rule failed with TypeError: call: operands")


def test_region_is_verified_recursively(call_op):
    r = negate_region("inner")
    bad = with_op(r, 0, name="negate")
    b = Builder("f")
    x = b.param(V3, "x")
    b.emit("call", (x,), {}, (V3,), regions=(negate_region(), bad))
    check_fails(b.build(()), "@f > op #0 'call' region 1 @inner: op #0 'negate': unknown op")


def test_region_must_not_use_outer_values(call_op):
    outer = Builder("f")
    x = outer.param(V3, "x")
    rb = Builder("r")
    a = rb.param(V3, "a")
    (s,) = emit(rb, "add", a, x)
    outer.emit("call", (x,), {}, (V3,), regions=(rb.build((s,)),))
    check_fails(
        outer.build(()), "region 0 @r: op #0 'add': operand 1 is a value of an enclosing function"
    )
    rb = Builder("r")
    rb.param(V3, "a")
    outer.ops.clear()
    outer.emit("call", (x,), {}, (V3,), regions=(rb.build((x,)),))
    check_fails(outer.build(()), "region 0 @r: result 0 is a value of an enclosing function")


def test_region_must_not_redefine_outer_values(call_op):
    outer = Builder("f")
    x = outer.param(V3, "x")
    region = Function("r", (x,), (), (x,))
    outer.emit("call", (x,), {}, (V3,), regions=(region,))
    check_fails(
        outer.build(()), "region 0 @r: parameter %x is already defined in an enclosing function"
    )
