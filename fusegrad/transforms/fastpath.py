"""How ``value_and_grad`` (and ``grad``) run a call of a seen signature cheaply.

Three paths, cheapest first: the native caller of the last signature
(``LeanExecutable.native_caller``: the whole call in machine code, for arguments
that are arrays or scalars), the fast caller per ndarray signature
(``LeanExecutable.fast_caller``) and the cached call per argument structure
(``_tree_entry``, keyed by ``runtime.fastcall.flatten``: pytrees, scalars, keyword
arguments). ``reverse.value_and_grad`` keeps their caches; these build their entries.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from ..runtime import fastcall
from ..tracer.pytree import tree_flatten, tree_unflatten


def _ndarray_key(args):
    """The fast-path key of ``args`` if all are plain ndarrays, else None."""
    key = []
    for a in args:
        if type(a) is not np.ndarray:
            return None
        key.append((a.shape, a.dtype))
    return tuple(key)


def _kwargs_key(kwargs: dict) -> tuple | None:
    """The part of a trace's key that keyword arguments make (they are constants of the
    trace: ``functools.partial``): their names, types and values, or None (not cached)
    unless all are Python scalars, strings or None."""
    key = []
    for name, v in kwargs.items():
        if type(v) not in _KEYWORD_TYPES or v != v:  # (a NaN: never equal to a key)
            return None
        key.append((name, type(v), v))
    return tuple(key)


_KEYWORD_TYPES = frozenset((float, int, bool, complex, str, type(None)))


def _tree_entry(plan, args, kwargs, nums, single: bool) -> tuple | None:
    """``(key, entry)`` for ``trees`` of ``value_and_grad``, for a call of ``plan`` with
    (unconverted) ``args`` and ``kwargs``. The entry: its fast caller, its native caller
    of all results as a tuple (or None), its number of values, their structure, the
    structure and count of each differentiated argument's leaves, and where the
    arguments are leaves and there are no keyword arguments its ``_natives`` (else
    None). None where the plan is not reused as it is (guards, closed-over values,
    effects, no compiled code) or ``fastcall`` does not take the arguments. The
    structures are ``rebuilder`` functions of the results."""
    if (plan.exe is None or plan.interpret or not plan.cacheable or plan.traced.free
            or plan.traced.guards or getattr(plan.exe, "fast_caller", None) is None):
        return None
    flat = fastcall.flatten(args)
    kw = _kwargs_key(kwargs)
    if flat is None or kw is None:
        return None
    leaves = fastcall.arrays(flat[1])
    specs = [(p.type.shape, p.type.dtype) for p in plan.fn.params[:len(leaves)]]
    if specs != [(a.shape, a.dtype) for a in leaves]:
        return None
    grad_trees = []
    for i in nums:
        sub, td = tree_flatten(args[i])
        grad_trees.append((rebuilder(td), len(sub)))
    n = len(plan.traced.function.results)
    make = getattr(plan.exe, "native_caller", None)
    whole = make(plan.extra, 0, as_tuple=True) if make is not None else None
    natives = None
    if not kwargs and len(flat[1]) == len(args) and all(
            a is b for a, b in zip(args, flat[1])):
        natives = _natives(plan, n, single)
        natives = None if natives[0] is None else natives
    return (flat[0], kw), (_fast_caller(plan), whole, n, rebuilder(plan.traced.out_tree),
                           grad_trees, natives)


def _natives(plan, n: int, single: bool) -> tuple:
    """``(value and gradients, gradients only)``: the native callers of ``plan`` (its
    results as one tuple; its gradients alone, the one or a tuple as ``grad`` returns
    them), or Nones where its executable has none."""
    make = getattr(plan.exe, "native_caller", None)
    if make is None or n != 1:
        return None, None
    return (make(plan.extra, 0, as_tuple=True),
            make(plan.extra, n, as_tuple=not single))


def _fast_caller(plan):
    """``caller(args, first)``: the plan's compiled code on ndarray arguments of its types,
    its results from ``first`` on (``LeanExecutable.fast_caller``, or the general call)."""
    exe, extra = plan.exe, plan.extra
    caller = exe.fast_caller(extra)
    if caller is None:
        def caller(args, first):
            return exe.call_unchecked((*args, *extra))[first:]
    return caller


def rebuilder(td):
    """``rebuild(leaves)``: the tree of structure ``td`` (as ``tree_unflatten``), made
    once per structure. Each container is one Python call taking its leaves from an
    iterator by C calls, where ``tree_unflatten`` makes a call per leaf and a
    comprehension per container: 5 µs for a dict of 20 parameters."""
    if td.kind is None:
        return operator.itemgetter(0)
    part = _part(td)
    return lambda leaves: part(iter(leaves))


def _part(td):
    """``part(it)``: the subtree ``td`` from the leaves of iterator ``it`` (a leaf: ``next``)."""
    kind = td.kind
    if kind is None:
        return next
    parts = [_part(c) for c in td.children]
    n = len(parts)

    def values(it):
        return map(operator.call, parts, itertools.repeat(it, n))

    if kind == "tuple":
        return lambda it: tuple(values(it))
    if kind == "list":
        return lambda it: list(values(it))
    if kind == "dict":
        keys, order = td.aux, td.order
        if order is None:
            return lambda it: dict(zip(keys, values(it)))
        # built in the caller's order at once: the leaf of each key in that order
        at = operator.itemgetter(*(list(keys).index(k) for k in order))
        if len(order) == 1:
            return lambda it: dict(zip(order, (at(list(values(it))),)))
        return lambda it: dict(zip(order, at(list(values(it)))))
    count = td.num_leaves  # other containers: as tree_unflatten builds them
    return lambda it: tree_unflatten(td, [next(it) for _ in range(count)])

