"""Which flattened arguments of a ``jit`` call are donated (``donate_argnums``)."""

from __future__ import annotations

from ..ir.errors import FusegradError
from ..tracer.pytree import tree_flatten


def donated_leaves(args: tuple, static_argnums: tuple, donate_argnums: tuple) -> frozenset[int]:
    """Indices, among the leaves of the dynamic arguments, of those inside donated ones.

    ``donate_argnums`` count positional arguments as the user passes them; donating a
    static argument is an error (as in JAX).
    """
    if not donate_argnums:
        return frozenset()
    n = len(args)
    static = {i % n for i in static_argnums} if n else set()
    donate = set()
    for i in donate_argnums:
        if not -n <= i < n:
            raise FusegradError(f"jit: donate_argnums {i} is out of range for {n} arguments")
        if i % n in static:
            raise FusegradError(f"jit: argument {i % n} is static and cannot be donated")
        donate.add(i % n)
    out, start = set(), 0
    for i, a in enumerate(args):
        if i in static:
            continue
        k = tree_flatten(a)[0].__len__()
        if i in donate:
            out.update(range(start, start + k))
        start += k
    return frozenset(out)
