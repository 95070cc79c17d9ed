"""Pytree utilities: ``fg.tree.register`` for your own container classes, flatten, map."""

from .tracer.pytree import (
    TreeDef,
    register,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)

flatten, unflatten, leaves, map, structure = (
    tree_flatten, tree_unflatten, tree_leaves, tree_map, tree_structure,
)

__all__ = ["TreeDef", "flatten", "leaves", "map", "register", "structure", "tree_flatten",
           "tree_leaves", "tree_map", "tree_structure", "tree_unflatten", "unflatten"]
