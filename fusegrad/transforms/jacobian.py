"""Jacobians as one batched program: ``jacobian`` (reverse mode) and the programs of
``forward.jacfwd`` and ``forward.hessian``.

As JAX's ``jacrev``/``jacfwd``: the function is traced once, differentiated once (one
VJP, or one JVP) and the batching pass (``passes.batching``) maps that program over
the rows of the identity, built in the IR with ``iota``: the cotangents of every output
element (reverse mode) or the tangents of every input element (forward mode). So a
Jacobian's program is one VJP (JVP) plus the batching, whatever the number of
outputs (inputs), and nesting (``jacobian(jacobian(f))``, ``hessian``) multiplies
nothing: the outer transform differentiates and batches that one program again.

The function is traced on concrete arguments, as by ``grad``: Python control flow on
traced values (``if fnp.sum(x) > 0``) records guards, and the traces of each path are
kept per signature (``guards``), so such functions keep working.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from .. import _forksafe
from ..ir import Function, evaluate, ops
from ..ir.types import TensorType, dtype_name
from ..passes.simplify import simplify
from ..passes.vmap import batch
from ..tracer import Trace, trace_pytree
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from . import guards
from .complex_checks import check_complex_jacobian
from .plan import (
    _argnums_tuple,
    _diff_leaves,
    _leaf,
    _Plan,
    _reason,
    _signature,
    api_boundary,
    vjp_pass,
    warn_effects,
)


def basis(total: int, offset: int, t: TensorType):
    """Rows ``offset .. offset + t.size`` of the identity of size ``total``, as a batch of
    ``total`` arrays of type ``t``: ``out[i].flat[j] = (i == offset + j)``."""
    size = math.prod(t.shape)
    rows = ops.reshape(ops.iota(n=total, dtype="i64"), shape=(total, 1))
    cols = ops.reshape(ops.iota(n=size, dtype="i64"), shape=(1, size))
    one_hot = ops.convert(ops.eq(rows - cols, offset), dtype=dtype_name(t.dtype))
    return ops.reshape(one_hot, shape=(total, *t.shape))


def _zeros(shape: tuple, dtype):
    return ops.broadcast_to(ops.constant(value=0, dtype=dtype_name(dtype)), shape=shape)


def _offsets(types: Sequence[TensorType]) -> list[int]:
    """Where each type's elements start in the concatenation of all of them (and the total)."""
    starts = [0]
    for t in types:
        starts.append(starts[-1] + math.prod(t.shape))
    return starts


def _build(name: str, param_types: Sequence[TensorType], body: Callable) -> Function:
    """The Function of ``body(*params)`` (a list of results), simplified."""
    with Trace(name) as t:
        params = [t.new_arg(ty, hint) for ty, hint in param_types]
        results = [t.wrap(x) for x in body(*params)]
        fn = t.builder.build([t.to_value(x) for x in results])
    return simplify(fn)


def reverse_program(fn: Function, wrt: Sequence[int], name: str) -> Function:
    """The Jacobian of ``fn`` w.r.t. parameters ``wrt`` (indices, repeats allowed) by one
    VJP batched over every output element: a Function of ``fn``'s parameters returning,
    for each result ``k`` then each ``w`` in ``wrt``, the block of shape
    ``result_k.shape + param_w.shape``."""
    outs, n_out, n_params = fn.out_types, len(fn.results), len(fn.params)
    g = vjp_pass(fn, wrt, seeds=tuple(range(n_out)), name=f"{fn.name}_vjp")
    g = g.replace(results=g.results[n_out:])  # the cotangents of the parameters only
    starts = _offsets(outs)
    total = starts[-1]
    rows_fn = batch(g, (None,) * n_params + (0,) * n_out, total, 0) if total else None

    def body(*params):
        rows = evaluate(rows_fn, *params, *(basis(total, starts[k], t) for k, t in
                                            enumerate(outs))) if total else ()
        blocks = []
        for k, t in enumerate(outs):
            for w, i in enumerate(wrt):
                shape = t.shape + fn.params[i].type.shape
                if total:
                    blocks.append(ops.reshape(rows[w][starts[k]:starts[k + 1]], shape=shape))
                else:
                    blocks.append(_zeros(shape, g.out_types[w].dtype))
        return blocks

    return _build(name, [(p.type, p.hint) for p in fn.params], body)


def forward_program(fn: Function, n_args: int, n_wrt: int, name: str) -> Function:
    """The Jacobian from a JVP Function ``fn`` (parameters: ``n_args`` argument leaves,
    one tangent for each of ``n_wrt`` of them, then closed-over values; results: the
    output tangents), batched over every input element: a Function of the argument
    leaves and closed-over values returning, for each output ``o`` then each tangent
    ``w``, the block of shape ``out_o.shape + tangent_w.shape``."""
    p = fn.params
    tans = [q.type for q in p[n_args:n_args + n_wrt]]
    starts = _offsets(tans)
    total = starts[-1]
    n_free = len(p) - n_args - n_wrt
    cols_fn = batch(fn, (None,) * n_args + (0,) * n_wrt + (None,) * n_free, total,
                    0) if total else None

    def body(*params):
        cols = evaluate(cols_fn, *params[:n_args], *(
            basis(total, starts[w], t) for w, t in enumerate(tans)), *params[n_args:]
        ) if total else ()
        blocks = []
        for o, ot in enumerate(fn.out_types):
            m = math.prod(ot.shape)
            for w, t in enumerate(tans):
                shape = ot.shape + t.shape
                if not total:
                    blocks.append(_zeros(shape, ot.dtype))
                    continue
                c = ops.reshape(cols[o][starts[w]:starts[w + 1]],
                                shape=(starts[w + 1] - starts[w], m))
                blocks.append(ops.reshape(ops.transpose(c, perm=(1, 0)), shape=shape))
        return blocks

    kept = [(q.type, q.hint) for q in (*p[:n_args], *p[n_args + n_wrt:])]
    return _build(name, kept, body)


def jacobian(f: Callable, argnums: int | Sequence[int] = 0, holomorphic: bool = False):
    """The Jacobian by reverse mode: one VJP batched over every output element.

    The result has the output's structure, each leaf holding an array of shape
    ``out.shape + in.shape`` per differentiated argument (JAX's ``jacrev``).
    Complex inputs or outputs need ``holomorphic=True`` (then all must be complex).

    >>> import numpy as np
    >>> jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    plans: dict = {}
    lock = _forksafe.rlock()
    name = getattr(f, "__name__", "f")

    def make_plan(args, nums, key) -> _Plan:
        wrt = _diff_leaves(args, nums, "jacobian")
        traced = trace_pytree(f, args, name=name, concrete=True, wrt=wrt)
        warn_effects("jacobian", f, traced)
        fn = traced.function
        check_complex_jacobian(args, nums, holomorphic, fn.out_types)
        program = reverse_program(fn, wrt, f"{fn.name}_jacrev")
        plan = _Plan(program, traced, reason=_reason(plans, key))
        if plan.cacheable:
            guards.store(plans, key, plan, "jacobian", f)
        return plan

    def plan_for(args, nums) -> _Plan:
        key = _signature(args, (nums,))
        leaves = tree_flatten(args)[0]
        plan = guards.cached(plans, key, leaves)
        if plan is not None:
            return plan
        with lock:  # one trace per signature (and path), whichever thread comes first
            plan = guards.cached(plans, key, leaves)
            if plan is None:
                plan = make_plan(args, nums, key)
                guards.enter(plan, leaves)
            return plan

    @functools.wraps(f)
    @api_boundary
    def jac(*args):
        args = tree_map(_leaf, args)
        nums = _argnums_tuple(argnums, len(args), "jacobian")
        check_complex_jacobian(args, nums, holomorphic, None)
        plan = plan_for(args, nums)
        blocks = iter(plan(tree_flatten(args)[0]))
        results = []
        for _ in plan.traced.function.results:
            per_arg = []
            for i in nums:
                td = tree_flatten(args[i])[1]
                per_arg.append(tree_unflatten(td, [next(blocks) for _ in range(td.num_leaves)]))
            results.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        return tree_unflatten(plan.traced.out_tree, results)

    jac._plans = plans
    return jac
