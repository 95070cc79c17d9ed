"""VJP rules of the region ops, keyed by op name: the control-flow ops
(``fusegrad.ir.control_ops``), ``custom_vjp_call`` and ``fused``.

Each rule builds the adjoint out of control-flow ops again, with regions made by
differentiating the op's regions (``vjp`` of a closed Function), so the result
is plain IR that can be differentiated once more:

- ``cond``: a ``cond`` on the same predicate whose branches are the VJPs of the
  two branches.
- ``scan``: a forward ``scan`` that stacks the carry entering every step (the
  residuals: carries x length; ``simplify`` merges it with the primal scan, whose
  results are its first ones), then a ``scan`` in the opposite direction whose
  step is the VJP of the body, carrying the carry's cotangent and the sum of the
  consts' cotangents. Both are scans, so second derivatives follow.
- ``while_loop``: one ``while_grad`` op, which runs the loop again pushing each
  carry on a stack (the trip count is the stack's height), then runs the body's
  VJP once per stored carry, backwards. Its own VJP is one ``while_grad_vjp`` op
  (second derivatives); a third reverse-mode derivative through a loop with a
  traced trip count raises ``NotDifferentiableError`` (use ``fori_loop`` with
  Python int bounds or ``scan``, differentiable to any order).
- ``checkpoint``: the VJP of the body, recomputing the body's forward values in the
  backward pass.
- ``custom_vjp_call``: the user's ``bwd`` (and ``fwd``'s own VJP for cotangents of its
  residuals); ``fused``: the VJP of the kernel's body.

Only floating-point operands and results take part; integer carries (loop
counters) are stored and replayed but get no cotangent.
"""

from __future__ import annotations

from ...ir import evaluate, ops
from ...tracer import trace_pytree
from ..simplify import dce
from .reverse import NotDifferentiableError, vjp
from .vjp_rules import rule, zeros, zeros_like


def _gs(g, n: int) -> tuple:
    return g if isinstance(g, tuple) else (g,) * (n == 1)


def _tuple(out, n: int) -> tuple:
    return out if n != 1 else (out,)


def _float_idx(types, offset: int = 0) -> list[int]:
    return [offset + i for i, t in enumerate(types) if t.is_inexact]


def _ct(g, t):
    return zeros(t.shape, t.dtype) if g is None else g


def _adjoint(fn, wrt, seeds, name: str):
    """``(params..., cts of results[seeds]...) -> cts of params[wrt]`` as a closed Function."""
    g = vjp(fn, wrt=wrt, seeds=seeds, name=name)
    return dce(g.replace(results=g.results[len(fn.results):]))


def _closed(f, types, name: str):
    """``f`` traced on ``types`` into a Function that closes over nothing."""
    t = trace_pytree(f, tuple(types), name=name)
    if t.free:  # pragma: no cover - the rules only evaluate closed Functions
        raise RuntimeError(f"internal error: region @{name} closes over {len(t.free)} values")
    return t.function


def _scatter(n: int, idx, values) -> list:
    out = [None] * n
    for i, v in zip(idx, values):
        out[i] = v
    return out


@rule("cond")
def cond_vjp(g, out, pred, *args, regions):
    """The branch taken is differentiated: a cond of the two branches' VJPs."""
    tf, ff = regions
    gs = _gs(g, len(tf.results))
    wrt = _float_idx(tf.in_types)
    seeds = [i for i in _float_idx(tf.out_types) if gs[i] is not None]
    if not wrt or not seeds:
        return (None,) * (1 + len(args))
    adj = (_adjoint(tf, wrt, seeds, "true_branch_vjp"), _adjoint(ff, wrt, seeds,
                                                                 "false_branch_vjp"))
    res = _tuple(ops.cond(pred, *args, *(gs[i] for i in seeds), regions=adj), len(wrt))
    return (None, *_scatter(len(args), wrt, res))


@rule("scan")
def scan_vjp(g, out, *operands, length, num_carry, num_xs, reverse, regions):
    """Stack the carries forward, then scan the body's VJP backwards over them."""
    (body,) = regions
    nc, nx = num_carry, num_xs
    in_t, out_t = body.in_types, body.out_types
    gs = _gs(g, len(out_t))
    fc = _float_idx(in_t[:nc])
    fx = _float_idx(in_t[nc:nc + nx], nc)
    fk = _float_idx(in_t[nc + nx:], nc + nx)
    fy = [i for i in _float_idx(out_t[nc:], nc) if gs[i] is not None]
    if not (fc or fx or fk) or not (fc or fy):
        return (None,) * len(operands)
    xs, consts = operands[nc:nc + nx], operands[nc + nx:]

    def store(*a):  # the body, also returning its carry: simplify merges it with the primal
        return (*evaluate(body, *a), *a[:nc])

    fwd = _tuple(ops.scan(*operands, regions=(_closed(store, in_t, "step_store"),),
                          length=length, num_carry=nc, num_xs=nx, reverse=reverse),
                 len(out_t) + nc)
    adj = _adjoint(body, fc + fx + fk, fc + fy, "step_vjp")
    nfc, nfx, nfk, nfy = len(fc), len(fx), len(fk), len(fy)

    def back(*a):
        ct_c, acc = a[:nfc], a[nfc:nfc + nfk]
        p = nfc + nfk
        c, x, ct_y, k = a[p:p + nc], a[p + nc:p + nc + nx], a[p + nc + nx:p + nc + nx + nfy], \
            a[p + nc + nx + nfy:]
        r = evaluate(adj, *c, *x, *k, *ct_c, *ct_y)
        return (*r[:nfc], *(s + t for s, t in zip(acc, r[nfc + nfx:])), *r[nfc:nfc + nfx])

    back_t = [*(in_t[i] for i in fc), *(in_t[i] for i in fk), *in_t[:nc + nx],
              *(out_t[i] for i in fy), *in_t[nc + nx:]]
    res = _tuple(ops.scan(
        *(_ct(gs[i], in_t[i]) for i in fc), *(zeros(in_t[i].shape, in_t[i].dtype) for i in fk),
        *fwd[len(out_t):], *xs, *(gs[i] for i in fy), *consts,
        regions=(_closed(back, back_t, "step_vjp"),), length=length, num_carry=nfc + nfk,
        num_xs=nc + nx + nfy, reverse=not reverse), nfc + nfk + nfx)
    return tuple(_scatter(len(operands), fc + fk + fx, res))


@rule("while_loop")
def while_loop_vjp(g, out, *operands, num_carry, regions):
    """One ``while_grad``: the loop again, storing carries, then the body's VJP backwards."""
    cf, bf = regions
    types = cf.in_types
    gs = _gs(g, num_carry)
    fc = _float_idx(types[:num_carry])
    fk = _float_idx(types[num_carry:], num_carry)
    if not fc or all(gs[i] is None for i in fc):
        return (None,) * len(operands)
    adj = _adjoint(bf, fc + fk, fc, "body_vjp")
    res = _tuple(ops.while_grad(*operands, *(_ct(gs[i], types[i]) for i in fc),
                                regions=(cf, bf, adj), num_carry=num_carry), len(fc) + len(fk))
    return tuple(_scatter(len(operands), fc + fk, res))


@rule("while_grad")
def while_grad_vjp(g, out, *operands, num_carry, regions):
    """Reverse over reverse: one ``while_grad_vjp`` op (the adjoint loop run in forward
    order through its own VJP, then the forward loop backwards through the body's)."""
    cf, bf, af = regions
    types = cf.in_types
    fc = _float_idx(types[:num_carry])
    fk = _float_idx(types[num_carry:], num_carry)
    nfc, nfk, n = len(fc), len(fk), len(types)
    gs = _gs(g, nfc + nfk)
    if all(x is None for x in gs):
        return (None,) * len(operands)
    # adjoint(c, k, g) -> (g_in, b): its VJP w.r.t. float c, float k and g, seeded by both
    adj_vjp = _adjoint(af, fc + fk + list(range(n, n + nfc)), list(range(nfc + nfk)),
                       "adjoint_vjp")
    body_vjp = _adjoint(bf, fc + fk, fc, "body_vjp")
    res_t = af.out_types
    res = _tuple(ops.while_grad_vjp(
        *operands, *(_ct(x, t) for x, t in zip(gs, res_t)),
        regions=(cf, bf, af, adj_vjp, body_vjp), num_carry=num_carry), 2 * nfc + nfk)
    return tuple(_scatter(len(operands), fc + fk + list(range(n, n + nfc)), res))


@rule("while_grad_vjp")
def while_grad_vjp_vjp(g, out, *operands, num_carry, regions):
    raise NotDifferentiableError(
        "a third reverse-mode derivative through fg.while_loop (or fg.fori_loop with traced "
        "bounds) is not supported. Use fg.fori_loop with Python int bounds or fg.scan, which "
        "are differentiable to any order"
    )


@rule("checkpoint")
def checkpoint_vjp(g, out, *operands, regions):
    """The body's VJP, evaluated in the backward pass: its forward values are recomputed."""
    (body,) = regions
    gs = _gs(g, len(body.results))
    wrt = _float_idx(body.in_types)
    seeds = [i for i in _float_idx(body.out_types) if gs[i] is not None]
    if not wrt or not seeds:
        return (None,) * len(operands)
    back = evaluate(_adjoint(body, wrt, seeds, f"{body.name}_vjp"), *operands,
                    *(gs[i] for i in seeds))
    return tuple(_scatter(len(operands), wrt, back))


# --- region ops ------------------------------------------------------------------


@rule("custom_vjp_call")
def custom_vjp_call_vjp(g, out, *operands, num_out, regions):
    """Cotangents of the outputs go through the user's ``bwd``; cotangents of the
    residuals (present when differentiating a second time) through ``fwd``'s own VJP."""
    fwd, bwd = regions
    gs = g if isinstance(g, tuple) else (g,)
    outs = out if isinstance(out, tuple) else (out,)
    nf = len(fwd.params)
    cts: list = [None] * len(operands)
    if any(x is not None for x in gs[:num_out]):
        g_out = [zeros_like(o) if x is None else x for x, o in zip(gs[:num_out], outs)]
        cts[: len(bwd.results)] = evaluate(bwd, *outs[num_out:], *g_out, *operands[nf:])
    if any(x is not None for x in gs[num_out:]):
        seeds = tuple(i for i, x in enumerate(gs) if i >= num_out and x is not None)
        back = evaluate(vjp(fwd, seeds=seeds), *operands[:nf],
                        *(gs[i] for i in seeds))[len(fwd.results):]
        cts[:nf] = [b if c is None else c + b for c, b in zip(cts[:nf], back)]
    return tuple(cts)


@rule("fused")
def fused_vjp(g, out, *operands, regions):
    """A kernel's VJP is its body's (fusion runs after differentiation, but stays exact)."""
    (body,) = regions
    gs = g if isinstance(g, tuple) else (g,)
    seeds = tuple(i for i, x in enumerate(gs) if x is not None)
    back = evaluate(vjp(body, seeds=seeds), *operands, *(gs[i] for i in seeds))
    return tuple(back[len(body.results):])
