"""``fg.vmap``: map a function over a batch axis of its arguments, as one traced Function.

``vmap(f)`` traces ``f`` once on one example of the batch (the mapped axes
removed), then the batching pass (``passes.batching``) rewrites that Function
to compute every example at once: a batch of matrix-vector products becomes
one matrix product, elementwise code stays elementwise and fuses. Outside a
trace the batched Function is compiled (cached per argument signature);
inside another transform it is inlined, so ``fg.grad(fg.vmap(f))``,
``fg.vmap(fg.grad(f))``, ``fg.jit(fg.vmap(f))`` and nested ``vmap`` compose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .. import _forksafe
from ..ir.bind import aval
from ..ir.types import TensorType
from ..passes.vmap import BatchingError, batch
from ..tracer import trace_pytree
from ..tracer.pytree import _node, tree_flatten, tree_map, tree_unflatten
from ..tracer.trace import arg_hints, fn_name
from .jit_api import _keywords_last
from .plan import _grad_tensors, _leaf, _Plan, _reason, _signature, api_boundary, warn_effects

__all__ = ["BatchingError", "vmap"]


def vmap(f: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """``f`` mapped over axis ``in_axes`` of its arguments, results stacked at ``out_axes``.

    As ``jax.vmap``: ``in_axes`` is an int (every argument mapped along that
    axis), ``None`` (not mapped: shared by the whole batch), or a tuple/list
    with one entry per positional argument, each an int, ``None`` or a pytree
    prefix of that argument (``in_axes=(None, {"w": 0, "b": None})``).
    Keyword arguments are mapped along axis 0. ``out_axes`` is an int, or a
    pytree prefix of ``f``'s output (``None``: that output does not depend on
    the mapped arguments and is returned once). ``axis_size`` gives the batch
    size when no argument is mapped. Negative axes count from the end.

    >>> import numpy as np, fusegrad as fg
    >>> fg.vmap(lambda x, w: (x * w).sum(), in_axes=(0, None))(np.ones((3, 2)), np.arange(2.0))
    array([1., 1., 1.])
    """
    _check_spec(in_axes, "in_axes")
    _check_spec(out_axes, "out_axes")
    name = fn_name(f)
    plans: dict = {}
    lock = _forksafe.rlock()

    @functools.wraps(f)
    @api_boundary
    def vmapped(*args, **kwargs):
        _refuse_grad_tensors(name, (args, kwargs))
        fun, top = f, _top_axes(in_axes, len(args), name)
        if kwargs:
            fun, args, top = _keywords_last(f, len(args), kwargs), (*args, kwargs), (*top, 0)
        args = tree_map(_leaf, args)
        leaves, in_tree = tree_flatten(args)
        axes = []
        for i, (a, spec) in enumerate(zip(args, top)):
            axes += _prefix_axes(tree_flatten(a)[1], spec, f"in_axes[{i}]", f"argument {i}",
                                 name)
        axes = _check_axes(name, fun, args, leaves, axes)
        size = _batch_size(name, fun, args, leaves, axes, axis_size)
        key = _signature(args, (tuple(axes), size, repr(out_axes), bool(kwargs)))
        plan = plans.get(key)
        if plan is None:
            with lock:  # one trace per signature, whichever thread comes first
                plan = plans.get(key)
                if plan is None:
                    plan = _plan(fun, name, args, in_tree, leaves, axes, size, out_axes,
                                 _reason(plans, key))
                    if plan.cacheable:
                        plans[key] = plan
        return tree_unflatten(plan.traced.out_tree, list(plan(leaves)))

    vmapped._plans = plans
    return vmapped


def _plan(fun, name, args, in_tree, leaves, axes, size, out_axes, reason) -> _Plan:
    """Trace ``fun`` on one example of the batch, then batch its Function."""
    example = [_unbatched_type(aval(x), ax) for x, ax in zip(leaves, axes)]
    traced = trace_pytree(fun, tree_unflatten(in_tree, example), name=name, kind="vmap")
    warn_effects("vmap", fun, traced)
    out_axes = _prefix_axes(traced.out_tree, out_axes, "out_axes", "the output", name)
    for j, (t, ax) in enumerate(zip(traced.function.out_types, out_axes)):
        if ax is not None and not -(t.ndim + 1) <= ax <= t.ndim:
            raise BatchingError(
                f"vmap({name}): out_axes gives axis {ax} for output leaf {j} of shape "
                f"{t.shape} (rank {t.ndim + 1} once batched); valid axes are "
                f"{-(t.ndim + 1)} to {t.ndim}")
    in_axes = (*axes, *(None,) * len(traced.free))  # closed-over values: shared
    try:
        fn = batch(traced.function, in_axes, size, out_axes, name=f"{traced.function.name}_vmap")
    except BatchingError as e:
        raise BatchingError(f"vmap({name}): {e}") from None
    return _Plan(fn, traced, reason=reason)


def _unbatched_type(t: TensorType, axis: int | None) -> TensorType:
    if axis is None:
        return t
    return TensorType(t.shape[:axis] + t.shape[axis + 1:], t.dtype)


def _check_spec(spec, what: str) -> None:
    """Axis specs are ints, None, or containers of them (checked once, at vmap(f))."""
    bad = [x for x in tree_flatten(spec)[0] if not isinstance(x, int) or isinstance(x, bool)]
    if bad:
        raise BatchingError(
            f"vmap: {what} must be an int, None, or a tuple/list/dict of them matching the "
            f"arguments' structure; got {spec!r} (with {bad[0]!r} of type "
            f"{type(bad[0]).__name__})")


def _top_axes(in_axes, nargs: int, name: str) -> tuple:
    if in_axes is None or isinstance(in_axes, int):
        return (in_axes,) * nargs
    if not isinstance(in_axes, tuple | list):
        raise BatchingError(
            f"vmap({name}): in_axes must be an int, None, or a tuple/list with one entry per "
            f"positional argument; got a {type(in_axes).__name__}. To give axes for the parts "
            f"of one argument, wrap it: in_axes=({in_axes!r},)")
    if len(in_axes) != nargs:
        raise BatchingError(
            f"vmap({name}): in_axes has {len(in_axes)} entries but the function was called "
            f"with {nargs} positional argument(s); give one entry per argument (None for an "
            "argument shared by the whole batch), or one int for all of them")
    return tuple(in_axes)


def _prefix_axes(td, spec, where: str, what: str, name: str) -> list:
    """One axis per leaf of the tree ``td``: ``spec`` is a prefix of it (an int or None
    stands for every leaf below it)."""
    if spec is None or isinstance(spec, int):
        return [spec] * td.num_leaves
    node = _node(spec)
    if node is None or td.kind is None or node[0] != td.kind or node[2] != td.aux or len(
            node[1]) != len(td.children):
        raise BatchingError(
            f"vmap({name}): {where} = {spec!r} does not match the structure of {what}, "
            f"{td}; each entry must be an int, None, or a container with exactly that "
            "structure (an int or None stands for a whole sub-structure)")
    out = []
    for k, (child_td, child) in enumerate(zip(td.children, node[1])):
        out += _prefix_axes(child_td, child, f"{where}[{k}]", what, name)
    return out


def _check_axes(name: str, fun, args, leaves, axes) -> list:
    """``axes`` made non-negative; an axis out of range names the argument."""
    out = []
    for k, (x, axis) in enumerate(zip(leaves, axes)):
        shape = aval(x).shape
        if axis is not None and not -len(shape) <= axis < len(shape):
            kind = "a scalar" if not shape else f"shape {shape} (rank {len(shape)})"
            valid = "it has no axis to map: use None" if not shape else (
                f"valid axes are {-len(shape)} to {len(shape) - 1}")
            raise BatchingError(f"vmap({name}): in_axes maps axis {axis} of "
                                f"`{arg_hints(fun, args)[k]}`, which is {kind}; {valid}")
        out.append(None if axis is None else axis % len(shape))
    return out


def _batch_size(name, fun, args, leaves, axes, axis_size) -> int:
    sizes = {aval(x).shape[ax] for x, ax in zip(leaves, axes) if ax is not None}
    if axis_size is not None:
        sizes.add(axis_size)
    if len(sizes) == 1:
        return sizes.pop()
    if not sizes:
        raise BatchingError(
            f"vmap({name}): no argument is mapped (in_axes is None for all of them), so the "
            "batch size is unknown; map at least one argument or pass axis_size=")
    hints = arg_hints(fun, args)
    mapped = [(h, aval(x).shape, ax) for h, x, ax in zip(hints, leaves, axes) if ax is not None]
    lines = [f"  `{h}` of shape {s}, axis {ax}: size {s[ax]}" for h, s, ax in mapped]
    if axis_size is not None:
        lines.append(f"  axis_size={axis_size}")
    raise BatchingError(
        f"vmap({name}): the mapped axes have different sizes:\n" + "\n".join(lines)
        + "\nevery mapped axis must have the same length (the batch size); check in_axes")


def _refuse_grad_tensors(name: str, tree) -> None:
    """No gradient could flow back into an eager graph through vmap: say so, never detach."""
    refused = _grad_tensors(tree)
    if refused:
        raise BatchingError(
            f"vmap({name}): got a Tensor that requires grad (shape "
            f"{tuple(refused[0].shape)}); "
            "fg.vmap runs compiled code that eager autograd cannot see through, so no "
            "gradient would reach it. Pass tensor.detach(), or differentiate with fg.grad "
            "around fg.vmap.")
