"""Control-flow ops in the IR: golden text of a scan and its adjoint, the verifier on
malformed region ops, and simplify / fusion inside regions."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir import Builder, TensorType, VerifyError, parse_function, print_function, verify
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import run
from fusegrad.transforms.plan import vjp_pass
from tests.helpers import assert_close

SCAN = """\
func @scan_f(%x: f64[3], %xs: f64[2,3]) -> f64[] {
  %0, %1 = scan %x, %xs {length=2, num_carry=1, num_xs=1, reverse=false} : f64[3], f64[2] (
    func @step(%c: f64[3], %t: f64[3]) -> (f64[3], f64[]) {
      %0 = sin %c : f64[3]
      %1 = mul %0, %t : f64[3]
      %2 = reduce_sum %c {axes=[0]} : f64[]
      return %1, %2
    }
  )
  %2 = reduce_sum %0 {axes=[0]} : f64[]
  %3 = reduce_sum %1 {axes=[0]} : f64[]
  %4 = add %2, %3 : f64[]
  return %4
}"""

# the forward scan, also stacking the carry entering each step (%2), then the body's
# VJP scanned backwards over those carries, the xs and the ys' cotangents
SCAN_ADJOINT = """\
func @scan_f_vjp(%x: f64[3], %xs: f64[2,3], %ct: f64[]) -> (f64[], f64[3]) {
  %0, %1, %2 = scan %x, %xs {length=2, num_carry=1, num_xs=1, reverse=false} : f64[3], f64[2], f64[2,3] (
    func @step_store(%arg0: f64[3], %arg1: f64[3]) -> (f64[3], f64[], f64[3]) {
      %0 = sin %arg0 : f64[3]
      %1 = mul %0, %arg1 : f64[3]
      %2 = reduce_sum %arg0 {axes=[0]} : f64[]
      return %1, %2, %arg0
    }
  )
  %3 = reduce_sum %0 {axes=[0]} : f64[]
  %4 = reduce_sum %1 {axes=[0]} : f64[]
  %5 = add %3, %4 : f64[]
  %6 = broadcast_to %ct {shape=[2]} : f64[2]
  %7 = broadcast_to %ct {shape=[3]} : f64[3]
  %8, %9 = scan %7, %2, %xs, %6 {length=2, num_carry=1, num_xs=3, reverse=true} : f64[3], f64[2,3] (
    func @step_vjp(%arg0: f64[3], %arg1: f64[3], %arg2: f64[3], %arg3: f64[]) -> (f64[3], f64[3]) {
      %0 = sin %arg1 : f64[3]
      %1 = mul %arg0, %arg2 : f64[3]
      %2 = mul %arg0, %0 : f64[3]
      %3 = cos %arg1 : f64[3]
      %4 = mul %1, %3 : f64[3]
      %5 = add %arg3, %4 : f64[3]
      return %5, %2
    }
  )
  return %5, %8
}"""  # noqa: E501


def scan_f(x, xs):
    c, ys = fg.scan(lambda c, t: (fnp.sin(c) * t, fnp.sum(c)), x, xs)
    return fnp.sum(c) + fnp.sum(ys)


X, XS = np.array([0.2, -0.4, 0.9]), np.array([[1.0, 0.5, -1.0], [0.3, 2.0, 0.7]])


def test_golden_scan_and_its_adjoint():
    fn = fg.make_ir(scan_f)(X, XS)
    assert print_function(fn) == SCAN
    adj = vjp_pass(fn, [0])
    verify(adj)
    assert print_function(adj) == SCAN_ADJOINT
    # one forward loop: simplify merged the primal scan into the one stacking the carries
    assert [op.name for op in adj.ops].count("scan") == 2


@pytest.mark.parametrize("text", [SCAN, SCAN_ADJOINT], ids=["scan", "adjoint"])
def test_print_parse_print_is_identity(text):
    fn = parse_function(text)
    verify(fn)
    assert print_function(fn) == text
    assert print_function(parse_function(print_function(fn, locs=True)), locs=True) == \
        print_function(fn, locs=True)


def test_parsed_adjoint_runs():
    got = run(parse_function(SCAN_ADJOINT), X, XS, np.array(1.0))
    assert_close(got[1], fg.grad(scan_f)(X, XS), "exact64")


def test_every_control_op_round_trips():
    def f(x, n):
        y = fg.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: -a, x)
        y = fg.fori_loop(0, n, lambda i, c: c * 0.5 + x, y)
        y = fg.checkpoint(lambda a: fnp.tanh(a))(y)
        return fg.scan(lambda c, t: (c + t, c), y, XS, reverse=True)[1].sum()

    for fn in (fg.make_ir(f)(X, 3), vjp_pass(fg.make_ir(f)(X, 3), [0])):
        verify(fn)
        names = {op.name for op in fn.ops}
        assert {"cond", "while_loop", "checkpoint", "scan"} <= names or "while_grad" in names
        text = print_function(fn)
        assert print_function(parse_function(text)) == text


# --- the verifier ----------------------------------------------------------------------

BAD = {
    "branch-types": ("""
func @f(%p: bool[], %x: f64[3]) -> f64[3] {
  %0 = cond %p, %x : f64[3] (
    func @t(%a: f64[3]) -> f64[3] {
      return %a
    }
    func @e(%a: f64[3]) -> f32[3] {
      %0 = convert %a {dtype=f32} : f32[3]
      return %0
    }
  )
  return %0
}""", r"false branch's result types \(f32\[3\]\) must be \(f64\[3\]\)"),
    "pred-float": ("""
func @f(%p: f64[], %x: f64[3]) -> f64[3] {
  %0 = cond %p, %x : f64[3] (
    func @t(%a: f64[3]) -> f64[3] {
      return %a
    }
    func @e(%a: f64[3]) -> f64[3] {
      return %a
    }
  )
  return %0
}""", r"predicate \(operand 0\) must be a bool or integer scalar, got f64\[\]"),
    "pred-vector": ("""
func @f(%p: bool[3], %x: f64[3]) -> f64[3] {
  %0 = cond %p, %x : f64[3] (
    func @t(%a: f64[3]) -> f64[3] {
      return %a
    }
    func @e(%a: f64[3]) -> f64[3] {
      return %a
    }
  )
  return %0
}""", r"must be a bool or integer scalar, got bool\[3\]"),
    "while-cond-float": ("""
func @f(%x: f64[]) -> f64[] {
  %0 = while_loop %x {num_carry=1} : f64[] (
    func @c(%a: f64[]) -> f64[] {
      return %a
    }
    func @b(%a: f64[]) -> f64[] {
      return %a
    }
  )
  return %0
}""", r"cond region's result must be a bool or integer scalar, got f64\[\]"),
    "while-body-carry": ("""
func @f(%x: f64[], %k: f64[2]) -> f64[] {
  %0 = while_loop %x, %k {num_carry=1} : f64[] (
    func @c(%a: f64[], %b: f64[2]) -> bool[] {
      %0 = constant {dtype=bool, value=false} : bool[]
      return %0
    }
    func @b(%a: f64[], %b: f64[2]) -> f64[2] {
      return %b
    }
  )
  return %0
}""", r"body region's result types \(the next carry\) \(f64\[2\]\) must be \(f64\[\]\)"),
    "scan-length": ("""
func @f(%x: f64[], %xs: f64[4]) -> f64[] {
  %0 = scan %x, %xs {length=3, num_carry=1, num_xs=1, reverse=false} : f64[] (
    func @s(%a: f64[], %t: f64[]) -> f64[] {
      %0 = add %a, %t : f64[]
      return %0
    }
  )
  return %0
}""", r"scanned operand 0 \(f64\[4\]\) must have leading axis length 3"),
    "scan-params": ("""
func @f(%x: f64[], %xs: f64[4]) -> f64[] {
  %0 = scan %x, %xs {length=4, num_carry=1, num_xs=1, reverse=false} : f64[] (
    func @s(%a: f64[], %t: f64[4]) -> f64[] {
      return %a
    }
  )
  return %0
}""", r"body's parameter types \(f64\[\], f64\[4\]\) must be \(f64\[\], f64\[\]\)"),
    "while-grad-cts": ("""
func @f(%x: f64[], %g: f32[]) -> f64[] {
  %0 = while_grad %x, %g {num_carry=1} : f64[] (
    func @c(%a: f64[]) -> bool[] {
      %0 = constant {dtype=bool, value=false} : bool[]
      return %0
    }
    func @b(%a: f64[]) -> f64[] {
      return %a
    }
    func @j(%a: f64[], %g: f64[]) -> f64[] {
      return %g
    }
  )
  return %0
}""", r"cotangent operands' types \(f32\[\]\) must be \(f64\[\]\)"),
    "region-count": ("""
func @f(%x: f64[]) -> f64[] {
  %0 = checkpoint %x : f64[]
  return %0
}""", r"checkpoint: takes 1 regions \(body\), got 0"),
}


@pytest.mark.parametrize("name", BAD)
def test_verifier_rejects_malformed_region_ops(name):
    text, match = BAD[name]
    with pytest.raises(VerifyError, match=match):
        verify(parse_function(text.strip()))


def test_verifier_rejects_a_region_using_an_outer_value():
    t = TensorType((), np.float64)
    outer = Builder("f")
    x = outer.param(t, "x")
    inner = Builder("body")
    a = inner.param(t, "a")
    (s,) = inner.emit("add", (a, x), {}, (t,))  # x belongs to the enclosing function
    region = inner.build((s,))
    (y,) = outer.emit("checkpoint", (x,), {}, (t,), (region,))
    with pytest.raises(VerifyError, match="regions are closed"):
        verify(outer.build((y,)))


# --- simplify and fusion inside regions ----------------------------------------------------


def test_simplify_keeps_used_loops_drops_unused_and_cleans_regions():
    def f(x):
        unused = fg.fori_loop(0, 3, lambda i, c: c * 2.0, x)
        used = fg.scan(lambda c, t: (c * 1.0 + t, None), x, XS)[0]
        del unused
        return fnp.sum(used)

    fn = simplify(fg.make_ir(f)(X))
    verify(fn)
    loops = [op for op in fn.ops if op.regions]
    assert [op.name for op in loops] == ["scan"]
    assert "mul" not in {op.name for op in loops[0].regions[0].ops}  # c * 1.0 -> c
    assert_close(run(fn, X, XS)[0], fg.jit(f)(X), "exact64")


def test_cse_does_not_reach_into_regions():
    def f(x):
        s = fnp.sin(x)
        return fg.cond(x.sum() > 0, lambda a: fnp.sin(a), lambda a: a, x) + s

    fn = simplify(fg.make_ir(f)(X))
    verify(fn)  # the region's sin stays inside (the outer sin is not visible there)
    cond = next(op for op in fn.ops if op.name == "cond")
    assert [op.name for op in cond.regions[0].ops] == ["sin"]


def test_cond_on_a_constant_predicate_becomes_its_branch():
    def f(x):
        a = fg.cond(True, lambda v: fnp.sin(v), lambda v: -v, x)
        return a + fg.cond(np.int64(0), lambda v: v * 2.0, lambda v: fnp.exp(v), a)

    fn = fg.make_ir(f)(X)
    assert [op.name for op in fn.ops].count("cond") == 2
    simple = simplify(fn)
    verify(simple)
    assert [op.name for op in simple.ops] == ["sin", "exp", "add"]
    assert_close(run(simple, X)[0], np.sin(X) + np.exp(np.sin(X)), "exact64")


def test_fusion_fuses_region_bodies_on_their_own():
    fn = simplify(vjp_pass(fg.make_ir(scan_f)(X, XS), [0]))
    fused = fuse(fn)
    verify(fused)
    scans = [op for op in fused.ops if op.name == "scan"]
    assert scans and all(any(o.name == "fused" for o in s.regions[0].ops) for s in scans)
    for got, want in zip(run(fused, X, XS, np.array(1.0)), run(fn, X, XS, np.array(1.0))):
        assert_close(got, want, "exact64")
