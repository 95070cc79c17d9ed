"""Writes into traced arrays (``x[idx] = v``) and the views they must not go through.

A traced array is a name for an IR value, so ``x[idx] = v`` records ``x.at[idx].set(v)``
and makes ``x`` name the result. That is NumPy's meaning as long as no other array shares
``x``'s memory, which fusegrad arrays never do: a slice (or reshape, transpose, broadcast,
real/imag part) of a traced array holds its own value. So the writes whose NumPy meaning
this cannot give are refused, never computed differently:

- a write to a function argument (the caller's array would not change) or to an array of
  an enclosing transform;
- a write to a view (in NumPy it would change the array it was taken from);
- reading a view taken before its base was written (in NumPy it would see the write).

The array API standard leaves writes through views to the implementation; code written
for it (SciPy's, for one) writes only into arrays it made itself, which is what works here.
"""

from __future__ import annotations

import weakref

from ..ir.errors import TracerError

#: ``Tracer._alias`` of a function argument or a lifted free value
ARGUMENT = "argument"

#: ops whose NumPy counterparts return views of their first operand
VIEW_OPS = frozenset({"slice", "reshape", "transpose", "broadcast_to", "real", "imag"})


def mark_views(opname: str, operands, outs, tracer_type) -> None:
    """After ``opname`` was recorded: its results are views of its first operand's root
    (the array a chain of views was taken from). The root is held weakly: once nothing
    else holds it, a write through the view can be seen by no one, so it is allowed.
    Its writes are counted in a cell the views hold, so a view taken before a write is
    known to be stale even after the root is gone."""
    if opname in VIEW_OPS and operands and isinstance(operands[0], tracer_type):
        root = _root(operands[0])
        root = operands[0] if root is None else root
        if root._cell is None:
            root._cell = [root.value]
        for t in outs:
            t._alias = (weakref.ref(root), root._cell, root._cell[0])


def _root(t):
    """The live array ``t`` is a view of, or None."""
    return t._alias[0]() if type(t._alias) is tuple else None


def check_view(x) -> None:
    """Refuse to use (as an operand or a result) a view whose root was written to after
    the view was taken."""
    _, cell, seen = x._alias
    if cell[0] is not seen:
        raise TracerError(
            f"a traced {x.value.type} view (a slice, reshape, transpose or broadcast) was "
            "read after the array it was taken from was written to with x[...] = v: in "
            "NumPy the view would see the write, fusegrad's does not. Take the view after "
            "the write, or write with x = x.at[...].set(v) and take views of the result")


def why_not_writable(t, innermost) -> str | None:
    """Why ``t[idx] = v`` cannot be recorded with NumPy's meaning, or None if it can."""
    if t._alias is ARGUMENT:
        return ("it is an argument of the function being transformed (writing to it "
                "cannot change the caller's array)")
    if innermost is not t._trace:
        return "it belongs to an enclosing transform, outside the function being traced"
    if _root(t) is not None:
        return ("it is a view (slice, reshape, transpose, broadcast) of another traced "
                "array, which the write would change in NumPy")
    return None


def set_item(t, idx, value) -> None:
    """``t[idx] = value``: ``t`` becomes the updated array (``why_not_writable`` is None).
    Views taken of ``t`` before (or, for a view whose root is gone, of that root) become
    stale."""
    new = t.at[idx].set(value)
    if type(t._alias) is tuple:
        t._alias[1][0] = new.value
    if t._cell is not None:
        t._cell[0] = new.value
    t._trace, t.value, t._alias, t._cell = new._trace, new.value, None, None
