"""The IR text form: golden printer output, print -> parse -> print identity, parse errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fusegrad.ir import optable
from fusegrad.ir.core import Builder, Function, Value
from fusegrad.ir.errors import IRParseError
from fusegrad.ir.optable import OPS, OpDef
from fusegrad.ir.parser import parse_function
from fusegrad.ir.printer import print_function
from fusegrad.ir.types import TensorType

F64 = np.float64


def emit(b: Builder, name: str, *operands: Value, loc: str | None = None, **attrs):
    """Emit op ``name`` with result types from the op table's rule."""
    types = OPS[name].rule(tuple(v.type for v in operands), **attrs)
    return b.emit(name, operands, attrs, types, loc=loc)


def call_rule(types, *, regions):
    return regions[0].out_types


@pytest.fixture
def test_ops(monkeypatch):
    """Test-only ops: a region op, a two-result op and a zero-result op."""
    monkeypatch.setitem(OPS, "call", OpDef("call", None, (), call_rule, None, "region"))
    monkeypatch.setitem(
        OPS, "split2", OpDef("split2", 1, (), lambda ts: (ts[0], ts[0]), None, "shape")
    )
    monkeypatch.setitem(OPS, "sink", OpDef("sink", None, ("tag",), lambda ts, tag: (), None, "x"))


def sin_mul_sum() -> Function:
    b = Builder("f")
    x = b.param(TensorType((1000,), F64), "x")
    (s,) = emit(b, "sin", x, loc="model.py:3")
    (m,) = emit(b, "mul", s, x, loc="model.py:4")
    (r,) = emit(b, "reduce_sum", m, axes=(0,))
    return b.build((r,))


GOLDEN = """\
func @f(%x: f64[1000]) -> f64[] {
  %0 = sin %x : f64[1000]
  %1 = mul %0, %x : f64[1000]
  %2 = reduce_sum %1 {axes=[0]} : f64[]
  return %2
}"""


def test_golden_text():
    fn = sin_mul_sum()
    assert print_function(fn) == GOLDEN
    assert str(fn) == GOLDEN


def test_golden_text_with_locs():
    assert (
        print_function(sin_mul_sum(), locs=True)
        == """\
func @f(%x: f64[1000]) -> f64[] {
  %0 = sin %x : f64[1000] loc("model.py:3")
  %1 = mul %0, %x : f64[1000] loc("model.py:4")
  %2 = reduce_sum %1 {axes=[0]} : f64[]
  return %2
}"""
    )


def multi_result() -> Function:
    b = Builder("two")
    x = b.param(TensorType((3,), F64))
    y = b.param(TensorType((), F64), "y")
    (s,) = emit(b, "reduce_sum", x, axes=(0,))
    (t,) = emit(b, "add", x, y)
    return b.build((s, t))


def test_multi_result_function():
    assert (
        print_function(multi_result())
        == """\
func @two(%arg0: f64[3], %y: f64[]) -> (f64[], f64[3]) {
  %0 = reduce_sum %arg0 {axes=[0]} : f64[]
  %1 = add %arg0, %y : f64[3]
  return %0, %1
}"""
    )


def test_zero_result_function():
    b = Builder("nothing")
    b.param(TensorType((2,), np.int64), "n")
    assert print_function(b.build(())) == "func @nothing(%n: i64[2]) -> () {\n  return\n}"


def test_multi_result_and_zero_result_ops(test_ops):
    b = Builder("g")
    x = b.param(TensorType((2,), np.float32), "x")
    a, c = emit(b, "split2", x)
    emit(b, "sink", tag="t")
    emit(b, "sink", a, c, tag="u", loc="g.py:9")
    text = print_function(b.build((c,)), locs=True)
    assert (
        text
        == """\
func @g(%x: f32[2]) -> f32[2] {
  %0, %1 = split2 %x : f32[2], f32[2]
  sink {tag=t}
  sink %0, %1 {tag=u} loc("g.py:9")
  return %1
}"""
    )
    assert print_function(parse_function(text), locs=True) == text


def test_zero_operand_zero_result_op_before_a_result_line(test_ops):
    text = """\
func @g(%x: f32[2]) -> (f32[2], f32[2]) {
  sink
  %0, %1 = split2 %x : f32[2], f32[2]
  return %0, %1
}"""
    fn = parse_function(text)
    assert [len(op.operands) for op in fn.ops] == [0, 1]
    assert print_function(fn) == text


def test_param_names():
    b = Builder("<lambda>")
    hints = [None, "arg0", "x", "x", "1bad", "arg1", None, "é"]
    params = [b.param(TensorType((), F64), h) for h in hints]
    fn = b.build(params)
    header = print_function(fn).splitlines()[0]
    assert header.startswith(
        'func @"<lambda>"(%arg0: f64[], %arg1: f64[], %x: f64[], %arg3: f64[], '
        "%arg4: f64[], %arg5: f64[], %arg6: f64[], %arg7: f64[]) -> ("
    )
    parsed = parse_function(print_function(fn))
    assert print_function(parsed) == print_function(fn)
    assert parsed.name == "<lambda>"
    assert [p.hint for p in parsed.params][:3] == ["arg0", "arg1", "x"]


def test_fallback_param_name_avoids_a_hint_already_used():
    b = Builder("f")
    params = [b.param(TensorType((), F64), h) for h in ("arg1", None)]
    text = print_function(b.build(params))
    assert text.startswith("func @f(%arg1: f64[], %arg1_1: f64[]) -> (f64[], f64[]) {")
    assert print_function(parse_function(text)) == text


def region_function() -> Function:
    inner = Builder("inner")
    a = inner.param(TensorType((3,), F64), "a")
    (n,) = emit(inner, "neg", a)
    body = Builder("body")
    p = body.param(TensorType((3,), F64), "p")
    (e,) = emit(body, "exp", p)
    (c,) = body.emit("call", (e,), {}, (e.type,), regions=(inner.build((n,)),), loc="r.py:2")
    (s,) = emit(body, "reduce_sum", c, axes=(0,))
    outer = Builder("outer")
    x = outer.param(TensorType((3,), F64), "x")
    (y,) = emit(outer, "sin", x)
    cond = Builder("cond")
    q = cond.param(TensorType((3,), F64))
    (r,) = cond.emit("call", (q,), {}, (TensorType((), F64),), regions=(body.build((s,)),))
    regions = (body.build((s, c)), cond.build((r,)))
    z, w = outer.emit(
        "call", (y,), {}, (TensorType((), F64), c.type), regions=regions, loc="r.py:1"
    )
    return outer.build((z, w))


def test_region_layout(test_ops):
    assert (
        print_function(region_function(), locs=True)
        == """\
func @outer(%x: f64[3]) -> (f64[], f64[3]) {
  %0 = sin %x : f64[3]
  %1, %2 = call %0 : f64[], f64[3] (
    func @body(%p: f64[3]) -> (f64[], f64[3]) {
      %0 = exp %p : f64[3]
      %1 = call %0 : f64[3] (
        func @inner(%a: f64[3]) -> f64[3] {
          %0 = neg %a : f64[3]
          return %0
        }
      ) loc("r.py:2")
      %2 = reduce_sum %1 {axes=[0]} : f64[]
      return %2, %1
    }
    func @cond(%arg0: f64[3]) -> f64[] {
      %0 = call %arg0 : f64[] (
        func @body(%p: f64[3]) -> f64[] {
          %0 = exp %p : f64[3]
          %1 = call %0 : f64[3] (
            func @inner(%a: f64[3]) -> f64[3] {
              %0 = neg %a : f64[3]
              return %0
            }
          ) loc("r.py:2")
          %2 = reduce_sum %1 {axes=[0]} : f64[]
          return %2
        }
      )
      return %0
    }
  ) loc("r.py:1")
  return %1, %2
}"""
    )


def constants_and_attrs() -> Function:
    b = Builder("consts")
    values = [
        2.0,
        1,
        1.0,
        True,
        False,
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        1e-300,
        1e16,
        -7,
        2**70,
        0.1,
    ]
    outs = [emit(b, "constant", value=v, dtype="f64")[0] for v in values]
    x = b.param(TensorType((2, 3), np.int32), "x")
    (t,) = emit(b, "transpose", x, perm=(1, 0))
    (s,) = emit(b, "slice", t, starts=(0, 0), stops=(3, 2), steps=(1, 1))
    odd = {
        "nested": ((1, 2.5), (), ("f64", "a b")),
        "none": None,
        "q": 'say "hi"\n\\',
        "kw": ("true", "inf", "nan", "none", "-1"),
        "empty": (),
    }
    b.emit("convert", (s,), {"dtype": "f32", **odd}, (TensorType((3, 2), np.float32),))
    return b.build((*outs, s))


def test_constant_and_attr_text():
    text = print_function(constants_and_attrs())
    lines = [line.strip() for line in text.splitlines()]
    assert lines[1:9] == [
        "%0 = constant {dtype=f64, value=2.0} : f64[]",
        "%1 = constant {dtype=f64, value=1} : f64[]",
        "%2 = constant {dtype=f64, value=1.0} : f64[]",
        "%3 = constant {dtype=f64, value=true} : f64[]",
        "%4 = constant {dtype=f64, value=false} : f64[]",
        "%5 = constant {dtype=f64, value=inf} : f64[]",
        "%6 = constant {dtype=f64, value=-inf} : f64[]",
        "%7 = constant {dtype=f64, value=nan} : f64[]",
    ]
    assert lines[-3] == (
        '%16 = convert %15 {dtype=f32, empty=[], kw=["true", "inf", "nan", "none", "-1"], '
        'nested=[[1, 2.5], [], [f64, "a b"]], none=none, q="say \\"hi\\"\\n\\\\"} : f32[3,2]'
    )


def test_parsed_attr_values_keep_their_kind():
    fn = parse_function(print_function(constants_and_attrs()))
    got = [op.attrs["value"] for op in fn.ops[:14]]
    assert [type(v) for v in got[:5]] == [float, int, float, bool, bool]
    assert got[:5] == [2.0, 1, 1.0, True, False]
    assert got[5] == math.inf and got[6] == -math.inf and math.isnan(got[7])
    assert math.copysign(1.0, got[8]) == -1.0 and got[9:] == [1e-300, 1e16, -7, 2**70, 0.1]
    attrs = fn.ops[-1].attrs
    assert attrs["nested"] == ((1, 2.5), (), ("f64", "a b"))
    assert type(attrs["nested"][0][0]) is int
    assert attrs["none"] is None and attrs["q"] == 'say "hi"\n\\' and attrs["empty"] == ()
    assert attrs["kw"] == ("true", "inf", "nan", "none", "-1")
    assert fn.ops[15].attrs == {"starts": (0, 0), "stops": (3, 2), "steps": (1, 1)}


ROUND_TRIP = [sin_mul_sum, multi_result, constants_and_attrs, region_function]


@pytest.mark.parametrize("make", ROUND_TRIP, ids=lambda f: f.__name__)
@pytest.mark.parametrize("locs", [False, True])
def test_print_parse_print_is_identity(test_ops, make, locs):
    fn = make()
    text = print_function(fn, locs=locs)
    assert print_function(parse_function(text), locs=locs) == text
    assert print_function(parse_function(text)) == print_function(fn)


def test_parse_builds_typed_values_with_param_hints():
    fn = parse_function(GOLDEN)
    assert [p.hint for p in fn.params] == ["x"]
    assert fn.in_types == (TensorType((1000,), F64),)
    assert fn.out_types == (TensorType((), F64),)
    sin, mul, _ = fn.ops
    assert mul.operands == (sin.results[0], fn.params[0])
    assert fn.results == fn.ops[-1].results


def test_parse_without_locs_drops_them():
    fn = parse_function(print_function(sin_mul_sum(), locs=True))
    assert [op.loc for op in fn.ops] == ["model.py:3", "model.py:4", None]
    assert print_function(fn) == GOLDEN


def test_printer_rejects_attr_without_text_form():
    b = Builder()
    x = b.param(TensorType((2,), F64), "x")
    b.emit("convert", (x,), {"dtype": {"a": 1}}, (x.type,))
    with pytest.raises(TypeError, match="has no text form"):
        print_function(b.build(()))


def golden_with(old: str, new: str) -> str:
    assert old in GOLDEN
    return GOLDEN.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        (golden_with("mul %0, %x", "mul %0, %y"), "unknown value %y", 3, 16),
        (golden_with("%1 = mul", "%0 = mul"), "%0 is already defined at 2:3", 3, 3),
        (golden_with("%0 = sin", "%x = sin"), "%x is already defined at 1:9", 2, 3),
        (golden_with("%0 = sin %x : f64[1000]", "%0 = sin %x : f65[1000]"), "unknown dtype", 2, 17),
        (golden_with("(%x: f64[1000])", "(%x: f64[10.5])"), "dimensions must be integers", 1, 13),
        (golden_with("(%x: f64[1000])", "(%x: f64 1000)"), "expected '[' in a type", 1, 17),
        (golden_with("sin %x", "sine %x"), "unknown op 'sine'", 2, 8),
        (
            golden_with("%1 = mul %0, %x : f64[1000]", "%1, %9 = mul %0, %x : f64[1000]"),
            "wrong number of result types for mul: 2 results, 1 types",
            3,
            23,
        ),
        (
            golden_with("%0 = sin %x : f64[1000]", "%0 = sin %x : f64[1000], f64[1000]"),
            "wrong number of result types for sin: 1 results, 2 types",
            2,
            15,
        ),
        (
            golden_with(" : f64[1000]\n  %1", "\n  %1"),
            "expected ':' and the result types of sin",
            3,
            3,
        ),
        (
            golden_with("-> f64[]", "-> f32[]"),
            "@f returns (f64[]) but its header declares (f32[])",
            1,
            27,
        ),
        (
            golden_with("{axes=[0]}", "{axes=[0], axes=[0]}"),
            "attribute 'axes' is given twice",
            4,
            33,
        ),
        (golden_with("{axes=[0]}", "{axes=[0}"), "expected ',' or ']'", 4, 30),
        (golden_with("%1 = mul", "%1 = ! mul"), "unexpected character '!'", 3, 8),
        (golden_with("  return %2\n", ""), "expected an op or 'return', got '}'", 5, 1),
        (
            golden_with("  return %2\n", "  return %2\n  %3 = neg %2 : f64[]\n"),
            "'}' after return",
            6,
            3,
        ),
        (GOLDEN + "\nfunc", "end of text after the function", 7, 1),
        ("", "expected 'func', got 'end of text'", 1, 1),
        ('func @f() -> () {\n  constant {value="\n  return\n}', "unexpected character '\"'", 2, 19),
    ],
)
def test_parse_errors(text, message, line, column):
    with pytest.raises(IRParseError) as info:
        parse_function(text)
    err = info.value
    assert message in str(err)
    assert str(err).startswith(f"{line}:{column}: ")
    assert (err.line, err.column) == (line, column)


def test_parse_error_shows_the_line_and_a_caret():
    with pytest.raises(IRParseError) as info:
        parse_function(golden_with("mul %0, %x", "mul %0, %y"))
    _, src, caret = str(info.value).split("\n")
    assert src == "    %1 = mul %0, %y : f64[1000]"
    assert caret.index("^") == src.index("%y")


def test_region_cannot_see_outer_values(test_ops):
    text = """\
func @f(%x: f64[]) -> f64[] {
  %0 = call %x : f64[] (
    func @r(%a: f64[]) -> f64[] {
      %0 = neg %x : f64[]
      return %0
    }
  )
  return %0
}"""
    with pytest.raises(IRParseError, match="4:16: unknown value %x"):
        parse_function(text)


def test_ops_are_looked_up_in_the_live_table(monkeypatch):
    text = "func @f() -> () {\n  mystery\n  return\n}"
    with pytest.raises(IRParseError, match="unknown op 'mystery'"):
        parse_function(text)
    monkeypatch.setitem(optable.OPS, "mystery", OpDef("mystery", 0, (), lambda ts: (), None, "x"))
    assert print_function(parse_function(text)) == text
