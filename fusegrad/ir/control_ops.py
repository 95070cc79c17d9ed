"""Control-flow ops: branches and loops whose bodies are regions (closed sub-Functions).

Registered into ``opdef.OPS`` (kind ``"region"``) when ``optable`` imports this
module. Every region is closed: a value the body closes over is an explicit operand
of the op and a parameter of the region. The rules check that region signatures
match the operands; ``run_region`` runs a region with the NumPy reference
implementations.

Operand and region layouts (the attrs say how the operand list splits):

- ``cond(pred, *args)``, regions ``(true_branch, false_branch)``: both take
  ``args`` and return the same types; ``pred`` is a bool or integer scalar
  (nonzero selects ``true_branch``). Results: the chosen branch's.
- ``while_loop(*carry, *consts) {num_carry}``, regions ``(cond, body)``: both
  take ``(carry, consts)``; ``cond`` returns ``bool[]``, ``body`` the next
  carry. Results: the carry when ``cond`` first returns false.
- ``scan(*carry, *xs, *consts) {length, num_carry, num_xs, reverse}``, region
  ``(body,)``: ``body(carry, x, consts) -> (carry, y)`` where each ``x`` is
  one slice ``xs[t]`` of an operand with leading axis ``length``, for
  ``t = 0 .. length-1`` (backwards if ``reverse``). Results: the final carry,
  then each ``y`` stacked along a new leading axis of size ``length``.
- ``while_grad(*carry, *consts, *cts) {num_carry}``, regions
  ``(cond, body, adjoint)``: the reverse-mode derivative of ``while_loop``.
  It runs the loop forward pushing every carry on a stack, then pops them
  running ``adjoint(carry, consts, ct_next) -> (ct_carry, ct_consts)`` once
  per iteration, backwards. ``cts`` / ``ct_next`` / ``ct_carry`` cover the
  floating-point carries, ``ct_consts`` the floating-point consts (in
  order); its results are ``(ct_carry, ct_consts)`` summed over iterations.
- ``while_grad_vjp`` (the VJP of ``while_grad``, so second derivatives through
  ``while_loop``): see its ``doc``.
- ``checkpoint(*args)``, region ``(body,)``: ``body(*args)``; its VJP
  recomputes ``body`` in the backward pass instead of keeping its values.
"""

from __future__ import annotations

import threading

import numpy as np

from .bind import eval_numpy
from .errors import ShapeError
from .opdef import OPS, _def
from .shapes import fmt
from .types import TensorType, is_inexact

CONTROL_OPS = ("cond", "while_loop", "scan", "while_grad", "while_grad_vjp", "checkpoint")


class _Watch(threading.local):
    """``fn(region, op, results)`` called after each op a region runs (NaN debugging)."""

    fn = None


WATCH = _Watch()


class _Runner(threading.local):
    """``fn(region, args) -> results`` that runs regions instead of the NumPy reference
    (compiled code sets it while it runs a control-flow op between its segments)."""

    fn = None


RUNNER = _Runner()


def run_region(fn, *args) -> tuple:
    """``fn(*args)`` on arrays with the op table's NumPy implementations (or with
    ``RUNNER.fn`` when set, unless NaN debugging watches each op)."""
    if RUNNER.fn is not None and WATCH.fn is None:
        return tuple(RUNNER.fn(fn, args))
    env = dict(zip(fn.params, args))
    for op in fn.ops:
        out = eval_numpy(OPS[op.name], [env[v] for v in op.operands], op.attrs, op.regions)
        out = out if len(op.results) > 1 else (out,)
        env.update(zip(op.results, out))
        if WATCH.fn is not None:
            WATCH.fn(fn, op, out)
    return tuple(env[r] for r in fn.results)


def _one(out: tuple):
    return out[0] if len(out) == 1 else out


def _expect(op: str, what: str, got, want) -> None:
    if tuple(got) != tuple(want):
        raise ShapeError(f"{op}: {what} ({fmt(got)}) must be ({fmt(want)})")


def _regions(op: str, regions, n: int, names: str):
    if len(regions) != n:
        raise ShapeError(f"{op}: takes {n} regions ({names}), got {len(regions)}")
    return regions


def _check_pred(op: str, t: TensorType, what: str) -> None:
    if t.shape != () or not (t.dtype == np.bool_ or np.issubdtype(t.dtype, np.integer)):
        raise ShapeError(f"{op}: {what} must be a bool or integer scalar, got {t}")


def floats(types) -> tuple:
    """The floating-point and complex types among ``types`` (those that get cotangents)."""
    return tuple(t for t in types if is_inexact(t.dtype))


# --- cond -------------------------------------------------------------------------


def cond_rule(types, *, regions):
    true_fn, false_fn = _regions("cond", regions, 2, "true branch, false branch")
    if not types:
        raise ShapeError("cond: needs a predicate operand")
    _check_pred("cond", types[0], "the predicate (operand 0)")
    args = tuple(types[1:])
    _expect("cond", "the true branch's parameter types", true_fn.in_types, args)
    _expect("cond", "the false branch's parameter types", false_fn.in_types, args)
    _expect("cond", "the false branch's result types", false_fn.out_types, true_fn.out_types)
    return true_fn.out_types


def cond_impl(pred, *args, regions):
    return _one(run_region(regions[0] if pred else regions[1], *args))


_def("cond", None, cond_rule, cond_impl, "region",
     doc="cond(pred, *args): regions (true_branch, false_branch), each args -> results; "
         "pred is a bool or integer scalar, nonzero runs true_branch")


# --- while_loop -------------------------------------------------------------------


def _loop_regions(op, types, num_carry, cond, body):
    types = tuple(types)
    if not 0 <= num_carry <= len(types):
        raise ShapeError(f"{op}: num_carry={num_carry} but there are {len(types)} operands")
    _expect(op, "the cond region's parameter types", cond.in_types, types)
    if len(cond.out_types) != 1:
        raise ShapeError(f"{op}: the cond region must return one scalar, returns "
                         f"({fmt(cond.out_types)})")
    _check_pred(op, cond.out_types[0], "the cond region's result")
    _expect(op, "the body region's parameter types", body.in_types, types)
    _expect(op, "the body region's result types (the next carry)", body.out_types,
            types[:num_carry])


def while_loop_rule(types, *, num_carry, regions):
    cond, body = _regions("while_loop", regions, 2, "cond, body")
    _loop_regions("while_loop", types, num_carry, cond, body)
    return tuple(types[:num_carry])


def while_loop_impl(*args, num_carry, regions):
    cond, body = regions
    carry, consts = args[:num_carry], args[num_carry:]
    while run_region(cond, *carry, *consts)[0]:
        carry = run_region(body, *carry, *consts)
    return _one(carry)


_def("while_loop", None, while_loop_rule, while_loop_impl, "region", attrs=("num_carry",),
     doc="while_loop(*carry, *consts): regions (cond, body), both (carry, consts) -> ...; "
         "cond returns bool[], body the next carry; results: the final carry")


# --- scan -------------------------------------------------------------------------


def scan_rule(types, *, length, num_carry, num_xs, reverse, regions):
    (body,) = _regions("scan", regions, 1, "body")
    types = tuple(types)
    if length < 0 or num_carry < 0 or num_xs < 0 or num_carry + num_xs > len(types):
        raise ShapeError(f"scan: length={length}, num_carry={num_carry}, num_xs={num_xs} do "
                         f"not fit {len(types)} operands")
    carry = types[:num_carry]
    xs = types[num_carry:num_carry + num_xs]
    consts = types[num_carry + num_xs:]
    for k, t in enumerate(xs):
        if t.ndim == 0 or t.shape[0] != length:
            raise ShapeError(f"scan: scanned operand {k} ({t}) must have leading axis "
                             f"length {length}")
    slices = tuple(TensorType(t.shape[1:], t.dtype) for t in xs)
    _expect("scan", "the body's parameter types", body.in_types, carry + slices + consts)
    outs = body.out_types
    _expect("scan", "the body's carry result types", outs[:num_carry], carry)
    return carry + tuple(TensorType((length, *t.shape), t.dtype) for t in outs[num_carry:])


def scan_impl(*args, length, num_carry, num_xs, reverse, regions):
    (body,) = regions
    carry = args[:num_carry]
    xs = args[num_carry:num_carry + num_xs]
    consts = args[num_carry + num_xs:]
    ys = [np.empty((length, *t.shape), t.dtype) for t in body.out_types[num_carry:]]
    for it in range(length):
        t = length - 1 - it if reverse else it
        out = run_region(body, *carry, *(x[t] for x in xs), *consts)
        carry = out[:num_carry]
        for buf, y in zip(ys, out[num_carry:]):
            buf[t] = y
    return _one((*carry, *ys))


_def("scan", None, scan_rule, scan_impl, "region",
     attrs=("length", "num_carry", "num_xs", "reverse"),
     doc="scan(*carry, *xs, *consts): region body(carry, x, consts) -> (carry, y) run for "
         "t = 0..length-1 (reversed if reverse) on x = xs[t]; results: the final carry, "
         "then the ys stacked on a new leading axis")


# --- while_grad: the adjoint of while_loop ------------------------------------------


def while_grad_rule(types, *, num_carry, regions):
    cond, body, adjoint = _regions("while_grad", regions, 3, "cond, body, adjoint")
    n = len(cond.params)
    primal = tuple(types[:n])
    _loop_regions("while_grad", primal, num_carry, cond, body)
    fc, fk = floats(primal[:num_carry]), floats(primal[num_carry:])
    _expect("while_grad", "the cotangent operands' types", types[n:], fc)
    _expect("while_grad", "the adjoint region's parameter types", adjoint.in_types,
            primal + fc)
    _expect("while_grad", "the adjoint region's result types", adjoint.out_types, fc + fk)
    return fc + fk


def while_grad_impl(*args, num_carry, regions):
    cond, body, adjoint = regions
    n = len(cond.params)
    carry, consts, ct = args[:num_carry], args[num_carry:n], args[n:]
    stack = []  # the carry at the start of every iteration: the adjoint pops them
    while run_region(cond, *carry, *consts)[0]:
        stack.append(carry)
        carry = run_region(body, *carry, *consts)
    fk = floats(t for t in cond.in_types[num_carry:])
    acc = [np.zeros(t.shape, t.dtype) for t in fk]
    for saved in reversed(stack):
        out = run_region(adjoint, *saved, *consts, *ct)
        ct = out[:len(ct)]
        acc = [a + b for a, b in zip(acc, out[len(ct):])]
    return _one((*ct, *acc))


_def("while_grad", None, while_grad_rule, while_grad_impl, "region", attrs=("num_carry",),
     doc="the VJP of while_loop: operands (carry, consts, cotangents of the final float "
         "carries), regions (cond, body, adjoint); runs the loop storing each carry, then "
         "adjoint(carry, consts, ct) -> (ct_carry, ct_consts) backwards over them; results: "
         "cotangents of the initial float carries, then of the float consts")


# --- checkpoint -------------------------------------------------------------------


def checkpoint_rule(types, *, regions):
    (body,) = _regions("checkpoint", regions, 1, "body")
    _expect("checkpoint", "the body's parameter types", body.in_types, types)
    return body.out_types


def checkpoint_impl(*args, regions):
    return _one(run_region(regions[0], *args))


_def("checkpoint", None, checkpoint_rule, checkpoint_impl, "region",
     doc="checkpoint(*args): region body(*args); the same values, but its VJP recomputes "
         "body in the backward pass instead of keeping body's intermediate values")


# --- while_grad_vjp: the adjoint of while_grad (second derivatives of while_loop) ---------


def while_grad_vjp_rule(types, *, num_carry, regions):
    cond, body, adjoint, adjoint_vjp, body_vjp = _regions(
        "while_grad_vjp", regions, 5, "cond, body, adjoint, adjoint_vjp, body_vjp")
    n = len(cond.params)
    primal = tuple(types[:n])
    fc, fk = floats(primal[:num_carry]), floats(primal[num_carry:])
    while_grad_rule(types[:n + len(fc)], num_carry=num_carry, regions=(cond, body, adjoint))
    _expect("while_grad_vjp", "the cotangent operands' types", types[n + len(fc):], fc + fk)
    _expect("while_grad_vjp", "the adjoint_vjp region's parameter types",
            adjoint_vjp.in_types, primal + fc + fc + fk)
    _expect("while_grad_vjp", "the adjoint_vjp region's result types",
            adjoint_vjp.out_types, fc + fk + fc)
    _expect("while_grad_vjp", "the body_vjp region's parameter types", body_vjp.in_types,
            primal + fc)
    _expect("while_grad_vjp", "the body_vjp region's result types", body_vjp.out_types,
            fc + fk)
    return fc + fk + fc


def while_grad_vjp_impl(*args, num_carry, regions):
    cond, body, adjoint, adjoint_vjp, body_vjp = regions
    n = len(cond.params)
    nfc = len(floats(cond.in_types[:num_carry]))
    carry, consts = args[:num_carry], args[num_carry:n]
    g, u_g, u_acc = args[n:n + nfc], args[n + nfc:n + 2 * nfc], args[n + 2 * nfc:]
    carries = []  # c_i: the carry entering iteration i
    while run_region(cond, *carry, *consts)[0]:
        carries.append(carry)
        carry = run_region(body, *carry, *consts)
    gs = [None] * len(carries)  # gs[i]: the cotangent g_{i+1} the adjoint received at step i
    for i in reversed(range(len(carries))):
        gs[i] = g
        g = run_region(adjoint, *carries[i], *consts, *g)[:nfc]
    acc_k = [np.zeros(t.shape, t.dtype) for t in u_acc]
    ucs = []
    for i in range(len(carries)):  # the backward loop reversed: forward order
        out = run_region(adjoint_vjp, *carries[i], *consts, *gs[i], *u_g, *u_acc)
        ucs.append(out[:nfc])
        acc_k = [a + b for a, b in zip(acc_k, out[nfc:len(out) - nfc])]
        u_g = out[len(out) - nfc:]
    vc = [np.zeros(np.shape(x), np.asarray(x).dtype) for x in u_g]
    for i in reversed(range(len(carries))):  # the forward loop reversed
        out = run_region(body_vjp, *carries[i], *consts, *vc)
        vc = [a + b for a, b in zip(ucs[i], out[:nfc])]
        acc_k = [a + b for a, b in zip(acc_k, out[nfc:])]
    return _one((*vc, *acc_k, *u_g))


_def("while_grad_vjp", None, while_grad_vjp_rule, while_grad_vjp_impl, "region",
     attrs=("num_carry",),
     doc="the VJP of while_grad: operands (carry, consts, cts as while_grad's, then the "
         "cotangents u_g, u_acc of while_grad's results); regions (cond, body, adjoint, "
         "adjoint_vjp, body_vjp) with adjoint_vjp(carry, consts, g, u_g, u_acc) -> (u_carry, "
         "u_consts, u_g_next) and body_vjp(carry, consts, v) -> (v_carry, v_consts); runs the "
         "loop storing carries, the adjoint loop storing its cotangents, then adjoint_vjp in "
         "forward order and body_vjp backwards; results: cotangents of the float carries, "
         "float consts and cts")
