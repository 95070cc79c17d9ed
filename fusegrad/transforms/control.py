"""Traced control flow: ``cond``, ``while_loop``, ``fori_loop``, ``scan``, and ``checkpoint``.

Under a transform each call traces its functions into regions of one IR op
(``cond``, ``while_loop``, ``scan``; see ``fusegrad.ir.control_ops``), so the
branch or loop is compiled as a native branch or loop instead of being
unrolled, its bounds may be traced values, and reverse mode runs through it.
Values the functions close over become explicit operands of the op.

Outside any transform the functions just run in Python (on NumPy arrays,
scalars or eager Tensors, whose autograd records the iterations taken), with
the same checks of carry structure and types.

The contracts follow ``jax.lax``: ``cond(pred, true_fn, false_fn, *operands)``,
``while_loop(cond_fun, body_fun, init_val)``, ``fori_loop(lower, upper,
body_fun, init_val)`` (``body_fun(i, val)``), ``scan(f, init, xs, length=None,
reverse=False)`` with ``f(carry, x) -> (carry, y)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..ir import TensorType, Value, ops
from ..ir import array as A
from ..ir.bind import is_weak
from ..ir.errors import FusegradError
from ..tracer.core import tracing
from ..tracer.pytree import tree_flatten, tree_unflatten
from ..tracer.trace import Traced, leaf_type, trace_pytree


class ControlFlowError(FusegradError, TypeError):
    """Functions given to cond / while_loop / fori_loop / scan that do not fit together."""


__all__ = ["ControlFlowError", "checkpoint", "cond", "fori_loop", "scan", "while_loop"]


# --- helpers ------------------------------------------------------------------------


def _leaves(tree) -> tuple[list, object]:
    leaves, td = tree_flatten(tree)
    return [np.asarray(x) if is_weak(x) or isinstance(x, np.generic | list) else x
            for x in leaves], td


def _types(leaves) -> list[TensorType]:
    return [leaf_type(x) for x in leaves]


def _trace(fn: Callable, args: tuple, name: str, who: str) -> Traced:
    try:
        return trace_pytree(fn, args, name=name, kind="control")
    except TypeError as e:
        if "the traced function returned" in str(e):
            raise ControlFlowError(f"{who}: {e}") from None
        raise


def _close(traced: list[Traced], n_explicit: int) -> tuple[list, list]:
    """Give every region the same parameters: the explicit ones, then every value any of
    them closes over (a region ignores the ones it does not use)."""
    objs: list = []
    index: dict[int, int] = {}
    for t in traced:
        for o in t.free:
            if id(o) not in index:
                index[id(o)] = len(objs)
                objs.append(o)
    fns = []
    for t in traced:
        f = t.function
        own = dict(zip((id(o) for o in t.free), f.params[n_explicit:]))
        extra = tuple(own[id(o)] if id(o) in own else Value(leaf_type(o)) for o in objs)
        fns.append(f.replace(params=f.params[:n_explicit] + extra))
    return fns, objs


def _tuple(out, n: int) -> tuple:
    return out if n != 1 else (out,)


def _describe(td, types) -> str:
    return f"{td} with leaves ({', '.join(map(str, types))})"


def _check_same(who: str, what_in: str, what_out: str, td_in, types_in, td_out, types_out,
                fix: str) -> None:
    """JAX's carry check: equal pytree structure, then equal leaf types."""
    if td_in != td_out:
        raise ControlFlowError(
            f"{who}: {what_in} and {what_out} must have the same pytree structure, but "
            f"{what_in} is {td_in} and {what_out} is {td_out}. {fix}"
        )
    diffs = [f"leaf {k}: {a} vs {b}" for k, (a, b) in enumerate(zip(types_in, types_out))
             if a != b]
    if diffs:
        raise ControlFlowError(
            f"{who}: {what_in} and {what_out} must have equal types (shapes and dtypes), "
            f"but they differ at {'; '.join(diffs)} ({what_in} first). {fix}"
        )


def _eager_types(tree):
    leaves, td = tree_flatten(tree)
    return td, [TensorType(np.shape(x), _np_dtype(x)) for x in leaves]


def _np_dtype(x):
    d = getattr(x, "dtype", None)
    if d is None:
        return np.asarray(x).dtype
    return d if isinstance(d, np.dtype) else np.dtype(getattr(d, "dtype", d))


def _check_pred(who: str, what: str, t: TensorType) -> None:
    if t.shape != () or not (t.dtype == np.bool_ or np.issubdtype(t.dtype, np.integer)):
        raise ControlFlowError(f"{who}: {what} must be a boolean or integer scalar, got {t}")


def _concrete_truth(who: str, what: str, p) -> bool:
    _check_pred(who, what, TensorType(np.shape(p), _np_dtype(p)))
    return bool(p)


# --- cond ---------------------------------------------------------------------------


def cond(pred, true_fn: Callable, false_fn: Callable, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, as one traced op.

    ``pred`` is a boolean or integer scalar; both functions must return the same
    pytree structure with equal shapes and dtypes. Under a transform both are traced
    and the op selects at run time; the gradient flows through the branch taken.
    """
    who = "fg.cond"
    if not tracing():
        taken = true_fn if _concrete_truth(who, "pred", pred) else false_fn
        return taken(*operands)
    leaves, td = _leaves(operands)
    args = tree_unflatten(td, _types(leaves))
    tt = _trace(true_fn, tuple(args), "true_branch", who)
    ft = _trace(false_fn, tuple(args), "false_branch", who)
    _check_same(who, "true_fn's output", "false_fn's output", tt.out_tree,
                tt.function.out_types, ft.out_tree, ft.function.out_types,
                "Make both branches return the same structure, shapes and dtypes.")
    (pred_leaf,), _ = _leaves(pred)
    _check_pred(who, "pred", leaf_type(pred_leaf))
    (tf, ff), free = _close([tt, ft], len(leaves))
    out = ops.cond(pred_leaf, *leaves, *free, regions=(tf, ff))
    return tree_unflatten(tt.out_tree, list(_tuple(out, len(tf.results))))


# --- while_loop ---------------------------------------------------------------------


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``val = init_val; while cond_fun(val): val = body_fun(val)``, as one traced op.

    ``body_fun`` must return the structure, shapes and dtypes of ``init_val``;
    ``cond_fun`` a boolean scalar. Reverse-mode differentiable (the forward pass keeps
    one carry per iteration; see docs/control_flow.md).
    """
    return _while("fg.while_loop", cond_fun, body_fun, init_val)


_CARRY_FIX = "Revise the body so that it returns values of the same structure, shapes and " \
             "dtypes as the carry it receives (cast with .astype if a dtype changed)."


def _while(who: str, cond_fun, body_fun, init_val):
    if not tracing():
        td, types = _eager_types(init_val)
        val = init_val
        while _concrete_truth(who, "cond_fun's result", cond_fun(val)):
            val = body_fun(val)
            _check_same(who, "the carry input", "body_fun's output (the carry output)",
                        td, types, *_eager_types(val), _CARRY_FIX)
        return val
    leaves, td = _leaves(init_val)
    types = _types(leaves)
    carry = tree_unflatten(td, types)
    ct = _trace(cond_fun, (carry,), "cond", who)
    outs = ct.function.out_types
    if len(outs) != 1:
        raise ControlFlowError(f"{who}: cond_fun must return a boolean scalar, but it "
                               f"returned {_describe(ct.out_tree, outs)}")
    _check_pred(who, "cond_fun's result", outs[0])
    bt = _trace(body_fun, (carry,), "body", who)
    _check_same(who, "the carry input", "body_fun's output (the carry output)", td, types,
                bt.out_tree, bt.function.out_types, _CARRY_FIX)
    (cf, bf), free = _close([ct, bt], len(leaves))
    out = ops.while_loop(*leaves, *free, regions=(cf, bf), num_carry=len(leaves))
    return tree_unflatten(td, list(_tuple(out, len(leaves))))


# --- fori_loop ----------------------------------------------------------------------


def _is_static(x) -> bool:
    return isinstance(x, int | np.integer) or (
        isinstance(x, np.ndarray) and x.ndim == 0 and np.issubdtype(x.dtype, np.integer))


def fori_loop(lower, upper, body_fun: Callable, init_val):
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``.

    With Python int bounds the loop is a ``scan`` of ``upper - lower`` steps
    (differentiable to any order); with traced bounds it is a ``while_loop`` on a
    counter (reverse mode records the trip count). ``i`` is an int64 scalar.
    """
    who = "fg.fori_loop"
    for name, b in (("lower", lower), ("upper", upper)):
        t = leaf_type(np.asarray(b) if is_weak(b) else b)
        if t.shape != () or not np.issubdtype(t.dtype, np.integer):
            raise ControlFlowError(f"{who}: {name} must be an integer scalar, got {t}")
    if not tracing():
        val = init_val
        td, types = _eager_types(init_val)
        for i in range(int(lower), int(upper)):
            val = body_fun(i, val)
            _check_same(who, "the carry input", "body_fun's output (the carry output)",
                        td, types, *_eager_types(val), _CARRY_FIX)
        return val
    if _is_static(lower) and _is_static(upper):
        lo, n = int(lower), max(int(upper) - int(lower), 0)

        def step(carry, _):
            i, val = carry
            return (i + 1, body_fun(i, val)), None

        (_, val), _ = _scan(who, step, (np.int64(lo), init_val), None, n, False)
        return val
    lo = lower if _np_dtype(lower) == np.int64 else ops.convert(lower, dtype="i64")

    def body(carry):
        i, val = carry
        return i + 1, body_fun(i, val)

    _, val = _while(who, lambda c: c[0] < upper, body, (lo, init_val))
    return val


# --- scan ---------------------------------------------------------------------------


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False):
    """``f(carry, x) -> (carry, y)`` over the leading axis of ``xs``; returns
    ``(carry, ys)`` with the ``y``s stacked along a new leading axis.

    ``xs`` may be a pytree of arrays (equal leading sizes) or None with ``length``
    given; ``reverse`` scans from the end (``ys`` stay in input order).
    """
    xs_leaves, _ = _leaves(xs)
    sizes = sorted({int(np.shape(x)[0]) if np.ndim(x) else -1 for x in xs_leaves})
    if -1 in sizes:
        raise ControlFlowError("fg.scan: every leaf of xs must have a leading axis to scan "
                               "over, but one is a scalar")
    if len(sizes) > 1:
        raise ControlFlowError(f"fg.scan: got values with different leading axis sizes: "
                               f"{', '.join(map(str, sizes))}")
    if length is not None and sizes and sizes[0] != length:
        raise ControlFlowError(f"fg.scan: got `length` argument of {length} which disagrees "
                               f"with leading axis sizes {sizes}")
    if length is None and not sizes:
        raise ControlFlowError("fg.scan: got no values to scan over and `length` not provided")
    n = int(length) if length is not None else sizes[0]
    return _scan("fg.scan", f, init, xs, n, bool(reverse))


def _split_pair(who: str, td) -> tuple:
    if td.kind not in ("tuple", "list") or len(td.children) != 2:
        raise ControlFlowError(f"{who}: the scanned function must return a pair (carry, y), "
                               f"got structure {td}")
    return td.children


def _scan(who: str, f, init, xs, n: int, reverse: bool):
    xs_leaves, xs_td = _leaves(xs)
    if not tracing() and n > 0:
        return _scan_eager(who, f, init, xs_leaves, xs_td, n, reverse)
    leaves, td = _leaves(init)
    types = _types(leaves)
    x_types = [TensorType(t.shape[1:], t.dtype) for t in _types(xs_leaves)]
    st = _trace(f, (tree_unflatten(td, types), tree_unflatten(xs_td, x_types)), "step", who)
    carry_td, y_td = _split_pair(who, st.out_tree)
    outs = st.function.out_types
    _check_same(who, "the carry input", "the carry output", td, types, carry_td,
                outs[:carry_td.num_leaves], _CARRY_FIX)
    (body,), free = _close([st], len(leaves) + len(xs_leaves))
    out = _tuple(ops.scan(*leaves, *xs_leaves, *free, regions=(body,), length=n,
                          num_carry=len(leaves), num_xs=len(xs_leaves), reverse=reverse),
                 len(body.results))
    nc = len(leaves)
    return tree_unflatten(td, list(out[:nc])), tree_unflatten(y_td, list(out[nc:]))


def _scan_eager(who, f, init, xs_leaves, xs_td, n, reverse):
    td, types = _eager_types(init)
    carry, ys, y_td = init, [], None
    for it in range(n):
        t = n - 1 - it if reverse else it
        out = f(carry, tree_unflatten(xs_td, [x[t] for x in xs_leaves]))
        _, y_td = _split_pair(who, tree_flatten(out)[1])
        carry, y = out
        _check_same(who, "the carry input", "the carry output", td, types,
                    *_eager_types(carry), _CARRY_FIX)
        ys.append(tree_flatten(y)[0])
    if reverse:
        ys.reverse()
    stacked = [A.stack([y[k] for y in ys]) for k in range(y_td.num_leaves)]
    return carry, tree_unflatten(y_td, stacked)


# --- checkpoint ---------------------------------------------------------------------


def checkpoint(fun: Callable) -> Callable:
    """``fun`` whose reverse mode recomputes its forward pass instead of keeping its
    intermediate values (rematerialisation): the same values and gradients, less memory
    between the forward and backward passes, one more forward evaluation of ``fun``."""

    @functools.wraps(fun)
    def checkpointed(*args):
        if not tracing():
            return fun(*args)
        leaves, td = _leaves(args)
        t = _trace(fun, tuple(tree_unflatten(td, _types(leaves))),
                   getattr(fun, "__name__", "f") if str(getattr(fun, "__name__", "f"))
                   .isidentifier() else "f", "fg.checkpoint")
        (body,), free = _close([t], len(leaves))
        out = ops.checkpoint(*leaves, *free, regions=(body,))
        return tree_unflatten(t.out_tree, list(_tuple(out, len(body.results))))

    return checkpointed
