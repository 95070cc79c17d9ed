"""Batching rules of the region ops, keyed by op name: the control-flow ops
(``fusegrad.ir.control_ops``), ``custom_vjp_call`` and ``fused``.

Regions are batched with ``batching.batch`` (each parameter batched at axis 0 or
shared, as its operand), so a batched op is the same op over batched regions
where the control is the same for the whole batch:

- ``cond`` with a shared predicate: a ``cond`` over the batched branches. With a
  batched predicate the examples may take different branches: **both branches
  run** on the whole batch and each result is ``select``-ed per example (as in
  JAX), so both must be safe to evaluate on every example.
- ``while_loop``: a carry is batched if its initial value is or the body makes it
  so (a fixed point over the body). If the predicate stays shared (a counter
  against a shared bound), the loop is the same loop over batched carries. If it
  is batched (per-example trip counts), the loop runs while **any** example's
  predicate holds, and each step ``select``s, per example, the body's result
  where its predicate holds and the unchanged carry where it does not: finished
  examples keep their final carry while the others go on.
- ``scan``: the same scan over batched carries (the same fixed point), xs and
  consts. Batched xs have the batch at axis 0 and the scanned axis at 1; they are
  transposed so that the scanned axis leads, and batched ys come back transposed.
- ``checkpoint``: a ``checkpoint`` of the batched body.
- ``custom_vjp_call``: both regions batched with every operand batched; ``fused``: the
  kernel's body inlined, batched.
- ``while_grad`` / ``while_grad_vjp`` (reverse mode through ``while_loop``, e.g.
  ``vmap(grad(f))``): their float operands are all batched (each example has its
  own cotangents). With a shared predicate the regions are batched as they are;
  with a batched one the loop runs while any example goes on, as for
  ``while_loop``, and every region is gated by the example's predicate on the
  stored carry: a finished example's steps are the identity on its cotangents
  and add nothing to the consts' cotangents, so each example gets exactly the
  derivative of its own trip count.

With a batched predicate the body runs on finished examples too (its results are
discarded by ``select``): a body that divides by zero or indexes out of range
once an example has finished still does so. Under reverse mode ``select`` gives
the discarded values a zero cotangent, but a NaN or infinite derivative in them
still turns into NaN (0 * inf), as in JAX.
"""

from __future__ import annotations

from ..ir import evaluate, ops
from ..ir.bind import aval
from ..tracer import trace_pytree
from .autodiff.vjp_rules import zeros_like
from .batching import batch, replay
from .batching_rules import lift, moveaxis, rule, with_batch


def _one(out: tuple):
    return out[0] if len(out) == 1 else tuple(out)


def _tuple(out, n: int) -> tuple:
    return out if n != 1 else (out,)


def _axes(flags) -> tuple:
    return tuple(0 if f else None for f in flags)


def _batched_results(fn, flags) -> list[bool]:
    """Which results of ``fn`` depend on a batched parameter (``batching.replay``'s rule:
    an op with a batched operand has batched results)."""
    batched = {p for p, f in zip(fn.params, flags) if f}
    for op in fn.ops:
        if any(v in batched for v in op.operands):
            batched.update(op.results)
    return [r in batched for r in fn.results]


def _carry_flags(body, num_carry: int, flags) -> list[bool]:
    """The carries that are batched: initially, or made so by the body (a fixed point)."""
    carry, rest = list(flags[:num_carry]), list(flags[num_carry:])
    while True:
        out = _batched_results(body, carry + rest)[:num_carry]
        new = [a or b for a, b in zip(carry, out)]
        if new == carry:
            return carry
        carry = new


def _broadcast(xs, flags, want, size) -> list:
    """``xs`` (batched where ``flags``) batched where ``want`` too."""
    return [with_batch(x, f, size) if w else x for x, f, w in zip(xs, flags, want)]


def _closed(f, types, name: str):
    t = trace_pytree(f, tuple(types), name=name)
    if t.free:  # pragma: no cover - the rules build regions from closed Functions only
        raise RuntimeError(f"internal error: region @{name} closes over {len(t.free)} values")
    return t.function


def _live(pred):
    """A batched predicate (bool or integer) as a bool per example."""
    return pred if aval(pred).dtype == bool else ops.ne(pred, 0)


def _where(live, x, y):
    """Per example: ``x`` where ``live`` (shape ``(B,)``), else ``y``."""
    return ops.select(lift(live, len(aval(x).shape) - 1), x, y)


def _any(live):
    return ops.gt(ops.reduce_sum(ops.convert(live, dtype="i64"), axes=(0,)), 0)


# --- cond ----------------------------------------------------------------------------


@rule("cond")
def cond_batch(op, size, batched, pred, *args, regions):
    """Shared predicate: a cond of the batched branches; batched: both, selected."""
    axes = _axes(batched[1:])
    branches = tuple(batch(f, axes, size, 0) for f in regions)
    if not batched[0]:
        return ops.cond(pred, *args, regions=branches)
    live = _live(pred)
    taken, other = (evaluate(f, *args) for f in branches)
    return _one(tuple(_where(live, a, b) for a, b in zip(taken, other)))


# --- while_loop and its adjoints -------------------------------------------------------


def _gated(cond_b, fn_b, n: int, idle, name: str):
    """``fn_b`` for the examples whose predicate (``cond_b`` of the first ``n``
    parameters) holds, ``idle(*params)`` for the others."""

    def gated(*a):
        live = _live(evaluate(cond_b, *a[:n])[0])
        return tuple(_where(live, x, y) for x, y in zip(evaluate(fn_b, *a), idle(*a)))

    return _closed(gated, fn_b.in_types, name)


def _while_any(cond_b):
    return _closed(lambda *a: _any(_live(evaluate(cond_b, *a)[0])), cond_b.in_types,
                   "cond_any")


def _loop_operands(size, batched, xs, cf, bf, num_carry, force):
    """The operands of a batched loop: carries batched by the fixed point (and every
    operand in ``force``), the predicate's batching, and the operands' flags."""
    n = len(cf.params)
    flags = [b or f for b, f in zip(batched, force)]
    carry = _carry_flags(bf, num_carry, flags[:n])
    flags[:num_carry] = carry
    pred = _batched_results(cf, flags[:n])[0]
    if pred:  # every carry takes part in the per-example select
        flags[:num_carry] = [True] * num_carry
    return _broadcast(xs, batched, flags, size), flags, pred


@rule("while_loop")
def while_loop_batch(op, size, batched, *xs, num_carry, regions):
    cf, bf = regions
    nc = num_carry
    xs, flags, pred = _loop_operands(size, batched, xs, cf, bf, nc, [False] * len(xs))
    axes = _axes(flags)
    if not pred:
        new = (batch(cf, axes, size, None), batch(bf, axes, size, _axes(flags[:nc])))
        out = _tuple(ops.while_loop(*xs, regions=new, num_carry=nc), nc)
        return _one(tuple(with_batch(x, f, size) for x, f in zip(out, flags)))
    cond_b, body_b = batch(cf, axes, size, 0), batch(bf, axes, size, 0)
    new = (_while_any(cond_b), _gated(cond_b, body_b, len(xs), lambda *a: a[:nc], "body"))
    return ops.while_loop(*xs, regions=new, num_carry=nc)


def _float_consts(types, num_carry: int) -> list[int]:
    return [i for i in range(num_carry, len(types)) if types[i].is_inexact]


def _adjoint_setup(size, batched, xs, regions, num_carry):
    """Shared by ``while_grad`` and ``while_grad_vjp``: every float operand batched."""
    cf, bf = regions[:2]
    force = [aval(x).is_inexact for x in xs]
    xs, flags, pred = _loop_operands(size, batched, xs, cf, bf, num_carry, force)
    return xs, _axes(flags), pred


def _gated_adjoints(size, regions, axes, n, nc, idles):
    """The loop's (cond, body) and the adjoint regions, each gated by the predicate."""
    cf, bf = regions[:2]
    cond_b = batch(cf, axes[:n], size, 0)
    loop = (_while_any(cond_b),
            _gated(cond_b, batch(bf, axes[:n], size, 0), n, lambda *a: a[:nc], "body"))
    rest = tuple(_gated(cond_b, batch(r, (*axes[:n], *(0,) * (len(r.params) - n)), size, 0),
                        n, idle, r.name) for r, idle in zip(regions[2:], idles))
    return (*loop, *rest)


def _plain_adjoints(size, regions, axes, n, nc):
    """The regions batched as they are (a predicate shared by the batch)."""
    cf, bf = regions[:2]
    return (batch(cf, axes[:n], size, None), batch(bf, axes[:n], size, axes[:nc]),
            *(batch(r, (*axes[:n], *(0,) * (len(r.params) - n)), size, 0)
              for r in regions[2:]))


@rule("while_grad")
def while_grad_batch(op, size, batched, *xs, num_carry, regions):
    """A finished example's adjoint step passes its cotangents through unchanged."""
    nc, n = num_carry, len(regions[0].params)
    xs, axes, pred = _adjoint_setup(size, batched, xs, regions, nc)
    nfc = len(xs) - n
    fk = _float_consts([aval(x) for x in xs[:n]], nc)

    def idle(*a):  # adjoint(c, k, g) -> (g, 0)
        return (*a[n:n + nfc], *(zeros_like(a[i]) for i in fk))

    new = (_gated_adjoints(size, regions, axes, n, nc, (idle,)) if pred
           else _plain_adjoints(size, regions, axes, n, nc))
    return ops.while_grad(*xs, regions=new, num_carry=nc)


@rule("while_grad_vjp")
def while_grad_vjp_batch(op, size, batched, *xs, num_carry, regions):
    """Finished examples: the adjoint is (g, 0), so its VJP is (0, 0, u_g); the body is
    the identity, so its VJP is (v, 0)."""
    nc, n = num_carry, len(regions[0].params)
    xs, axes, pred = _adjoint_setup(size, batched, xs, regions, nc)
    types = [aval(x) for x in xs[:n]]
    fc = [i for i in range(nc) if types[i].is_inexact]
    fk = _float_consts(types, nc)
    nfc = len(fc)

    def idle_adjoint(*a):  # adjoint(c, k, g) -> (g, 0)
        return (*a[n:n + nfc], *(zeros_like(a[i]) for i in fk))

    def idle_adjoint_vjp(*a):  # (c, k, g, u_g, u_acc) -> (0, 0, u_g)
        return (*(zeros_like(a[i]) for i in fc + fk), *a[n + nfc:n + 2 * nfc])

    def idle_body_vjp(*a):  # (c, k, v) -> (v, 0)
        return (*a[n:n + nfc], *(zeros_like(a[i]) for i in fk))

    new = (_gated_adjoints(size, regions, axes, n, nc,
                           (idle_adjoint, idle_adjoint_vjp, idle_body_vjp)) if pred
           else _plain_adjoints(size, regions, axes, n, nc))
    return ops.while_grad_vjp(*xs, regions=new, num_carry=nc)


# --- scan and checkpoint ---------------------------------------------------------------


@rule("scan")
def scan_batch(op, size, batched, *xs, length, num_carry, num_xs, reverse, regions):
    """Batched xs are scanned with the batch at axis 1; batched ys come back transposed."""
    (body,) = regions
    nc, nx = num_carry, num_xs
    flags = list(batched)
    flags[:nc] = _carry_flags(body, nc, flags)
    ys = _batched_results(body, flags)[nc:]
    xs = _broadcast(xs, batched, flags, size)
    xs = [moveaxis(x, 0, 1) if nc <= i < nc + nx and f else x for i, (x, f) in
          enumerate(zip(xs, flags))]
    step = batch(body, _axes(flags), size, _axes(flags[:nc] + ys))
    out = _tuple(ops.scan(*xs, regions=(step,), length=length, num_carry=nc, num_xs=nx,
                          reverse=reverse), len(body.results))
    carry = [with_batch(c, f, size) for c, f in zip(out[:nc], flags)]
    stacked = [moveaxis(y, 1, 0) if f else with_batch(y, False, size)
               for y, f in zip(out[nc:], ys)]
    return _one((*carry, *stacked))


@rule("checkpoint")
def checkpoint_batch(op, size, batched, *xs, regions):
    (body,) = regions
    return ops.checkpoint(*xs, regions=(batch(body, _axes(batched), size, 0),))


# --- region ops ---------------------------------------------------------------------


@rule("custom_vjp_call")
def custom_vjp_call_batch(op, size, batched, *xs, num_out, regions):
    """Both rules are batched with every operand batched (unbatched ones broadcast, so their
    batched cotangents are summed back by broadcast_to's VJP)."""
    fwd, bwd = regions
    xs = [with_batch(x, b, size) for x, b in zip(xs, batched)]
    fwd_b = batch(fwd, (0,) * len(fwd.params), size)
    bwd_b = batch(bwd, (0,) * len(bwd.params), size)
    return ops.custom_vjp_call(*xs, regions=(fwd_b, bwd_b), num_out=num_out)


@rule("fused")
def fused_batch(op, size, batched, *xs, regions):
    """A kernel is inlined batched (fusion runs again on the result)."""
    (body,) = regions
    outs, out_batched = replay(body, size, xs, batched)
    outs = tuple(with_batch(o, b, size) for o, b in zip(outs, out_batched))
    return outs[0] if len(outs) == 1 else outs
