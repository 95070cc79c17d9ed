"""Forward mode as an IR -> IR pass.

``jvp(fn, wrt)`` returns a Function taking ``fn``'s parameters followed by one
tangent per parameter in ``wrt``, and returning ``fn``'s results followed by
one tangent per result. It replays ``fn`` into a new trace and, op by op,
calls each op's JVP rule on tracers, so the tangent computation is plain IR:
apply ``jvp`` (or ``vjp``) to its output for higher derivatives.

Only ``wrt`` parameters carry tangents. Everything else (the other
parameters, which include the values a nested transform closed over) is
constant here, which is what keeps nested derivatives of closures free of
perturbation confusion.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import Function, bind
from ...ir.bind import aval
from ...ir.location import at
from ...ir.stats import timed
from ...tracer import Trace
from ..simplify import dce
from .jvp_rules import JVP_RULES
from .reverse import NotDifferentiableError
from .vjp_rules import NON_DIFFERENTIABLE, rule_of, zeros


@timed("passes")
def jvp(fn: Function, wrt: Sequence[int] | None = None, name: str | None = None) -> Function:
    """The forward-mode derivative of ``fn`` along tangents of the parameters ``wrt``.

    Tangent parameters of non-float parameters are accepted and ignored (an
    integer input has no tangent). Results that do not depend differentiably
    on ``wrt`` get zero tangents, built with ops.
    """
    wrt = tuple(range(len(fn.params))) if wrt is None else tuple(wrt)
    with Trace(name or f"{fn.name}_jvp") as t:
        env = {p: t.new_arg(p.type, p.hint) for p in fn.params}
        tangents: dict = {}
        for i in wrt:
            p = fn.params[i]
            arg = t.new_arg(p.type, f"d{p.hint}" if p.hint else "tan")
            if p.type.is_inexact:
                tangents[p] = arg
        for op in fn.ops:
            with at(op.loc):  # tangent ops point at the primal op's source line
                out = bind(op.name, *(env[v] for v in op.operands), regions=op.regions,
                           **op.attrs)
                env.update(zip(op.results, out if len(op.results) > 1 else (out,)))
                if op.name not in NON_DIFFERENTIABLE and any(v in tangents for v in op.operands):
                    _push(op, env, tangents)
        results = [t.wrap(env[r]) for r in fn.results]
        for r in fn.results:
            tan = tangents.get(r)
            results.append(t.wrap(zeros(r.type.shape, r.type.dtype) if tan is None else tan))
        out_fn = t.builder.build([t.to_value(x) for x in results])
    if t.free:
        raise RuntimeError(
            f"internal error: a JVP rule used a concrete array while differentiating "
            f"@{fn.name}; rules must build arrays with ops (iota, broadcast_to)"
        )
    return dce(out_fn)


def _push(op, env, tangents) -> None:
    """Run ``op``'s JVP rule and record the tangents of its float results."""
    rule = rule_of(JVP_RULES, op.name)
    if rule is None:
        where = f" (at {op.loc})" if op.loc else ""
        raise NotDifferentiableError(
            f"op {op.name!r}{where} has no forward-mode (JVP) rule, but its result depends "
            "on an input being differentiated; wrap the input in fg.stop_gradient(...) if "
            "no derivative should flow through it"
        )
    ins = tuple(tangents.get(v) for v in op.operands)
    kwargs = dict(op.attrs, regions=op.regions) if op.regions else op.attrs
    outs = [env[r] for r in op.results]
    if len(op.results) == 1:
        out_tans = (rule(ins, outs[0], *(env[v] for v in op.operands), **kwargs),)
    else:  # multi-result rules get and return tuples (None: zero tangent)
        out_tans = rule(ins, tuple(outs), *(env[v] for v in op.operands), **kwargs)
    for r, tan in zip(op.results, out_tans):
        if tan is not None and r.type.is_inexact:
            tangents[r] = _fit(tan, r.type)


def _fit(tan, t):
    """A rule's tangent as the result's type: broadcast up to its shape, cast to its dtype.

    Rules return the natural shape of their formula (``tx + ty`` with ``ty`` absent
    has ``x``'s shape); the broadcast to the result happens here, in one place.
    """
    a = aval(tan)
    if a.shape != t.shape:
        tan = bind("broadcast_to", tan, shape=t.shape)
    if a.dtype != t.dtype:
        tan = bind("convert", tan, dtype=t.dtype)
    return tan
