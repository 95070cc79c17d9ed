"""Reverse-mode transforms: grad, value_and_grad, vjp, elementwise_grad,
stop_gradient and custom_vjp.

Forward mode (jvp, jacfwd, hvp, hessian) lives in ``forward``, ``jacobian`` in
``jacobian``, ``jit`` in ``jit_api``. Each transform traces the user's function to
IR (``tracer``), applies reverse mode (``plan.vjp_pass``) and runs the result through a
``plan._Plan`` or ``plan.call``: compiled on concrete arrays, inlined into the
enclosing trace on tracers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from .. import _forksafe, config
from ..ir import ops
from ..ir.bind import aval
from ..runtime import fastcall
from ..tracer import trace_pytree
from ..tracer.core import _state as _trace_state
from ..tracer.pytree import (
    tree_flatten,
    tree_flatten_up_to,
    tree_map,
    tree_unflatten,
)
from . import guards
from .attach import attach
from .complex_checks import check_holomorphic_inputs
from .fastpath import _fast_caller, _kwargs_key, _natives, _ndarray_key, _tree_entry
from .plan import (
    GradError,
    _argnums_tuple,
    _concrete,
    _diff_leaves,
    _leaf,
    _ones_like,
    _Plan,
    _reason,
    _signature,
    _structure_grads,
    api_boundary,
    call,
    filter_traceback,
    vjp_pass,
    warn_effects,
)


def value_and_grad(f: Callable | None = None, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False):
    """``f``'s value and its gradient w.r.t. ``argnums``; ``f`` must return a scalar.

    With ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is
    ``((value, aux), grad)``, as in JAX. Complex inputs follow JAX's convention
    (docs/complex.md); ``holomorphic=True`` differentiates a complex-valued ``f`` of
    complex inputs, giving ``f'(z)``.
    """
    if f is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux,
                                 holomorphic=holomorphic)

    plans: dict = {}
    lock = _forksafe.rlock()

    def plan_for(args, kwargs):
        if kwargs and any(not -len(args) <= i < len(args) for i in (
                (argnums,) if isinstance(argnums, int) else argnums)):
            raise GradError(
                f"grad: argnums={argnums} names positional arguments, but the function was "
                f"called with {len(args)} positional argument(s) and keyword argument(s) "
                f"{', '.join(kwargs)}. Differentiated arguments must be passed positionally: "
                f"call g(x) rather than g(x=x) (keyword arguments are not differentiated).")
        nums = _argnums_tuple(argnums, len(args), "grad")
        kw = _kwargs_key(kwargs)
        key = None if kw is None else _signature(args, (nums, has_aux, *kw))
        leaves = tree_flatten(args)[0]
        plan = guards.cached(plans, key, leaves)
        if plan is not None:
            return plan, nums
        with lock:  # one trace per signature (and path), whichever thread comes first
            plan = guards.cached(plans, key, leaves)
            if plan is None:
                plan = make_plan(args, kwargs, key, nums)
                guards.enter(plan, leaves)
            return plan, nums

    def make_plan(args, kwargs, key, nums):
        wrt = _diff_leaves(args, nums, "grad")
        if holomorphic:
            check_holomorphic_inputs("grad", args, nums)
        fun = functools.partial(f, **kwargs) if kwargs else f
        traced = trace_pytree(fun, args, name=getattr(f, "__name__", "f"), concrete=True,
                              wrt=wrt)
        warn_effects("grad", f, traced)
        fn = traced.function
        if has_aux:
            if traced.out_tree.kind not in ("tuple", "list") or len(traced.out_tree.children) != 2:
                raise GradError("grad(has_aux=True): the function must return a pair "
                                f"(value, aux), got structure {traced.out_tree}")
        elif traced.out_tree.num_leaves != 1:
            aux = (" If the other values are auxiliary outputs, return (value, aux) and pass "
                   "has_aux=True: grad then returns (gradient, aux)."
                   if traced.out_tree.kind in ("tuple", "list") else "")
            raise GradError(f"grad: the function must return one scalar, got "
                            f"{traced.out_tree}.{aux}")
        loss_t = fn.out_types[0]
        if holomorphic and loss_t.shape == () and not loss_t.is_complex:
            raise GradError(f"grad(holomorphic=True): the function must return a complex "
                            f"scalar, but it returned {loss_t}")
        if loss_t.shape == () and loss_t.is_complex and not holomorphic:
            raise GradError(
                f"grad: the function returned a complex scalar ({loss_t}); grad needs a real "
                "output. For holomorphic functions pass holomorphic=True; otherwise "
                "differentiate a real function of it (e.g. abs(f) ** 2, or f.real)."
            )
        if loss_t.shape != () or not (loss_t.is_float or holomorphic):
            raise GradError(
                f"grad: the function must return a floating-point scalar (shape ()), but it "
                f"returned {loss_t}. Reduce it (e.g. .sum() or .mean()), or use fg.jacobian "
                "for vector outputs and fg.vjp for vector-Jacobian products."
            )
        g = vjp_pass(fn, wrt, seeds=(0,), name=f"{fn.name}_grad")
        plan = _Plan(g, traced, (np.ones((), loss_t.dtype),),
                     _reason(plans, key) if key is not None else "new function")
        if key is not None and plan.cacheable:
            guards.store(plans, key, plan, "grad", f)
        return plan

    fast: dict = {}  # plain-ndarray argument types -> (fast caller, number of values)
    #: (shape, dtype, fast caller, number of values) of the last one-array call found in
    #: ``fast``: a shape comparison and a dtype identity test instead of hashing the key
    last: list = [None]
    fast_grads = (lambda g: g[0]) if isinstance(argnums, int) else tuple

    def run_fast(args, grads_only: bool):
        """``(number of values, results)`` of the compiled code for plain ndarray
        arguments of a signature seen before (the results from the first gradient on if
        ``grads_only``), or None: take the general path."""
        if _trace_state.stack or config.DISABLE_JIT:
            return None
        if len(args) == 1:
            a = args[0]
            hit = fast.get(((a.shape, a.dtype),)) if type(a) is np.ndarray else None
        else:
            hit = fast.get(_ndarray_key(args))
        if hit is None:
            return None
        if type(hit) is guards.Guarded:  # traces of several paths: the one whose guards hold
            plan = hit.fast(args)
            if plan is None:
                return None
            n = len(plan.traced.function.results)
            return n, plan.exe.call_unchecked((*args, *plan.extra))[n if grads_only else 0:]
        caller, n, natives = hit
        native[grads_only] = natives[grads_only]
        return n, caller(args, n if grads_only else 0)

    #: the native callers (``LeanExecutable.native_caller``) of the last signature a fast
    #: call took: ``[value and gradients (a tuple), gradients only]``; they check their
    #: arguments themselves and return NotImplemented for any others
    native: list = [None, None]
    single = isinstance(argnums, int)

    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        try:
            if not kwargs:
                if (w := native[0]) is not None and not (
                        _trace_state.stack or config.DISABLE_JIT or config.DEBUG_NANS):
                    outs = w(*args)
                    if outs is not NotImplemented:  # one value: see ``general``
                        return outs[0], outs[1] if single else outs[1:]
                got = run_fast(args, False)
                if got is not None:
                    n, outs = got
                    return (outs[0] if n == 1 else (outs[0], outs[1:n])), fast_grads(outs[n:])
            return general(args, kwargs)
        except Exception as e:  # as api_boundary, without a frame more per call
            filter_traceback(e)
            raise

    #: ``(fastcall.flatten key, _kwargs_key)`` of a seen call -> ``_tree_entry``: how to
    #: run it again without tracing, flattening or checking (any argument structure)
    trees: dict = {}

    def run_tree(args, kwargs):
        """``(value, grads)`` of a call whose structure, shapes, dtypes and keyword
        arguments were seen (``trees``), or None: take the general path."""
        if _trace_state.stack or config.DISABLE_JIT:
            return None
        flat = fastcall.flatten(args)
        kw = _kwargs_key(kwargs) if kwargs else ()
        hit = trees.get((flat[0], kw)) if flat is not None and kw is not None else None
        if hit is None:
            return None
        caller, whole, n, value_of, grad_trees, natives = hit
        outs = NotImplemented
        if whole is not None and not config.DEBUG_NANS:
            outs = whole(*flat[1])
        if outs is NotImplemented:
            outs = caller(fastcall.arrays(flat[1]), 0)
        elif natives is not None:  # arguments that are leaves: the next calls go native
            native[:] = natives
        value = value_of(outs[:n])
        grads = []
        for rebuild, k in grad_trees:
            grads.append(rebuild(outs[n:n + k]))
            n += k
        return value, grads[0] if single else tuple(grads)

    def general(args, kwargs):
        got = run_tree(args, kwargs)
        if got is not None:
            return got
        raw, args = args, tree_map(_leaf, args)
        plan, nums = plan_for(args, kwargs)
        outs = plan(tree_flatten(args)[0])
        n = len(plan.traced.function.results)
        value = tree_unflatten(plan.traced.out_tree, outs[:n])
        grads = _structure_grads(args, nums, outs[n:], isinstance(argnums, int))
        entry = _tree_entry(plan, raw, kwargs, nums, single)
        if entry is not None:
            trees[entry[0]] = entry[1]
        if (not kwargs and not has_aux and plan.exe is not None and plan.cacheable
                and not plan.traced.free and all(type(a) is np.ndarray for a in args)):
            shapes = tuple((a.shape, a.dtype) for a in args)
            if shapes in fast:  # (arguments of other types, e.g. floats, made these)
                pass
            elif not plan.traced.guards:
                fast[shapes] = (_fast_caller(plan), n, _natives(plan, n, single))
            elif type(paths := plans.get(_signature(args, (nums, has_aux)))) is guards.Guarded:
                fast[shapes] = paths
            last[0] = None
        return value, grads

    value_and_grad_f._run_fast = run_fast
    value_and_grad_f._fast = fast
    value_and_grad_f._last = last
    value_and_grad_f._fast_grads = fast_grads
    value_and_grad_f._native = native
    value_and_grad_f._run_tree = run_tree
    value_and_grad_f._plans = plans
    attach(value_and_grad_f)
    return value_and_grad_f


def grad(f: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False):
    """The gradient of scalar-valued ``f`` w.r.t. argument(s) ``argnums``.

    Usable as ``@fg.grad`` or ``fg.grad(f, argnums=(0, 1))``. The result has
    the structure of the differentiated argument(s); with ``has_aux`` it is
    ``(grad, aux)``.

    >>> import numpy as np
    >>> float(grad(lambda x: x ** 3)(2.0))
    12.0
    """
    if f is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux,
                                 holomorphic=holomorphic)
    vg = value_and_grad(f, argnums, has_aux, holomorphic)
    run_fast, fast, last, fast_grads = vg._run_fast, vg._fast, vg._last, vg._fast_grads
    native, run_tree = vg._native, vg._run_tree
    single = isinstance(argnums, int)

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        try:
            if not kwargs and not has_aux:
                if (w := native[1]) is not None and not (
                        _trace_state.stack or config.DISABLE_JIT or config.DEBUG_NANS):
                    out = w(*args)
                    if out is not NotImplemented:
                        return out
                # value_and_grad's fast path, inlined for one argument (a frame less)
                if len(args) == 1 and type(a := args[0]) is np.ndarray and not (
                        _trace_state.stack or config.DISABLE_JIT):
                    hit = last[0]
                    if hit is None or a.dtype is not hit[1] or a.shape != hit[0]:
                        hit = fast.get(((a.shape, a.dtype),))
                        hit = last[0] = (a.shape, a.dtype, *hit) if type(hit) is tuple else None
                    if hit is not None:  # only the gradients
                        native[1] = hit[4][1]
                        return hit[2](args, hit[3])[0] if single else tuple(
                            hit[2](args, hit[3]))
                got = run_fast(args, True)
                if got is not None:
                    return fast_grads(got[1])
            got = run_tree(args, kwargs)  # a seen structure (value_and_grad's, frames less)
            value, g = got if got is not None else vg(*args, **kwargs)
            return (g, value[1]) if has_aux else g
        except Exception as e:  # as api_boundary, without a frame more per call
            filter_traceback(e)
            raise

    attach(grad_f)
    return grad_f


@api_boundary
def vjp(f: Callable, *primals, has_aux: bool = False):
    """``(f(*primals), vjp_fn)`` where ``vjp_fn(cotangent)`` returns one cotangent per primal."""
    primals = tree_map(_leaf, primals)
    wrt = _diff_leaves(primals, tuple(range(len(primals))), "vjp")
    traced = trace_pytree(f, primals, concrete=True, wrt=wrt)
    fn = traced.function
    n_out = len(fn.results)
    aux_tree = None
    if has_aux:
        out_td = traced.out_tree
        if out_td.kind not in ("tuple", "list") or len(out_td.children) != 2:
            raise GradError(f"vjp(has_aux=True): f must return (out, aux), got {out_td}")
        n_main = out_td.children[0].num_leaves
        main_tree, aux_tree = out_td.children
    else:
        n_main, main_tree = n_out, traced.out_tree
    leaves = tree_flatten(primals)[0]
    guards.enter(_Plan(fn, traced), leaves)
    outs = call(fn, *leaves, *traced.free)
    g = vjp_pass(fn, wrt, seeds=tuple(range(n_main)), name=f"{fn.name}_vjp")

    @api_boundary
    def vjp_fn(cotangent):
        ct_leaves, ct_tree = tree_flatten(cotangent)
        if ct_tree != main_tree:
            raise GradError(f"vjp_fn: cotangent structure {ct_tree} != output structure "
                            f"{main_tree}")
        cts = []
        for c, t in zip(ct_leaves, fn.out_types):
            c = _leaf(c)
            if aval(c).shape != t.shape:
                raise GradError(f"vjp_fn: cotangent of shape {aval(c).shape} for an output of "
                                f"shape {t.shape}; they must match")
            cts.append(c if aval(c).dtype == t.dtype else ops.convert(c, dtype=t.dtype))
        res = call(g, *leaves, *traced.free, *cts)
        return _structure_grads(primals, range(len(primals)), res[n_out:], single=False)

    main = tree_unflatten(main_tree, outs[:n_main])
    if has_aux:
        return main, vjp_fn, tree_unflatten(aux_tree, outs[n_main:])
    return main, vjp_fn


def elementwise_grad(f: Callable, argnums: int = 0):
    """Sum of the Jacobian's rows: the derivative of each output element, for elementwise ``f``."""

    @functools.wraps(f)
    @api_boundary
    def ew(*args):
        (i,) = _argnums_tuple(argnums, len(args), "elementwise_grad")

        def partial_f(x):
            return f(*args[:i], x, *args[i + 1:])

        out, vjp_fn = vjp(partial_f, args[i])
        return vjp_fn(tree_map(_ones_like, out))[0]

    return ew


def stop_gradient(x):
    """``x`` with no gradient flowing back through it (values unchanged)."""
    return tree_map(lambda leaf: ops.stop_gradient(_leaf(leaf)), x)


# --- custom rules -------------------------------------------------------------------


class custom_vjp:
    """A function with a hand-written VJP, as ``jax.custom_vjp``.

    >>> @custom_vjp
    ... def clip_grad(x):
    ...     return x
    >>> def fwd(x):
    ...     return x, None
    >>> def bwd(res, g):
    ...     return (np.clip(g, -1.0, 1.0),)
    >>> clip_grad.defvjp(fwd, bwd)

    ``fwd(*args) -> (out, residuals)``; ``bwd(residuals, g) -> tuple`` with one
    cotangent per argument (``None`` for zero). Under a transform the forward
    computation runs ``fwd``. Arrays ``fun``/``fwd`` close over get no gradient.
    """

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args):
        if self.fwd is None:
            raise GradError(f"custom_vjp function {self.__name__} has no VJP: call "
                            f"{self.__name__}.defvjp(fwd, bwd) first")
        args = tree_map(_leaf, args)
        leaves = tree_flatten(args)[0]
        if all(_concrete(x) for x in leaves) and not _trace_state.stack:
            return self.fun(*args)
        fwd_t = trace_pytree(self.fwd, args, name=f"{self.__name__}_fwd")
        td = fwd_t.out_tree
        if td.kind not in ("tuple", "list") or len(td.children) != 2:
            raise GradError(f"custom_vjp {self.__name__}: fwd must return (out, residuals), "
                            f"got structure {td}")
        out_td, res_td = td.children
        n_out = out_td.num_leaves
        fwd_fn = fwd_t.function
        out_types = fwd_fn.out_types
        res_avals = [t for t in out_types[n_out:]]
        ct_avals = [t for t in out_types[:n_out]]

        def bwd_flat(*flat):
            res = tree_unflatten(res_td, list(flat[: len(res_avals)]))
            g = tree_unflatten(out_td, list(flat[len(res_avals):]))
            cts = self.bwd(res, g)
            if not isinstance(cts, tuple) or len(cts) != len(args):
                raise GradError(f"custom_vjp {self.__name__}: bwd must return a tuple with one "
                                f"cotangent per argument ({len(args)}), got {cts!r:.80}")
            flat_cts = []
            for i, (a, c) in enumerate(zip(args, cts)):
                a_leaves, a_td = tree_flatten(a)
                try:
                    c_leaves = tree_flatten_up_to(a_td, c)
                except ValueError:
                    raise GradError(
                        f"custom_vjp {self.__name__}: bwd's cotangent for argument {i} has "
                        f"structure {tree_flatten(c)[1]}, but the argument has {a_td}"
                    ) from None
                for x, cl in zip(a_leaves, c_leaves):
                    if cl is None:
                        cl = np.zeros(aval(x).shape, aval(x).dtype)
                    elif aval(cl).shape != aval(x).shape:
                        raise GradError(
                            f"custom_vjp {self.__name__}: bwd returned a cotangent of shape "
                            f"{aval(cl).shape} for argument {i} of shape {aval(x).shape}; "
                            "they must match"
                        )
                    flat_cts.append(cl)
            return tuple(flat_cts)

        bwd_t = trace_pytree(lambda *xs: bwd_flat(*xs), (*res_avals, *ct_avals),
                             name=f"{self.__name__}_bwd")
        outs = ops.custom_vjp_call(
            *leaves, *fwd_t.free, *bwd_t.free,
            regions=(fwd_fn, bwd_t.function), num_out=n_out,
        )
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tree_unflatten(out_td, list(outs[:n_out]))

