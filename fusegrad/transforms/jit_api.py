"""``fg.jit``: trace once per argument signature and static values, run compiled.

Static arguments (``static_argnums``), keyword arguments and donated buffers
(``donate_argnums``) are handled here; functions over eager Tensors, modules
and optimizers are routed to ``eager.jit_eager``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

from .. import _forksafe, config
from ..ir.bind import aval
from ..runtime import fastcall
from ..runtime.donation import donated_leaves
from ..tracer import trace_pytree
from ..tracer.core import _state as _trace_state
from ..tracer.pytree import tree_flatten, tree_map, tree_unflatten
from .export import cfunc as export_cfunc
from .export import export_njit
from .plan import (
    GradError,
    _argnums_tuple,
    _leaf,
    _Plan,
    _reason,
    filter_traceback,
    grad_leaves,
    warn_effects,
)

#: Where calls over eager Tensors, modules and optimizers go: ``fusegrad.eager`` registers
#: ``route(jit, args, kwargs, leaves)`` (``leaves``: the flattened arguments), which
#: returns a runner ``runner(args, kwargs)`` for such a call or None for plain array
#: functions (the eager face sits above this layer).
_ROUTES: list[Callable] = []


def register_route(route: Callable) -> None:
    """Give ``route`` the first look at every call that the cached fast path did not take."""
    _ROUTES.append(route)


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
        #: ``_fast_key`` -> (plan, its fast caller, its native caller (``_native``), whether
        #: the call's arguments are its leaves); the callers None where it has none
        self._fast: dict = {}
        #: the native caller of the signature the last fast call had: it checks its
        #: arguments itself and returns NotImplemented for any others
        self._native: tuple | None = None
        self._lock = _forksafe.rlock()

    def _dynamic(self, args, kwargs):
        """``(dyn, svals)``: the dynamic arguments (keywords last) and the static ones."""
        static = _static_indices(self.static_argnums, len(args), f"jit({self.__name__})")
        try:
            svals = tuple((i, args[i]) for i in static)
            hash(svals)
        except TypeError:
            raise TypeError(f"jit: static arguments {static} must be hashable") from None
        dyn = tuple(a for i, a in enumerate(args) if i not in static)
        if kwargs:
            dyn = (*dyn, kwargs)
        return dyn, svals

    def __call__(self, *args, **kwargs):
        """Keyword arguments are dynamic, like positional ones (as in ``jax.jit``)."""
        try:
            if (native := self._native) is not None and not kwargs and not (
                    _trace_state.stack or config.DISABLE_JIT or config.DEBUG_NANS):
                out = native[0](*args)
                if out is not NotImplemented:
                    return out if native[1] is None else tree_unflatten(native[1], list(out))
            return self._call(args, kwargs)
        except Exception as e:  # as api_boundary, without a frame more per call
            filter_traceback(e)
            raise

    def _call(self, args, kwargs):
        fast = None
        if "_eager" not in self.__dict__:  # seen structures: the cached fast path first
            fast = self._fast_key(args, kwargs)
            hit = self._fast.get(fast[0]) if fast is not None else None
            if hit is not None:
                plan, caller, native, flat = hit
                leaves = fast[1]
                if caller is None or _trace_state.stack or config.DISABLE_JIT:
                    return tree_unflatten(plan.traced.out_tree, list(plan(
                        fastcall.arrays(leaves))))
                # (``__call__`` tried ``self._native`` on these arguments already)
                if native is not None and native is not self._native and not config.DEBUG_NANS:
                    out = native[0](*leaves)
                    if out is not NotImplemented:
                        # arguments that are leaves: the next calls go native directly
                        self._native = native if flat else None
                        return out if native[1] is None else tree_unflatten(native[1],
                                                                            list(out))
                outs = caller(fastcall.arrays(leaves), 0)  # LeanExecutable.fast_caller
                return tree_unflatten(plan.traced.out_tree, list(outs))
        # without static or keyword arguments, one flatten serves the routes, the checks
        # and the key (a training step's parameters and optimizer state: a tree of a
        # hundred nodes or more)
        plain = not kwargs and not self.static_argnums
        every, td = tree_flatten(args) if plain else (tree_flatten((args, kwargs))[0], None)
        for route in _ROUTES:  # eager Tensors, modules, optimizers: see eager.jit_eager
            eager = route(self, args, kwargs, every)
            if eager is not None:
                self._native = None  # (set again by no call: ``_fast`` is not read now)
                return eager(args, kwargs)
        if plain:
            dyn, svals, dyn_leaves = args, (), every
        else:
            dyn, svals = self._dynamic(args, kwargs)
            dyn_leaves, td = tree_flatten(dyn)
        _refuse_grad_tensors(self.__name__, every)
        leaves = [_leaf(x) for x in dyn_leaves]
        key = (td, tuple(aval(x) for x in leaves), svals)
        plan = self._cache.get(key)
        if plan is None:
            with self._lock:  # one trace per signature, whichever thread comes first
                plan = self._cache.get(key) or self._trace(args, kwargs, key, dyn)
        _refuse_grad_tensors(self.__name__, tree_flatten(plan.traced.free)[0])
        if fast is not None and plan.reusable and not plan.traced.free and [
                (p.type.shape, p.type.dtype) for p in plan.fn.params] == [
                (a.shape, a.dtype) for a in fastcall.arrays(fast[1])]:
            out = plan(leaves)
            caller = native = None
            if plan.exe is not None and not plan.interpret and not plan.traced.effects:
                caller = plan.exe.fast_caller()
                native = _native(plan)
            flat = not (kwargs or self.static_argnums) and len(fast[1]) == len(args) and all(
                a is b for a, b in zip(args, fast[1]))
            self._fast[fast[0]] = (plan, caller, native, flat)
            return tree_unflatten(plan.traced.out_tree, list(out))
        return tree_unflatten(plan.traced.out_tree, list(plan(leaves)))

    def _fast_key(self, args, kwargs) -> tuple | None:
        """``(key, leaves)`` of a call for ``_fast`` (``runtime.fastcall``: the dynamic
        arguments' structure, shapes and dtypes, keywords last, and the static values),
        or None where ``fastcall`` does not take them (the general path keys the call)."""
        svals = ()
        if self.static_argnums:
            static = self.static_argnums
            if any(type(i) is not int or not 0 <= i < len(args) for i in static):
                return None
            svals = tuple((i, type(args[i]), args[i]) for i in sorted(set(static)))
            try:
                hash(svals)
            except TypeError:
                return None
            args = tuple(a for i, a in enumerate(args) if i not in static)
        if kwargs:
            args = (*args, kwargs)
        key = fastcall.signature(args)
        if key is not None:
            return (key, svals), fastcall.leaves(args)
        flat = fastcall.flatten(args)
        return None if flat is None else ((flat[0], svals), flat[1])

    def njit(self, *example_args):
        """This function as a Numba dispatcher for ``@numba.njit`` code (``transforms.export``)."""
        return export_njit(self, *example_args)

    def cfunc(self, *example_args):
        """This function as a ``numba.cfunc`` (``transforms.export.cfunc``)."""
        return export_cfunc(self, *example_args)

    def _trace(self, args, kwargs, key, dyn) -> _Plan:
        fun, dyn_args = _split_static(self.f, args, self.static_argnums, "jit")
        if kwargs:
            fun = _keywords_last(fun, len(dyn_args), kwargs)
        traced = trace_pytree(fun, tree_map(_leaf, dyn), name=self.__name__, kind="jit")
        plan = _Plan(traced.function, traced, reason=_reason(self._cache, key),
                     donated=donated_leaves(args, self.static_argnums, self.donate_argnums),
                     kept=True)
        if plan.reusable:
            self._cache[key] = plan
        warn_effects("jit", self.f, traced, jit=True)
        return plan


def _native(plan: _Plan) -> tuple | None:
    """``(caller, out_tree or None)`` for ``plan``: its executable's native caller
    (``LeanExecutable.native_caller``) of the call's leaves, returning the result itself
    (the one array, or a tuple of arrays: ``out_tree`` None) or the tuple of results to
    unflatten by ``out_tree``."""
    make = getattr(plan.exe, "native_caller", None)
    if make is None or plan.extra:
        return None
    tree = plan.traced.out_tree
    leaf = tree.kind is None
    call = make(as_tuple=not leaf)
    if call is None:
        return None
    flat = leaf or (tree.kind == "tuple" and all(c.kind is None for c in tree.children))
    return call, None if flat else tree


def _refuse_grad_tensors(name: str, leaves: list) -> None:
    """A Tensor that requires grad hidden from ``jit_eager`` cannot get a gradient: say so,
    never detach. ``leaves``: the call's flattened arguments."""
    refused = grad_leaves(leaves)
    if refused:
        leaf = refused[0]
        raise GradError(
            f"fg.jit({name}): got a Tensor that requires grad ({leaf.dtype}, shape "
            f"{tuple(leaf.shape)}) that it could not make an input, so no gradient "
            "could flow back to it. Pass it as an argument (or name it as a global) to "
            "get a compiled node in its autograd graph, or pass tensor.detach() if no "
            "gradient is needed.")
