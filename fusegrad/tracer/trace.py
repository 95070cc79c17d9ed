"""``trace(fn, *example_args) -> Function`` and the pytree-aware variant the API uses."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from ..ir import Function, TensorType
from ..ir.bind import aval, is_weak
from ..ir.errors import ShapeError, TracerConversionError
from ..ir.stats import count_trace, timed
from ..ir.types import fields_repr, frozen, slotted_reduce
from . import gc_pause
from .concrete import Concrete, concrete_leaves
from .core import Trace, Tracer, located
from .effects import Recorder
from .pytree import TreeDef, tree_flatten, tree_unflatten


class Traced:
    """A traced function: its IR plus how to call it with pytrees.

    The Function's parameters are the flattened arguments followed by one
    implicit parameter per object in ``free`` (closed-over arrays and tracers of
    enclosing transforms), which the caller passes after the arguments.
    ``effects`` lists the random draws and clock reads made while tracing
    (``tracer.effects``): their results are constants of this trace. ``guards`` lists
    the traced values the function turned into Python values (``tracer.concrete``).
    """

    __slots__ = ("function", "in_tree", "out_tree", "free", "effects", "guards")  # noqa: RUF023
    function: Function
    in_tree: TreeDef
    out_tree: TreeDef
    free: tuple
    effects: tuple
    guards: tuple  # concrete.Guard s: Python values the trace depends on

    __setattr__ = __delattr__ = frozen
    __reduce__ = slotted_reduce
    __repr__ = fields_repr

    def __init__(self, function: Function, in_tree: TreeDef, out_tree: TreeDef, free: tuple,
                 effects: tuple = (), guards: tuple = ()):
        for field, value in zip(self.__slots__, (function, in_tree, out_tree, free, effects,
                                                 guards)):
            object.__setattr__(self, field, value)


def leaf_type(x) -> TensorType:
    """The abstract type of one argument leaf (arrays, scalars, TensorType, Tensors)."""
    if isinstance(x, TensorType):
        return x
    if is_weak(x) or isinstance(x, np.generic | list):
        return TensorType.of(x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return aval(x)
    raise TypeError(
        f"argument of type {type(x).__name__} is not an array: fusegrad traces NumPy arrays, "
        "Python scalars and pytrees (tuple, list, dict, NamedTuple, dataclass) of them"
    )


def arg_hints(fn: Callable, args: tuple) -> list[str]:
    """Parameter names for the flattened leaves: ``x``, or ``params_0``, ``params_1``, ..."""
    try:
        names = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        names = []
    hints = []
    for i, a in enumerate(args):
        base = names[i] if i < len(names) else f"arg{i}"
        n = len(tree_flatten(a)[0])
        hints += [base] if n == 1 else [f"{base}_{k}" for k in range(n)]
    return hints


def fn_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", "f")
    return name if name.isidentifier() else "f"


@timed("trace")
def trace_pytree(fn: Callable, args: tuple, name: str | None = None, *,
                 concrete: bool = False, kind: str | None = None, wrt=()) -> Traced:
    """Trace ``fn(*args)`` where ``args`` are pytrees of arrays or TensorTypes.

    With ``concrete`` (and arrays, or tracers of enclosing traces, as arguments), Python
    control flow on traced values evaluates them and records guards
    (``tracer.concrete``), and converting a value that depends on the leaves ``wrt``
    (flat indices of the differentiated leaves) raises ``TracerConversionError``;
    ``kind`` names the transform of an abstract trace in errors.
    """
    leaves, in_tree = tree_flatten(tuple(args))
    types = [leaf_type(x) for x in leaves]
    hints = arg_hints(fn, args)
    count_trace(name or fn_name(fn))
    with gc_pause.paused(), Trace(name or fn_name(fn)) as t:
        tracers = [t.new_arg(ty, h) for ty, h in zip(types, hints)]
        t.kind = kind
        if concrete and concrete_leaves(leaves):
            t.source = Concrete(t, leaves, wrt)
            t.source.no_array = _list_leaves(args, tracers)
        try:
            with Recorder(fn) as effects:
                out = fn(*tree_unflatten(in_tree, tracers))
        except (ShapeError, IndexError) as e:  # the user's line, if the op did not give it
            raise located(e, t.name) from None
        except TypeError as e:
            _explain_lists(e, args)
            raise
        except ValueError as e:  # NumPy storing a value into an array raises this from ours
            if isinstance(e.__cause__, TracerConversionError):
                raise e.__cause__.with_traceback(e.__traceback__) from None
            raise
        out_leaves, out_tree = tree_flatten(out)
        results = [t.to_value(_as_output(o)) for o in out_leaves]
    guards = tuple(t.source.guards) if t.source else ()
    t.source = None  # the values evaluated while tracing are not kept
    return Traced(t.builder.build(results), in_tree, out_tree, tuple(t.free_values),
                  tuple(effects.effects), guards)


def _scalar_lists(args: tuple) -> list[int]:
    """The arguments that are Python lists of scalars."""
    return [i for i, a in enumerate(args) if type(a) is list and a and all(
        not isinstance(v, list | tuple | dict) and getattr(v, "shape", ()) == () for v in a)]


def _list_leaves(args: tuple, tracers: list) -> set:
    """The values of the leaves of Python-list arguments: ``np.asarray`` of such a list
    inside the function (``fnp.sum(x)``) is the error ``_explain_lists`` explains, not
    an array of concrete values."""
    starts = [0]
    for a in args:
        starts.append(starts[-1] + len(tree_flatten(a)[0]))
    return {tracers[k].value for i in _scalar_lists(args) for k in range(starts[i], starts[i + 1])}


def _explain_lists(err: TypeError, args: tuple) -> None:
    """Add to ``err`` that a Python list argument is a pytree of scalars, not an array
    (``x * 2`` repeats a list; ``fnp.sum`` of it needs concrete values)."""
    lists = _scalar_lists(args)
    if lists and err.args and isinstance(err.args[0], str):
        i = lists[0]
        err.args = (f"{err.args[0]}\nNote: argument {i} is a Python list, which fusegrad (as "
                    f"JAX) treats as a pytree of {len(args[i])} separate scalars, not as an "
                    "array; pass np.asarray([...]) to give it an array.", *err.args[1:])


def _as_output(x):
    if isinstance(x, Tracer) or (hasattr(x, "shape") and hasattr(x, "dtype")):
        return x
    if is_weak(x) or isinstance(x, np.generic):
        return np.asarray(x)
    raise TypeError(
        f"the traced function returned a {type(x).__name__}; it must return arrays, "
        "scalars or pytrees of them"
    )


def trace(fn: Callable, *example_args) -> Function:
    """The IR of ``fn`` for arguments like ``example_args`` (arrays, scalars, TensorTypes).

    >>> import numpy as np
    >>> print(trace(lambda x: (x * x).sum(), TensorType((3,), np.float64)))
    func @f(%x: f64[3]) -> f64[] {
      %0 = mul %x, %x : f64[3]
      %1 = reduce_sum %0 {axes=[0]} : f64[]
      return %1
    }
    """
    return trace_pytree(fn, example_args).function
