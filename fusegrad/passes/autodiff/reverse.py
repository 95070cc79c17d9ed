"""Reverse mode as an IR -> IR pass.

``vjp(fn, wrt)`` returns a Function taking ``fn``'s parameters followed by one
cotangent per result, and returning ``fn``'s results followed by the cotangent
of each parameter in ``wrt``. It replays ``fn`` into a new trace, then walks
the ops backwards calling each op's VJP rule on tracers, so the adjoint is
plain IR: apply ``vjp`` to its output for higher derivatives.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import Function, bind
from ...ir.bind import aval
from ...ir.errors import FusegradError
from ...ir.location import at
from ...ir.stats import timed
from ...tracer import Trace
from ..simplify import dce
from .vjp_rules import NON_DIFFERENTIABLE, VJP_RULES, rule_of, unbroadcast, zeros


class NotDifferentiableError(FusegradError, TypeError):
    """An op without a VJP rule sits on the path from an input to the output."""


def _active_ops(fn: Function, wrt: Sequence[int]) -> tuple[set, set]:
    """Values that depend differentiably on ``wrt`` params, and the ops producing them."""
    active = {fn.params[i] for i in wrt}
    ops_active = set()
    for op in fn.ops:
        if op.name in NON_DIFFERENTIABLE:
            continue
        if any(v in active for v in op.operands):
            for r in op.results:
                if r.type.is_inexact:
                    active.add(r)
            ops_active.add(op)
    return active, ops_active


@timed("passes")
def vjp(
    fn: Function,
    wrt: Sequence[int] | None = None,
    seeds: Sequence[int] | None = None,
    name: str | None = None,
) -> Function:
    """The reverse-mode derivative of ``fn`` with respect to parameters ``wrt``.

    ``seeds`` lists the results that receive a cotangent parameter (default:
    all); the others are treated as having a zero cotangent.
    """
    wrt = tuple(range(len(fn.params))) if wrt is None else tuple(wrt)
    seeds = tuple(range(len(fn.results))) if seeds is None else tuple(seeds)
    if any(op.name == "slogdet" for op in fn.ops):  # (its module loads with a first slogdet)
        from .logdet_cholesky import logdet_via_cholesky

        fn = logdet_via_cholesky(fn, wrt)
    active, ops_active = _active_ops(fn, wrt)
    with Trace(name or f"{fn.name}_vjp") as t:
        env = {p: t.new_arg(p.type, p.hint) for p in fn.params}
        seed_args = {i: t.new_arg(fn.results[i].type, "ct") for i in seeds}
        for op in fn.ops:
            with at(op.loc):
                out = bind(op.name, *(env[v] for v in op.operands), regions=op.regions,
                           **op.attrs)
            env.update(zip(op.results, out if len(op.results) > 1 else (out,)))
        cts: dict = {}
        for i, s in seed_args.items():
            if fn.results[i] in active:
                _accumulate(cts, fn.results[i], s)
        for op in reversed(fn.ops):
            if op in ops_active and any(r in cts for r in op.results):
                with at(op.loc):  # adjoint ops point at the primal op's source line
                    _backprop(op, env, cts, active)
        results = [t.wrap(env[r]) for r in fn.results]
        for i in wrt:
            p = fn.params[i]
            results.append(t.wrap(cts[p] if p in cts else zeros(p.type.shape, p.type.dtype)))
        out_fn = t.builder.build([t.to_value(x) for x in results])
    if t.free:
        raise RuntimeError(
            f"internal error: a VJP rule used a concrete array while differentiating "
            f"@{fn.name}; rules must build arrays with ops (iota, broadcast_to)"
        )
    return dce(out_fn)


def _accumulate(cts: dict, v, ct) -> None:
    ct = unbroadcast(ct, v.type.shape)
    if aval(ct).dtype != v.type.dtype:
        ct = bind("convert", ct, dtype=v.type.dtype)
    cts[v] = cts[v] + ct if v in cts else ct


def _backprop(op, env, cts, active) -> None:
    rule = rule_of(VJP_RULES, op.name)
    if rule is None:
        where = f" (at {op.loc})" if op.loc else ""
        raise NotDifferentiableError(
            f"op {op.name!r}{where} has no gradient rule, but its result depends on an input "
            "being differentiated; wrap the input in fg.stop_gradient(...) if no gradient "
            "should flow through it"
        )
    outs = [env[r] for r in op.results]
    kwargs = dict(op.attrs, regions=op.regions) if op.regions else op.attrs
    if len(op.results) == 1:
        in_cts = rule(cts[op.results[0]], outs[0], *(env[v] for v in op.operands), **kwargs)
    else:  # multi-result rules get None for results without a cotangent
        gs = tuple(cts.get(r) for r in op.results)
        in_cts = rule(gs, tuple(outs), *(env[v] for v in op.operands), **kwargs)
    for v, ct in zip(op.operands, in_cts):
        if ct is not None and v in active:
            if isinstance(ct, BaseException):  # the rule has no derivative for this operand
                raise ct
            _accumulate(cts, v, ct)
