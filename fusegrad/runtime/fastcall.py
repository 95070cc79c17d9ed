"""A cheap call signature for a seen argument structure: one walk, key and leaves.

The transforms key their traces by the flattened argument structure, shapes and
dtypes, built by ``tree_flatten``, ``_leaf`` and ``aval`` over every leaf: tens of
microseconds on a call of a few Python floats or a dict of parameters. ``flatten``
walks the arguments once and returns an equivalent key (a new structure, shape,
dtype or scalar type gives a new key) and the leaves in ``tree_flatten``'s order
(``arrays`` converts the scalars among them as ``_leaf`` does); or None for anything
else (other leaf types, registered or dataclass nodes, dicts whose keys do not sort),
and the general path is taken.
"""

from __future__ import annotations

import numpy as np

from ..tracer.pytree import _REGISTRY

#: Python scalars, as ``_leaf`` takes them: 0-d arrays of NumPy's default types
_SCALARS = frozenset((float, int, bool, complex))
#: NumPy scalar types taken as 0-d arrays of their own dtype
_NUMPY_SCALARS = frozenset(t for t in np.sctypeDict.values()
                           if issubclass(t, np.number | np.bool_)
                           and not issubclass(t, np.timedelta64))
_INT64 = (-(1 << 63), 1 << 63)
#: the scalars ``_walk`` takes without a call (not ``int``: its range is checked)
_INLINE = frozenset((float, complex, bool, *_NUMPY_SCALARS))


def flatten(args) -> tuple | None:
    """``(key, leaves)`` of the arguments ``args`` (a tuple), or None. The leaves are the
    arguments' own objects: ``arrays`` makes the scalars 0-d arrays."""
    leaves: list = []
    key = _walk(args, leaves)
    return None if key is None else (key, leaves)


def arrays(leaves: list) -> list:
    """``flatten``'s leaves as the compiled code takes them: scalars as 0-d arrays (as
    ``_leaf`` makes them)."""
    return [x if type(x) is np.ndarray else np.asarray(x) for x in leaves]


#: a dict's keys in insertion order -> sorted (the order of its leaves), for dicts seen
_SORTED: dict[tuple, list] = {}
_SORTED_MAX = 1024


def _walk(x, leaves: list):
    """The key of container ``x`` (or of a leaf at the top), its leaves appended to
    ``leaves`` in ``tree_flatten``'s order; None if it is not taken."""
    t = type(x)
    if t is tuple or t is list:
        items, head = x, t
    elif t is dict:
        order = tuple(x)  # insertion order too: the dicts rebuilt follow it
        names = _SORTED.get(order)
        if names is None:
            try:
                names = sorted(x)
            except TypeError:
                return None
            if len(_SORTED) < _SORTED_MAX:
                _SORTED[order] = names
        items = list(map(x.__getitem__, names))  # (a comprehension is a frame more)
        head = ("dict", order)
    elif x is None:
        return "none"
    elif isinstance(x, tuple) and hasattr(t, "_fields") and t not in _REGISTRY:
        items, head = x, t
    else:
        return _leaf(x, t, leaves)
    key = [head]
    if len(items) >= 8:  # many scalars (a dict of parameters): no loop here
        types = list(map(type, items))
        if _INLINE.issuperset(types):
            leaves.extend(items)
            key.extend(types)
            return tuple(key)
    add_key, add_leaf, ndarray, scalars = key.append, leaves.append, np.ndarray, _INLINE
    for item in items:
        s = type(item)
        if s is ndarray:  # (the leaves inline: a call per leaf costs as much again)
            add_leaf(item)
            add_key((item.shape, item.dtype))
        elif s in scalars:
            add_leaf(item)
            add_key(s)
        else:
            sub = _walk(item, leaves)
            if sub is None:
                return None
            add_key(sub)
    return tuple(key)


def _leaf(x, t, leaves: list):
    if t is np.ndarray:
        leaves.append(x)
        return x.shape, x.dtype
    if t in _SCALARS or t in _NUMPY_SCALARS:
        if t is int and not _INT64[0] <= x < _INT64[1]:
            return None  # (not an int64)
        leaves.append(x)
        return t
    return None


def signature(args: tuple):
    """``flatten``'s key for ``args`` if every argument is an ndarray or a tuple or list of
    them (``jit``'s cheapest signature), else None."""
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.shape, a.dtype))
        elif t is tuple or t is list:
            sub = []
            for b in a:
                if type(b) is not np.ndarray:
                    return None
                sub.append((b.shape, b.dtype))
            key.append((t, *sub))
        else:
            return None
    return (tuple, *key)


def leaves(args: tuple) -> list:
    """The leaves of arguments ``signature`` took."""
    out = []
    for a in args:
        if type(a) is np.ndarray:
            out.append(a)
        else:
            out.extend(a)
    return out
