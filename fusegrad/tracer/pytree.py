"""Pytrees: nested containers whose leaves are arrays.

Tuples, lists, dicts (also ``OrderedDict`` and ``defaultdict``), NamedTuples,
dataclasses and ``None`` (an empty node) are containers;
``register(cls, flatten, unflatten)`` adds others. Everything else is a leaf.
A ``TreeDef`` is hashable, so it can key caches.

A dict's leaves come in sorted key order, as in JAX, so two equal dicts built in
different orders have equal structures (``tree_map`` over both works, a
cotangent dict may list its keys in any order); unflattening restores the
insertion order of the dict the structure came from. An ``OrderedDict`` keeps
its insertion order, which is part of its structure (as its equality is).
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import Any

from ..ir.types import TensorType, frozen, slotted_reduce

_REGISTRY: dict[type, tuple[Callable, Callable]] = {}
#: Dataclasses that are leaves, not containers.
_LEAF_TYPES: set[type] = {TensorType}
#: Types found to be leaves (arrays, scalars, ...): decided once per type, since a
#: flatten meets the same few leaf types over and over (a training step's state: one
#: ndarray per parameter and moment). ``register`` takes its type out.
_KNOWN_LEAVES: set[type] = set()


def register(cls: type, flatten: Callable, unflatten: Callable) -> type:
    """Register ``cls`` as a container.

    ``flatten(obj) -> (children, aux)`` with hashable ``aux``;
    ``unflatten(aux, children) -> obj``. Returns ``cls``.
    """
    _REGISTRY[cls] = (flatten, unflatten)
    _KNOWN_LEAVES.discard(cls)
    return cls


class TreeDef:
    """Structure of a pytree: node kind, hashable aux data, child structures."""

    __slots__ = ("kind", "aux", "children", "order")  # noqa: RUF023
    kind: Any
    aux: Any
    children: tuple[TreeDef, ...]
    #: A dict's keys in insertion order when that differs from ``aux`` (the sorted keys);
    #: used only to rebuild the dict, so it is not part of equality or the hash.
    order: tuple | None

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce

    def __init__(self, kind: Any, aux: Any, children: tuple[TreeDef, ...],
                 order: tuple | None = None):
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "aux", aux)
        object.__setattr__(self, "children", children)
        object.__setattr__(self, "order", order)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.kind, self.aux, self.children) == (other.kind, other.aux, other.children)

    def __hash__(self) -> int:
        return hash((self.kind, self.aux, self.children))

    @property
    def num_leaves(self) -> int:
        if self.kind is None:
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        inner = ", ".join(map(repr, self.children))
        name = self.kind if isinstance(self.kind, str) else self.kind.__name__
        return f"{name}({inner})"


LEAF = TreeDef(None, None, ())


def _node(x):
    """(kind, children, aux) for a container, or None for a leaf."""
    t = type(x)
    if t in _KNOWN_LEAVES or t in _LEAF_TYPES:
        return None
    if t in _REGISTRY:
        children, aux = _REGISTRY[t][0](x)
        return t, list(children), aux
    if x is None:
        return "none", [], None
    if isinstance(x, tuple) and hasattr(t, "_fields"):
        return t, list(x), None
    if t in (tuple, list):
        return t.__name__, list(x), None
    if t is dict:
        keys = _sorted_keys(x)
        return "dict", [x[k] for k in keys], keys
    if t is collections.OrderedDict:
        keys = tuple(x)
        return t, [x[k] for k in keys], keys
    if t is collections.defaultdict:
        keys = _sorted_keys(x)
        return t, [x[k] for k in keys], (x.default_factory, keys)
    dataclasses = sys.modules.get("dataclasses")  # (none exists while it is not loaded)
    if dataclasses is not None and dataclasses.is_dataclass(x) and not isinstance(x, type):
        names = tuple(f.name for f in dataclasses.fields(x))
        return t, [getattr(x, n) for n in names], names
    _KNOWN_LEAVES.add(t)
    return None


def _sorted_keys(d: dict) -> tuple:
    """``d``'s keys sorted (insertion order if they cannot be compared, e.g. 1 and "a")."""
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def tree_flatten(tree) -> tuple[list, TreeDef]:
    """Leaves in a fixed order (depth first) and the structure to rebuild the tree."""
    leaves: list = []

    def go(x) -> TreeDef:
        node = _node(x)
        if node is None:
            leaves.append(x)
            return LEAF
        kind, children, aux = node
        order = None
        if kind == "dict" and tuple(x) != aux:
            order = tuple(x)
        return TreeDef(kind, aux, tuple(go(c) for c in children), order)

    return leaves, go(tree)


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)

    def build(td: TreeDef):
        if td.kind is None:
            return next(it)
        children = [build(c) for c in td.children]
        kind = td.kind
        if kind == "none":
            return None
        if kind == "tuple":
            return tuple(children)
        if kind == "list":
            return children
        if kind == "dict":
            d = dict(zip(td.aux, children))
            return d if td.order is None else {k: d[k] for k in td.order}
        if kind in _REGISTRY:
            return _REGISTRY[kind][1](td.aux, children)
        if kind is collections.OrderedDict:
            return kind(zip(td.aux, children))
        if kind is collections.defaultdict:
            factory, keys = td.aux
            return kind(factory, zip(keys, children))
        if isinstance(kind, type) and issubclass(kind, tuple):
            return kind(*children)
        return _build_dataclass(kind, dict(zip(td.aux, children)))

    out = build(treedef)
    if next(it, _END) is not _END:
        raise ValueError(f"too many leaves for tree structure {treedef}")
    return out


_END = object()


def _build_dataclass(cls: type, values: dict):
    """``cls(**init fields)``, then the ``init=False`` fields set to their flattened values."""
    import dataclasses  # (loaded: ``cls`` is one)

    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in values.items() if k in init})
    for k, v in values.items():
        if k not in init:
            object.__setattr__(obj, k, v)
    return obj


def tree_flatten_up_to(treedef: TreeDef, tree) -> list:
    """The subtrees of ``tree`` at the leaf positions of ``treedef``, in its leaf order.

    ``None`` in place of a subtree stands for each of its leaves (``None`` each),
    as a zero cotangent does in a VJP rule. Raises ``ValueError`` if ``tree``
    does not have ``treedef``'s structure down to its leaves.
    """
    out: list = []

    def go(td: TreeDef, x) -> None:
        if td.kind is None:
            out.append(x)
            return
        if x is None and td.kind != "none":
            out.extend([None] * td.num_leaves)
            return
        node = _node(x)
        if node is None or node[0] != td.kind or node[2] != td.aux or len(node[1]) != len(
            td.children
        ):
            raise ValueError(f"tree structure {tree_structure(x)} does not match {td}")
        for child_td, child in zip(td.children, node[1]):
            go(child_td, child)

    go(treedef, tree)
    return out


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_map(f: Callable, tree, *rest):
    """Apply ``f`` leafwise to ``tree`` (and the matching leaves of ``rest``)."""
    leaves, td = tree_flatten(tree)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r)
        if rtd != td:
            raise ValueError(f"tree structures differ: {td} vs {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others)])


def tree_structure(tree) -> TreeDef:
    return tree_flatten(tree)[1]
