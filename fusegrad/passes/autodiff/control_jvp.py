"""JVP rules of the region ops, keyed by op name: the control-flow ops
(``fusegrad.ir.control_ops``), ``custom_vjp_call`` (refused) and ``fused`` (its body's JVP).

Every rule is the same construction: the op again, over (primal, tangent) pairs,
with each region replaced by its JVP. The op's operands are split into groups
(for ``while_loop``: carry, consts); each group is followed by the tangents of
its floating-point members, and each region's parameter and result groups are
interleaved the same way (``_dual``). Running the op's algorithm on such dual
values is its forward-mode derivative, because every op is a composition of
region calls, sums and zero initial values, and its control (which branch, how
many iterations) depends only on non-differentiable predicates:

- ``cond``: a ``cond`` on the same predicate over the branches' JVPs.
- ``while_loop``: a ``while_loop`` whose carry is (carry, carry tangents) and
  whose body is the body's JVP; the trip count is the primal's.
- ``scan``: a ``scan`` over (carry, tangents), (xs, tangents) and (consts,
  tangents) with the body's JVP; the ys' tangents are stacked like the ys.
- ``checkpoint``: a ``checkpoint`` of the body's JVP (its VJP still recomputes).
- ``while_grad`` and ``while_grad_vjp`` (reverse mode through ``while_loop``):
  the same op with the carry, the consts and every cotangent operand paired with
  its tangent, the loop body replaced by its JVP and the adjoint regions by
  theirs. This is what makes forward over reverse (``fg.hvp``, ``fg.hessian``)
  work through ``while_loop`` and ``fori_loop`` with traced bounds; the result
  is again a ``while_grad``/``while_grad_vjp``, so ``vjp`` of it works as far as
  those ops are differentiable.

Carries that are floating point always get a tangent (zero where the operand had
none: the body may make it depend on one); consts, xs and ``cond`` operands get
one only where the operand has one. The primal op stays in the Function (the
pass binds it before calling the rule), so the loop's forward runs once for the
primal and once, paired with the tangents, in the rule's op.
"""

from __future__ import annotations

from ...ir import Function, evaluate, ops
from ..simplify import dce
from .jvp import jvp
from .jvp_rules import rule
from .reverse import NotDifferentiableError
from .vjp_rules import zeros_like


def _spans(sizes):
    lo = 0
    for n in sizes:
        yield lo, lo + n
        lo += n


def _dual(fn: Function, wrt, in_groups, out_groups) -> Function:
    """``jvp(fn, wrt)`` with parameters ``(g1, dg1, g2, dg2, ...)`` and results
    ``(r1, dr1, ...)``: each group followed by its tangents (the ``wrt`` parameters of
    an input group; the float results of an output group)."""
    j = jvp(fn, wrt, name=f"{fn.name}_jvp")
    n_in, n_out = len(fn.params), len(fn.results)
    tangent = dict(zip(wrt, j.params[n_in:]))
    params, results = [], []
    for lo, hi in _spans(in_groups):
        params += [*j.params[lo:hi], *(tangent[i] for i in range(lo, hi) if i in tangent)]
    for lo, hi in _spans(out_groups):
        results += [*j.results[lo:hi], *(j.results[n_out + i] for i in range(lo, hi)
                                         if fn.results[i].type.is_inexact)]
    return dce(j.replace(params=tuple(params), results=tuple(results)))


def _floats(types, lo: int = 0) -> list[int]:
    return [lo + i for i, t in enumerate(types) if t.is_inexact]


def _present(tangents, lo: int, hi: int) -> list[int]:
    return [i for i in range(lo, hi) if tangents[i] is not None]


def _filled(tangents, operands, idx) -> list:
    """The tangents of operands ``idx``, zeros where there is none."""
    return [zeros_like(operands[i]) if tangents[i] is None else tangents[i] for i in idx]


def _split(res, groups, types_of_groups) -> list:
    """The tangent results of a dual op, one per primal result (None: not float).

    ``res`` holds, per group, its ``n`` results then the tangents of its float ones."""
    res = res if isinstance(res, tuple) else (res,)
    out, k = [], 0
    for n, types in zip(groups, types_of_groups):
        floats = iter(res[k + n:k + n + sum(t.is_inexact for t in types)])
        out += [next(floats) if t.is_inexact else None for t in types]
        k += n + sum(t.is_inexact for t in types)
    return out


def _result(tans: list):
    return tans[0] if len(tans) == 1 else tuple(tans)


@rule("cond")
def cond_jvp(tangents, out, pred, *args, regions):
    """A ``cond`` on the same predicate over both branches' JVPs."""
    wrt = [i - 1 for i in _present(tangents, 1, len(tangents))]
    n_out = len(regions[0].results)
    branches = tuple(_dual(f, wrt, (len(args),), (n_out,)) for f in regions)
    res = ops.cond(pred, *args, *(tangents[1 + i] for i in wrt), regions=branches)
    return _result(_split(res, (n_out,), (regions[0].out_types,)))


def _loop_wrt(types, tangents, num_carry: int) -> tuple[list, list]:
    """Float carries (all get a tangent) and the consts that have one."""
    return _floats(types[:num_carry]), _present(tangents, num_carry, len(types))


@rule("while_loop")
def while_loop_jvp(tangents, out, *operands, num_carry, regions):
    """The loop over (carry, tangent) pairs with the body's JVP."""
    cf, bf = regions
    nc, types = num_carry, cf.in_types
    fc, fk = _loop_wrt(types, tangents, nc)
    groups = (nc, len(types) - nc)
    new = (_dual(cf, fc + fk, groups, (1,)), _dual(bf, fc + fk, groups, (nc,)))
    res = ops.while_loop(*operands[:nc], *_filled(tangents, operands, fc), *operands[nc:],
                         *(tangents[i] for i in fk), regions=new, num_carry=nc + len(fc))
    return _result(_split(res, (nc,), (types[:nc],)))


@rule("scan")
def scan_jvp(tangents, out, *operands, length, num_carry, num_xs, reverse, regions):
    """The scan over (carry, tangent), (xs, tangent) and (consts, tangent) with the body's
    JVP; the ys' tangents are stacked like the ys."""
    (body,) = regions
    nc, nx, in_t = num_carry, num_xs, body.in_types
    fc = _floats(in_t[:nc])
    fx = _present(tangents, nc, nc + nx)
    fk = _present(tangents, nc + nx, len(operands))
    ny = len(body.results) - nc
    step = _dual(body, fc + fx + fk, (nc, nx, len(operands) - nc - nx), (nc, ny))
    xs, consts = operands[nc:nc + nx], operands[nc + nx:]
    res = ops.scan(*operands[:nc], *_filled(tangents, operands, fc), *xs,
                   *(tangents[i] for i in fx), *consts, *(tangents[i] for i in fk),
                   regions=(step,), length=length, num_carry=nc + len(fc),
                   num_xs=nx + len(fx), reverse=reverse)
    out_t = body.out_types
    return _result(_split(res, (nc, ny), (out_t[:nc], out_t[nc:])))


@rule("checkpoint")
def checkpoint_jvp(tangents, out, *operands, regions):
    """A ``checkpoint`` of the body's JVP: reverse mode over it still recomputes."""
    (body,) = regions
    wrt = _present(tangents, 0, len(operands))
    n_out = len(body.results)
    dual = _dual(body, wrt, (len(operands),), (n_out,))
    res = ops.checkpoint(*operands, *(tangents[i] for i in wrt), regions=(dual,))
    return _result(_split(res, (n_out,), (body.out_types,)))


def _adjoint_regions(regions, num_carry: int) -> tuple[list, list, tuple]:
    """The float carries, the float consts, and the dual of the forward loop's
    ``(cond, body)`` (every float carry and const paired with a tangent)."""
    cf, bf = regions[:2]
    types = cf.in_types
    fc, fk = _floats(types[:num_carry]), _floats(types[num_carry:], num_carry)
    groups = (num_carry, len(types) - num_carry)
    return fc, fk, (_dual(cf, fc + fk, groups, (1,)), _dual(bf, fc + fk, groups, (num_carry,)))


def _all_floats(fn: Function) -> list[int]:
    return _floats(fn.in_types)


def _paired(tangents, operands, sizes, fc, fk) -> list:
    """The operand groups of ``sizes`` (carry, consts, then cotangent groups), each
    followed by the tangents (zeros where none) of its floats: ``fc``/``fk`` for the
    carry and the consts, every member of a cotangent group."""
    out = []
    for g, (lo, hi) in enumerate(_spans(sizes)):
        idx = (fc, fk)[g] if g < 2 else range(lo, hi)
        out += [*operands[lo:hi], *_filled(tangents, operands, idx)]
    return out


@rule("while_grad")
def while_grad_jvp(tangents, out, *operands, num_carry, regions):
    """``while_grad`` over (carry, consts, cotangents) paired with their tangents: the
    forward loop runs the body's JVP, the backward loop the adjoint's JVP."""
    af = regions[2]
    nc, n = num_carry, len(regions[0].params)
    fc, fk, (cond, body) = _adjoint_regions(regions, nc)
    nfc, nfk = len(fc), len(fk)
    adjoint = _dual(af, _all_floats(af), (nc, n - nc, nfc), (nfc, nfk))
    res = ops.while_grad(*_paired(tangents, operands, (nc, n - nc, nfc), fc, fk),
                         regions=(cond, body, adjoint),
                         num_carry=nc + nfc)
    return _result(_split(res, (nfc, nfk), (af.out_types[:nfc], af.out_types[nfc:])))


@rule("while_grad_vjp")
def while_grad_vjp_jvp(tangents, out, *operands, num_carry, regions):
    """``while_grad_vjp`` over every operand group paired with its tangents, each of its
    five regions replaced by its JVP."""
    af, avf, bvf = regions[2:]
    nc, n = num_carry, len(regions[0].params)
    fc, fk, (cond, body) = _adjoint_regions(regions, nc)
    nfc, nfk = len(fc), len(fk)
    nk = n - nc
    adjoint = _dual(af, _all_floats(af), (nc, nk, nfc), (nfc, nfk))
    adjoint_vjp = _dual(avf, _all_floats(avf), (nc, nk, nfc, nfc, nfk), (nfc, nfk, nfc))
    body_vjp = _dual(bvf, _all_floats(bvf), (nc, nk, nfc), (nfc, nfk))
    res = ops.while_grad_vjp(*_paired(tangents, operands, (nc, nk, nfc, nfc, nfk), fc, fk),
                             regions=(cond, body, adjoint, adjoint_vjp, body_vjp),
                             num_carry=nc + nfc)
    ot = avf.out_types
    return _result(_split(res, (nfc, nfk, nfc), (ot[:nfc], ot[nfc:nfc + nfk], ot[nfc + nfk:])))


# --- region ops ------------------------------------------------------------------


@rule("custom_vjp_call")
def custom_vjp_call_jvp(tangents, out, *operands, num_out, regions):
    """A custom_vjp function defines only its reverse-mode rule; like JAX, no JVP."""
    fwd = regions[0]
    raise NotDifferentiableError(
        f"cannot apply forward-mode differentiation (jvp, jacfwd, hvp, hessian) to the "
        f"custom_vjp function @{fwd.name.removesuffix('_fwd')}: a custom_vjp defines only a "
        "reverse-mode rule (JAX refuses this too). Use reverse mode instead (fg.grad, "
        "fg.vjp, fg.jacobian; fg.jacobian(fg.grad(f)) for its Hessian)"
    )


@rule("fused")
def fused_jvp(tangents, out, *operands, regions):
    """A kernel's JVP is its body's (fusion runs after differentiation, but stays exact)."""
    (body,) = regions
    wrt = tuple(i for i, t in enumerate(tangents) if t is not None)
    res = evaluate(jvp(body, wrt), *operands, *(tangents[i] for i in wrt))
    return tuple(res[len(body.results):])
