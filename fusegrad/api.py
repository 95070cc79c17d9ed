"""Functional transforms: grad, value_and_grad, vjp, jacobian, jit, ...

Forward mode (jvp, jacfwd, hvp, hessian) lives in ``forward``.

Each transform traces the user's function to IR (``tracer``), applies IR passes
(``passes.autodiff``) and executes the result (``runtime``). Applied to
tracers (inside another transform) the result is inlined into the enclosing
trace, which is what makes nested transforms of closures correct.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from . import config
from .codegen.emit import generate
from .ir import Function, evaluate, ops
from .ir.bind import aval, is_weak
from .ir.errors import FusegradError
from .ir.printer import print_function
from .ir.types import TensorType
from .passes.autodiff import vjp as _vjp_pass
from .passes.fusion import fuse
from .passes.simplify import simplify
from .runtime import Tensor, fastcall
from .runtime.compiled import executable
from .runtime.debug_nans import run_checked
from .runtime.donation import donated_leaves
from .runtime.grad_mode import is_grad_enabled
from .tracer import Tracer, trace_pytree
from .tracer.core import _state as _trace_state
from .tracer.pytree import tree_flatten, tree_flatten_up_to, tree_map, tree_unflatten


class GradError(FusegradError, TypeError):
    """A transform was asked for something it cannot do (non-scalar grad, int inputs...)."""


# --- execution ---------------------------------------------------------------------


def vjp_pass(fn: Function, wrt, seeds=None, name=None) -> Function:
    """Reverse mode, then simplification: the gradient IR every transform executes."""
    return simplify(_vjp_pass(fn, wrt, seeds=seeds, name=name))


def _concrete(x) -> bool:
    return not isinstance(x, Tracer)


def call(fn: Function, *args) -> tuple:
    """Execute ``fn``: compiled (or with NumPy if ``FUSEGRAD_DISABLE_JIT``) on concrete
    arrays; recorded into the enclosing trace otherwise. Eager Tensors (closed over by
    the function) count as their data."""
    args = tuple(_leaf(a) if isinstance(a, Tensor) else a for a in args)
    if all(_concrete(a) for a in args) and not _trace_state.stack:
        if config.DISABLE_JIT:
            return run_checked(fn, *args)
        return executable(fn)(*args)
    return evaluate(fn, *args)


def _leaf(x):
    """Normalise one argument leaf: Python scalars and lists become NumPy arrays.

    An eager ``Tensor`` counts as its data (no gradient flows back into its
    autograd graph; ``fg.jit`` refuses tensors that require grad).
    """
    if isinstance(x, Tracer | np.ndarray | TensorType):
        return x
    if isinstance(x, Tensor):
        return x.detach()._data
    if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__"):
        return np.asarray(x)
    if is_weak(x) or isinstance(x, np.generic | list):
        return np.asarray(x)
    raise TypeError(
        f"fusegrad cannot take an argument of type {type(x).__name__}; pass NumPy arrays, "
        "Python scalars or pytrees (tuple, list, dict, NamedTuple, dataclass) of them"
    )


def _argnums_tuple(argnums, nargs: int, who: str, what: str = "argnums",
                   error: type[Exception] = GradError) -> tuple[int, ...]:
    """``argnums`` (an int or ints, negative counting from the end) as indices."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise error(f"{who}: {what}={argnums} but the function was called with "
                        f"{nargs} positional argument(s)")
    return tuple(i % nargs for i in nums)


def _diff_leaves(args, argnums, who) -> list[int]:
    """Flat leaf indices of the differentiated arguments, in ``argnums`` order.

    That is the order ``_structure_grads`` reads the cotangents back in, so
    ``argnums=(1, 0)`` (or a repeated index) gives the gradients in that order.
    Integer inputs are an error.
    """
    flat = [tree_flatten(a)[0] for a in args]
    starts = [sum(len(leaves) for leaves in flat[:i]) for i in range(len(args))]
    idx = []
    for i in argnums:
        leaves = flat[i]
        for k, leaf in enumerate(leaves):
            dt = aval(leaf).dtype
            if not np.issubdtype(dt, np.floating):
                where = f"argument {i}" + (f" (leaf {k})" if len(leaves) > 1 else "")
                raise GradError(
                    f"{who}: {where} has dtype {dt}, and only floating-point inputs can "
                    "be differentiated. Pass it as a float array (e.g. x.astype(float)) "
                    "or leave it out of argnums."
                )
            idx.append(starts[i] + k)
    return idx


def _signature(args, extra=()):
    """A hashable key for the structure, shapes and dtypes of ``args`` (already leaves)."""
    leaves, td = tree_flatten(args)
    return td, tuple((aval(x).shape, aval(x).dtype) for x in leaves), extra


class _Plan:
    """A transformed Function with what calling it needs: closed-over arrays after the
    arguments, then ``extra`` (e.g. the seed cotangent). Runs compiled code (compiled
    on first use), the interpreter with ``FUSEGRAD_DISABLE_JIT``, or inlines into the
    enclosing trace when given tracers."""

    __slots__ = ("donated", "exe", "extra", "fn", "reason", "traced")

    def __init__(self, fn: Function, traced, extra: tuple = (), reason: str = "new function",
                 donated: frozenset[int] = frozenset()):
        self.fn, self.traced, self.extra, self.exe = fn, traced, extra, None
        self.reason, self.donated = reason, donated

    @property
    def cacheable(self) -> bool:
        """False when it closes over a tracer of an enclosing trace (valid only there)."""
        return not any(isinstance(x, Tracer) for x in self.traced.free)

    def __call__(self, leaves) -> tuple:
        args = (*leaves, *self.traced.free, *self.extra)
        if _trace_state.stack or not all(_concrete(a) for a in leaves):
            return evaluate(self.fn, *args)
        if config.DISABLE_JIT:
            return run_checked(self.fn, *args)
        if self.exe is None:
            self.exe = executable(self.fn, self.reason, self.donated)
        return self.exe(*args)


def _reason(cache: dict, key) -> str:
    """Why a signature needs a new compile: the first one, or what differs from the last."""
    if not cache:
        return "new function"
    last = next(reversed(cache))
    if not isinstance(last, tuple) or len(last) < 2 or last[0] != key[0]:
        return "new argument structure"
    dtypes = [t.dtype if hasattr(t, "dtype") else t[1] for t in last[1]]
    new_dtypes = [t.dtype if hasattr(t, "dtype") else t[1] for t in key[1]]
    return "new dtype" if dtypes != new_dtypes else "new shape"


def _ones_like(x):
    t = aval(x)
    return ops.broadcast_to(np.ones((), t.dtype), shape=t.shape)


def _structure_grads(args, argnums, flat_grads, single: bool):
    out, it = [], iter(flat_grads)
    for i in argnums:
        leaves, td = tree_flatten(args[i])
        out.append(tree_unflatten(td, [next(it) for _ in leaves]))
    return out[0] if single else tuple(out)


# --- grad and friends ---------------------------------------------------------------


def value_and_grad(f: Callable | None = None, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False):
    """``f``'s value and its gradient w.r.t. ``argnums``; ``f`` must return a scalar.

    With ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is
    ``((value, aux), grad)``, as in JAX.
    """
    if f is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux)

    plans: dict = {}
    lock = threading.RLock()

    def plan_for(args, kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad")
        key = _signature(args, (nums, has_aux)) if not kwargs else None
        plan = plans.get(key) if key is not None else None
        if plan is not None:
            return plan, nums
        with lock:  # one trace per signature, whichever thread comes first
            plan = plans.get(key) if key is not None else None
            return (plan, nums) if plan is not None else (make_plan(args, kwargs, key, nums), nums)

    def make_plan(args, kwargs, key, nums):
        wrt = _diff_leaves(args, nums, "grad")
        fun = functools.partial(f, **kwargs) if kwargs else f
        traced = trace_pytree(fun, args, name=getattr(f, "__name__", "f"))
        fn = traced.function
        if has_aux:
            if traced.out_tree.kind not in ("tuple", "list") or len(traced.out_tree.children) != 2:
                raise GradError("grad(has_aux=True): the function must return a pair "
                                f"(value, aux), got structure {traced.out_tree}")
        elif traced.out_tree.num_leaves != 1:
            raise GradError(f"grad: the function must return one scalar, got {traced.out_tree}")
        loss_t = fn.out_types[0]
        if loss_t.shape != () or not loss_t.is_float:
            raise GradError(
                f"grad: the function must return a floating-point scalar (shape ()), but it "
                f"returned {loss_t}. Reduce it (e.g. .sum() or .mean()), or use fg.jacobian "
                "for vector outputs and fg.vjp for vector-Jacobian products."
            )
        g = vjp_pass(fn, wrt, seeds=(0,), name=f"{fn.name}_grad")
        plan = _Plan(g, traced, (np.ones((), loss_t.dtype),),
                     _reason(plans, key) if key is not None else "new function")
        if key is not None and plan.cacheable:
            plans[key] = plan
        return plan

    fast: dict = {}  # plain-ndarray arguments -> (plan, index of the first gradient)

    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        if not kwargs and not _trace_state.stack and not config.DISABLE_JIT and all(
                type(a) is np.ndarray for a in args):
            hit = fast.get(tuple((a.shape, a.dtype) for a in args))
            if hit is not None:
                exe, n, grads_of, extra = hit
                outs = exe.call_unchecked((*args, *extra))
                return (outs[0] if n == 1 else (outs[0], outs[1:n])), grads_of(outs[n:])
        args = tree_map(_leaf, args)
        plan, nums = plan_for(args, kwargs)
        outs = plan(tree_flatten(args)[0])
        n = len(plan.traced.function.results)
        value = tree_unflatten(plan.traced.out_tree, outs[:n])
        grads = _structure_grads(args, nums, outs[n:], isinstance(argnums, int))
        if (not kwargs and not has_aux and plan.exe is not None and plan.cacheable
                and not plan.traced.free and all(type(a) is np.ndarray for a in args)):
            single = isinstance(argnums, int)
            fast[tuple((a.shape, a.dtype) for a in args)] = (
                plan.exe, n, (lambda g: g[0]) if single else tuple, plan.extra)
        return value, grads

    value_and_grad_f._plans = plans
    return value_and_grad_f


def grad(f: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False):
    """The gradient of scalar-valued ``f`` w.r.t. argument(s) ``argnums``.

    Usable as ``@fg.grad`` or ``fg.grad(f, argnums=(0, 1))``. The result has
    the structure of the differentiated argument(s); with ``has_aux`` it is
    ``(grad, aux)``.

    >>> import numpy as np
    >>> float(grad(lambda x: x ** 3)(2.0))
    12.0
    """
    if f is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux)
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return grad_f


def vjp(f: Callable, *primals, has_aux: bool = False):
    """``(f(*primals), vjp_fn)`` where ``vjp_fn(cotangent)`` returns one cotangent per primal."""
    primals = tree_map(_leaf, primals)
    wrt = _diff_leaves(primals, tuple(range(len(primals))), "vjp")
    traced = trace_pytree(f, primals)
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
    outs = call(fn, *leaves, *traced.free)
    g = vjp_pass(fn, wrt, seeds=tuple(range(n_main)), name=f"{fn.name}_vjp")

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
    def ew(*args):
        (i,) = _argnums_tuple(argnums, len(args), "elementwise_grad")

        def partial_f(x):
            return f(*args[:i], x, *args[i + 1:])

        out, vjp_fn = vjp(partial_f, args[i])
        return vjp_fn(tree_map(_ones_like, out))[0]

    return ew


def jacobian(f: Callable, argnums: int | Sequence[int] = 0):
    """The Jacobian by reverse mode: one VJP per output element.

    The result has the output's structure, each leaf holding an array of shape
    ``out.shape + in.shape`` per differentiated argument (JAX's ``jacrev``).
    """

    @functools.wraps(f)
    def jac(*args):
        args = tree_map(_leaf, args)
        nums = _argnums_tuple(argnums, len(args), "jacobian")

        def sub(*dyn):
            full = list(args)
            for i, d in zip(nums, dyn):
                full[i] = d
            return f(*full)

        out, vjp_fn = vjp(sub, *(args[i] for i in nums))
        out_leaves, out_tree = tree_flatten(out)
        rows_per_leaf = []
        for k, o in enumerate(out_leaves):
            t = aval(o)
            rows = []
            for j in range(t.size):
                cts = [np.zeros(aval(x).shape, aval(x).dtype) for x in out_leaves]
                basis = np.zeros(t.size, t.dtype)
                basis[j] = 1
                cts[k] = basis.reshape(t.shape)
                rows.append(vjp_fn(tree_unflatten(out_tree, cts)))
            rows_per_leaf.append((t, rows))
        results = []
        for t, rows in rows_per_leaf:
            per_arg = []
            for a_i in range(len(nums)):
                in_leaves, in_tree = tree_flatten(args[nums[a_i]])
                stacked = []
                for li, x in enumerate(in_leaves):
                    xs = aval(x).shape
                    parts = [tree_flatten(r[a_i])[0][li] for r in rows]
                    stacked.append(_stack(parts, t.shape + xs, t, x))
                per_arg.append(tree_unflatten(in_tree, stacked))
            results.append(per_arg[0] if isinstance(argnums, int) else tuple(per_arg))
        return tree_unflatten(out_tree, results)

    return jac


def _stack(parts, shape, out_t: TensorType, x):
    from .ir import array as A

    if not parts:
        return np.zeros(shape, aval(x).dtype)
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.stack(parts).reshape(shape)
    rows = [A.reshape(p, (1, math.prod(aval(p).shape))) for p in parts]
    return A.reshape(A.concatenate(rows, axis=0), shape)


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


# --- inspection ---------------------------------------------------------------------


def make_ir(f: Callable, static_argnums: int | Sequence[int] = ()):
    """``make_ir(f)(*args)`` returns the traced ``Function`` (print it to read the IR)."""

    @functools.wraps(f)
    def ir_of(*args):
        fun, dyn = _split_static(f, args, static_argnums, "make_ir")
        return trace_pytree(fun, dyn, name=getattr(f, "__name__", "f")).function

    return ir_of


def stages(f: Callable, *args, grad: bool = True) -> list[tuple[str, float, object]]:
    """``(stage, seconds, result)`` after each stage of the pipeline, in order.

    ``traced`` (the user's function), ``grad`` (reverse mode w.r.t. every float
    argument, if ``grad``), ``simplified``, ``fused`` (loop kernels as ``fused``
    ops) and ``source`` (the generated Numba module, as text).
    """
    args = tree_map(_leaf, args)
    out: list[tuple[str, float, object]] = []

    def stage(name, fn, *a):
        t0 = time.perf_counter()
        res = fn(*a)
        out.append((name, time.perf_counter() - t0, res))
        return res

    traced = trace_pytree(f, args, name=getattr(f, "__name__", "f"))
    cur = stage("traced", lambda: traced.function)
    if grad:
        n_explicit = len(cur.params) - len(traced.free)
        wrt = [i for i, p in enumerate(cur.params[:n_explicit]) if p.type.is_float]
        cur = stage("grad", _vjp_pass, cur, wrt, None, f"{cur.name}_grad")
    cur = stage("simplified", simplify, cur)
    cur = stage("fused", fuse, cur)
    stage("source", lambda fn: generate(fn)[0], cur)
    return out


STAGES = ("traced", "grad", "simplified", "fused", "source")


def dump(f: Callable, *args, stage: str = "all", grad: bool = False, file=None,
         locs: bool = False) -> None:
    """Print ``f``'s IR for ``args`` after ``stage`` (one of ``STAGES``, or ``all``).

    ``grad=True`` (implied by ``stage="grad"``) differentiates first; ``locs=True``
    ends each op with its source location (adjoint ops: the primal op's).
    """
    if stage not in (*STAGES, "all"):
        raise ValueError(f"dump: unknown stage {stage!r}; choose one of {', '.join(STAGES)}, all")
    file = file or sys.stdout
    for name, secs, fn in stages(f, *args, grad=grad or stage == "grad"):
        if stage in ("all", name):
            print(f"// ---- stage: {name} ({secs * 1e3:.2f} ms) ----", file=file)
            print(print_function(fn, locs=True) if locs and isinstance(fn, Function) else fn,
                  file=file)


# --- jit ----------------------------------------------------------------------------


def _static_indices(static_argnums, nargs: int, who: str) -> tuple[int, ...]:
    return _argnums_tuple(static_argnums, nargs, who, "static_argnums", ValueError)


def _split_static(f, args, static_argnums, who: str):
    static = _static_indices(static_argnums, len(args), f"{who}({getattr(f, '__name__', 'f')})")
    if not static:
        return f, args
    dyn_idx = [i for i in range(len(args)) if i not in static]

    def fun(*dyn, **kwargs):
        full = list(args)
        for i, d in zip(dyn_idx, dyn):
            full[i] = d
        return f(*full, **kwargs)

    fun.__name__ = getattr(f, "__name__", "f")
    fun.__signature__ = _dynamic_signature(f, dyn_idx)
    return fun, tuple(args[i] for i in dyn_idx)


def _dynamic_signature(f, dyn_idx) -> inspect.Signature | None:
    """``f``'s signature without its static parameters, so the IR keeps the user's names."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) <= max(dyn_idx, default=-1):
        return None
    return inspect.Signature([positional[i].replace(default=inspect.Parameter.empty)
                              .replace(kind=inspect.Parameter.POSITIONAL_ONLY)
                              for i in dyn_idx])


def _keywords_last(fun: Callable, nargs: int, kwargs: dict) -> Callable:
    """``fun`` taking its keyword arguments as one dict after its ``nargs`` positional ones."""

    def with_kwargs(*args):
        return fun(*args[:-1], **args[-1])

    with_kwargs.__name__ = getattr(fun, "__name__", "f")
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return with_kwargs
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= nargs:
        kw_name = next(iter(kwargs)) if len(kwargs) == 1 else "kwargs"
        kw_param = inspect.Parameter(
            kw_name if kw_name.isidentifier() else "kwargs", inspect.Parameter.POSITIONAL_ONLY)
        with_kwargs.__signature__ = inspect.Signature(
            [p.replace(kind=p.POSITIONAL_ONLY, default=p.empty) for p in positional[:nargs]]
            + [kw_param]
        )
    return with_kwargs


class jit:
    """Trace ``f`` once per argument structure, shapes, dtypes and static values.

    Calls with a signature seen before reuse its IR; ``static_argnums`` are
    passed as Python values (they must be hashable) and may steer control flow.
    ``donate_argnums``: arguments whose arrays the compiled code may overwrite with
    results of the same shape and dtype (see ``docs/performance.md``); their contents
    are unspecified after the call, so do not read them again.
    """

    def __init__(self, f: Callable, static_argnums: int | Sequence[int] = (),
                 donate_argnums: int | Sequence[int] = ()):
        functools.update_wrapper(self, f)
        self.f = f
        self.donate_argnums = ((donate_argnums,) if isinstance(donate_argnums, int)
                               else tuple(donate_argnums))
        self.static_argnums = ((static_argnums,) if isinstance(static_argnums, int)
                               else tuple(static_argnums))
        self._cache: dict = {}
        self._fast: dict = {}  # runtime.fastcall signature -> plan
        self._lock = threading.RLock()

    def _key(self, args, kwargs):
        static = _static_indices(self.static_argnums, len(args), f"jit({self.__name__})")
        try:
            svals = tuple((i, args[i]) for i in static)
            hash(svals)
        except TypeError:
            raise TypeError(f"jit: static arguments {static} must be hashable") from None
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        if kwargs:
            dyn = (*dyn, kwargs)
        leaves, td = tree_flatten(dyn)
        types = tuple(aval(_leaf(x)) for x in leaves)
        return (td, types, svals), dyn

    def __call__(self, *args, **kwargs):
        """Keyword arguments are dynamic, like positional ones (as in ``jax.jit``)."""
        fast = None
        if "_eager" not in self.__dict__:  # plain array calls: the cached fast path first
            fast = None if kwargs or self.static_argnums else fastcall.signature(args)
            plan = self._fast.get(fast) if fast is not None else None
            if plan is not None:
                return tree_unflatten(plan.traced.out_tree, list(plan(fastcall.leaves(args))))
        from . import jit_eager  # eager Tensors, modules, optimizers: see jit_eager

        eager = jit_eager.for_jit(self, args, kwargs)
        if eager is not None:
            return eager(args, kwargs)
        _refuse_grad_tensors(self.__name__, (args, kwargs))
        key, dyn = self._key(args, kwargs)
        plan = self._cache.get(key)
        if plan is None:
            with self._lock:  # one trace per signature, whichever thread comes first
                plan = self._cache.get(key) or self._trace(args, kwargs, key, dyn)
        leaves = [_leaf(x) for x in tree_flatten(dyn)[0]]
        _refuse_grad_tensors(self.__name__, plan.traced.free)
        if fast is not None and plan.cacheable and not plan.traced.free:
            self._fast[fast] = plan
        return tree_unflatten(plan.traced.out_tree, list(plan(leaves)))

    def _trace(self, args, kwargs, key, dyn) -> _Plan:
        fun, dyn_args = _split_static(self.f, args, self.static_argnums, "jit")
        if kwargs:
            fun = _keywords_last(fun, len(dyn_args), kwargs)
        traced = trace_pytree(fun, tree_map(_leaf, dyn), name=self.__name__)
        plan = _Plan(traced.function, traced, reason=_reason(self._cache, key),
                     donated=donated_leaves(args, self.static_argnums, self.donate_argnums))
        if plan.cacheable:
            self._cache[key] = plan
        return plan


def _refuse_grad_tensors(name: str, tree) -> None:
    """A Tensor that requires grad hidden from ``jit_eager`` cannot get a gradient: say so,
    never detach."""
    if not is_grad_enabled():
        return
    for leaf in tree_flatten(tree)[0]:
        if isinstance(leaf, Tensor) and leaf.requires_grad:
            raise GradError(
                f"fg.jit({name}): got a Tensor that requires grad ({leaf.dtype}, shape "
                f"{tuple(leaf.shape)}) that it could not make an input, so no gradient "
                "could flow back to it. Pass it as an argument (or name it as a global) to "
                "get a compiled node in its autograd graph, or pass tensor.detach() if no "
                "gradient is needed.")
