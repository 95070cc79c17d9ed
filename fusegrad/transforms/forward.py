"""Forward-mode transforms: jvp, jacfwd, hvp, and hessian (forward over reverse).

Each traces the user's function, applies the forward-mode pass
(``passes.autodiff.jvp``) and runs the result like the reverse-mode
transforms of ``reverse``: compiled on concrete arrays (the interpreter under
``FUSEGRAD_DISABLE_JIT``), inlined into the enclosing trace on tracers, which
is what makes nested transforms of closures correct.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from .. import _forksafe
from ..ir import Function
from ..ir.bind import aval, is_weak
from ..ir.printer import print_function
from ..passes.autodiff import jvp as _jvp_pass
from ..passes.simplify import simplify
from ..tracer import trace_pytree
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from . import guards
from .attach import attach
from .jacobian import forward_program
from .plan import (
    GradError,
    _argnums_tuple,
    _diff_leaves,
    _leaf,
    _Plan,
    _reason,
    _signature,
    api_boundary,
    warn_effects,
)
from .reverse import grad


def jvp_pass(fn: Function, wrt, name=None) -> Function:
    """Forward mode, then simplification: the tangent IR every transform executes."""
    return simplify(_jvp_pass(fn, wrt, name=name))


# Functions with equal text compute the same thing: one object per text, so that the
# compiled code of a Function is reused when ``fg.jvp`` traces the same function again.
_canonical_fns: OrderedDict[str, Function] = OrderedDict()
_canonical_lock = _forksafe.lock()
_CANONICAL_SIZE = 256


def _canonical(fn: Function) -> Function:
    text = print_function(fn)
    with _canonical_lock:
        known = _canonical_fns.get(text)
        if known is not None:
            _canonical_fns.move_to_end(text)
            return known
        _canonical_fns[text] = fn
        while len(_canonical_fns) > _CANONICAL_SIZE:
            _canonical_fns.popitem(last=False)
    return fn


class _Pushforward:
    """``f``'s JVP w.r.t. the float leaves of arguments ``nums``, one plan per signature.

    A plan's Function takes the argument leaves, then one tangent per
    differentiated leaf, then the closed-over values; it returns ``f``'s results
    (unless ``primal_out`` is false: then they are not computed where the tangents
    do not need them), then their tangents. ``finish(fn, number of argument leaves,
    number of tangents)``, if given, turns that Function into the one the plan runs
    (``jacfwd``'s Jacobian).
    """

    def __init__(self, f: Callable, primal_out: bool = True,
                 finish: Callable[[Function, int, int], Function] | None = None):
        self.f, self.primal_out, self.finish = f, primal_out, finish
        self.plans: dict = {}
        self.wrts: dict = {}  # signature -> the differentiated leaves
        self.lock = _forksafe.rlock()

    def plan(self, args: tuple, nums: tuple[int, ...]) -> tuple[_Plan, list[int]]:
        key = _signature(args, (nums,))
        leaves = tree_flatten(args)[0]
        hit = guards.cached(self.plans, key, leaves)
        if hit is not None:
            return hit, self.wrts[key]
        with self.lock:  # one trace per signature (and path), whichever thread comes first
            hit = guards.cached(self.plans, key, leaves)
            if hit is not None:
                return hit, self.wrts[key]
            plan, wrt = self._trace(args, nums, key)
            guards.enter(plan, leaves)
            return plan, wrt

    def _trace(self, args: tuple, nums: tuple[int, ...], key) -> tuple[_Plan, list[int]]:
        flat = tree_flatten(args)[0]
        starts = np.cumsum([0] + [len(tree_flatten(a)[0]) for a in args]).tolist()
        wrt = [k for i in sorted(set(nums)) for k in range(starts[i], starts[i + 1])
               if aval(flat[k]).is_inexact]
        traced = trace_pytree(self.f, args, name=getattr(self.f, "__name__", "f"),
                              concrete=True, wrt=wrt)
        warn_effects("jvp", self.f, traced)
        fn = _jvp_pass(traced.function, wrt, name=f"{traced.function.name}_jvp")
        if not self.primal_out:
            fn = fn.replace(results=fn.results[len(traced.function.results):])
        fn = simplify(fn)
        n, nf = len(flat), len(traced.free)
        p = fn.params
        fn = fn.replace(params=(*p[:n], *p[n + nf:], *p[n:n + nf]))
        if self.finish is not None:
            fn = self.finish(fn, n, len(wrt))
        fn = _canonical(fn)
        plan = _Plan(fn, traced, reason=_reason(self.plans, key))
        if plan.cacheable:
            self.wrts[key] = wrt
            guards.store(self.plans, key, plan, "jvp", self.f)
        return plan, wrt

    def __call__(self, args: tuple, nums: tuple[int, ...], tangent_of) -> tuple:
        """``(traced, outs, tangents_out)``: ``f`` traced, its flat results (``()``
        without ``primal_out``) and their tangents; ``tangent_of(k)`` gives the
        tangent of leaf k."""
        plan, wrt = self.plan(args, nums)
        leaves = tree_flatten(args)[0]
        res = plan((*leaves, *(tangent_of(k) for k in wrt)))
        n = len(res) - len(plan.traced.function.results)
        return plan.traced, res[:n], res[n:]


def _tangent_leaves(who: str, primals: tuple, tangents: tuple) -> list:
    """The tangents as leaves matching the primals' leaves: structure, shape and dtype
    checked; Python scalars take their primal's dtype."""
    out = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        p_leaves, p_tree = tree_flatten(p)
        t_leaves, t_tree = tree_flatten(t)
        if t_tree != p_tree:
            raise GradError(f"{who}: the tangent of argument {i} has structure {t_tree}, but "
                            f"the primal has structure {p_tree}; they must match")
        for k, (pl, tl) in enumerate(zip(p_leaves, t_leaves)):
            pt = aval(pl)
            tl = np.asarray(tl, pt.dtype) if is_weak(tl) and pt.is_inexact else _leaf(tl)
            tt = aval(tl)
            where = f"argument {i}" + (f" (leaf {k})" if len(p_leaves) > 1 else "")
            if not pt.is_inexact and tt.is_inexact:
                raise GradError(
                    f"{who}: {where} is {pt.dtype}, which has no tangent, but its tangent is "
                    f"{tt.dtype}. To differentiate it, pass it as a float (e.g. 2.0, not 2); "
                    f"otherwise pass an integer tangent such as np.zeros({pt.shape}, int), "
                    "which is ignored"
                )
            if tt.shape != pt.shape or (pt.is_inexact and tt.dtype != pt.dtype):
                raise GradError(
                    f"{who}: the tangent of {where} has shape {tt.shape} and dtype {tt.dtype}, "
                    f"but the primal has shape {pt.shape} and dtype {pt.dtype}; a tangent must "
                    "have its primal's shape and dtype"
                )
            out.append(tl)
    return out


def _as_tuple(who: str, what: str, x) -> tuple:
    if not isinstance(x, tuple | list):
        raise GradError(f"{who}: {what} must be a tuple or list with one entry per argument "
                        f"of the function, got {type(x).__name__}")
    return tuple(x)


@api_boundary
def jvp(f: Callable, primals: Sequence, tangents: Sequence) -> tuple:
    """``(f(*primals), J f(primals) @ tangents)``: a Jacobian-vector product, forward mode.

    As ``jax.jvp``: ``primals`` and ``tangents`` are tuples (or lists) with one
    entry per argument, each a pytree; a tangent has its primal's structure,
    shapes and dtypes (a Python scalar takes its primal's dtype). Integer and
    boolean inputs have no tangent: theirs must be an integer or boolean array
    of the primal's shape, and is ignored (JAX asks for ``float0`` there). The
    result tangents have the outputs' structure.

    >>> jvp(lambda x: x ** 3, (2.0,), (1.0,))
    (array(8.), array(12.))
    """
    primals = tree_map(_leaf, _as_tuple("jvp", "primals", primals))
    tangents = _as_tuple("jvp", "tangents", tangents)
    if len(tangents) != len(primals):
        raise GradError(f"jvp: got {len(primals)} primal(s) but {len(tangents)} tangent(s); "
                        "give one tangent per primal")
    t_leaves = _tangent_leaves("jvp", primals, tangents)
    push = _Pushforward(f)
    traced, outs, touts = push(primals, tuple(range(len(primals))), t_leaves.__getitem__)
    return tree_unflatten(traced.out_tree, outs), tree_unflatten(traced.out_tree, touts)


def hvp(f: Callable) -> Callable:
    """``hvp(f)(x, v)``: the Hessian of scalar ``f`` at ``x`` times ``v``, forward over
    reverse (the JVP of ``grad(f)``), without forming the Hessian. ``v`` has the
    structure, shapes and dtypes of ``x``."""
    push = _Pushforward(grad(f), primal_out=False)

    @functools.wraps(f)
    @api_boundary
    def hvp_f(x, v):
        primals = (tree_map(_leaf, x),)
        t_leaves = _tangent_leaves("hvp", primals, (v,))
        traced, _, touts = push(primals, (0,), t_leaves.__getitem__)
        return tree_unflatten(traced.out_tree, touts)

    attach(hvp_f)
    return hvp_f


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian by forward mode: one JVP batched over every input element.

    Same result structure as ``fg.jacobian`` (JAX's ``jacrev``): the output's
    structure, each leaf holding an array of shape ``out.shape + in.shape`` per
    differentiated argument. Cheaper than reverse mode when the inputs are
    fewer than the outputs. The program is one JVP plus its batching
    (``jacobian.forward_program``), whatever the number of inputs.
    """

    push = _Pushforward(f, primal_out=False, finish=lambda fn, n_args, n_wrt: forward_program(
        fn, n_args, n_wrt, fn.name.removesuffix("_jvp") + "_jacfwd"))

    @functools.wraps(f)
    @api_boundary
    def jac(*args):
        args = tree_map(_leaf, args)
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        _diff_leaves(args, nums, "jacfwd")  # integer inputs are an error, as in jacobian
        plan, wrt = push.plan(args, tuple(sorted(set(nums))))
        blocks = plan(tree_flatten(args)[0])
        column = {k: w for w, k in enumerate(wrt)}
        starts = np.cumsum([0] + [len(tree_flatten(a)[0]) for a in args]).tolist()
        results = []
        for o in range(len(plan.traced.function.results)):
            per_arg = []
            for i in nums:
                td = tree_flatten(args[i])[1]
                per_arg.append(tree_unflatten(td, [blocks[o * len(wrt) + column[k]]
                                                   for k in range(starts[i], starts[i + 1])]))
            results.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        return tree_unflatten(plan.traced.out_tree, results)

    return jac


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of scalar ``f``: the forward-mode Jacobian of its gradient.

    One JVP of the gradient (forward over reverse) batched over every input element:
    the program of one Hessian-vector product plus its batching.
    """
    return jacfwd(grad(f, argnums), argnums)
