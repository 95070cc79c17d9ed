"""What every transform runs on: argument leaves, signatures and ``_Plan``.

A transform (``reverse``, ``forward``, ``vectorize``, ``jit_api``, ``eager.jit_eager``)
traces the user's function to IR (``tracer``), applies IR passes
(``passes.autodiff``, ``passes.batching``) and wraps the result in a ``_Plan``:
compiled on concrete arrays (the NumPy interpreter under
``FUSEGRAD_DISABLE_JIT``), inlined into the enclosing trace when given tracers,
which is what makes nested transforms of closures correct.
"""

from __future__ import annotations

import functools
import os
import threading
import types
import warnings
from collections.abc import Callable

import numpy as np

from .. import config
from ..ir import Function, evaluate, ops
from ..ir.bind import aval, is_weak
from ..ir.errors import FusegradError
from ..ir.types import TensorType
from ..passes.autodiff import vjp as _vjp_pass
from ..passes.simplify import simplify
from ..runtime import pass_cache
from ..runtime.compiled import CodegenError, executable
from ..tracer import Tracer
from ..tracer.core import _state as _trace_state
from ..tracer.effects import describe as _describe_effects
from ..tracer.pytree import tree_flatten, tree_unflatten


class GradError(FusegradError, TypeError):
    """A transform was asked for something it cannot do (non-scalar grad, int inputs...)."""


# --- eager Tensors as arguments ----------------------------------------------------
# The eager face sits above the transforms: ``fusegrad.eager`` registers its Tensor
# class here when it is imported (as array classes register with ``ir.bind``), so
# transforms take Tensors without importing eager code.

_EAGER_TYPES: tuple[type, ...] = ()
_EAGER_HOOKS: dict[str, Callable] = {}


def register_eager_tensor(cls: type, *, data: Callable, grad_enabled: Callable) -> None:
    """Let transforms take instances of ``cls`` as arguments: ``data(x)`` is the NumPy
    array one counts as (no gradient flows back into its autograd graph), and while
    ``grad_enabled()`` those with ``requires_grad`` set are refused where a transform
    could not give them a gradient (``_grad_tensors``)."""
    global _EAGER_TYPES
    _EAGER_TYPES = (*_EAGER_TYPES, cls)
    _EAGER_HOOKS.update(data=data, grad_enabled=grad_enabled)


def _grad_tensors(tree) -> list:
    """The eager Tensors in ``tree`` that require grad, while grad mode is on."""
    if not _EAGER_TYPES or not _EAGER_HOOKS["grad_enabled"]():
        return []
    return grad_leaves(tree_flatten(tree)[0])


def grad_leaves(leaves: list) -> list:
    """The eager Tensors among ``leaves`` that require grad, while grad mode is on."""
    if not _EAGER_TYPES or not _EAGER_HOOKS["grad_enabled"]():
        return []
    return [x for x in leaves if isinstance(x, _EAGER_TYPES) and x.requires_grad]


# --- execution ---------------------------------------------------------------------


def vjp_pass(fn: Function, wrt, seeds=None, name=None) -> Function:
    """Reverse mode, then simplification: the gradient IR every transform executes
    (read back from the pass cache when a process made it before: ``pass_cache.vjp``)."""
    return pass_cache.vjp(fn, wrt, seeds, name,
                          lambda: simplify(_vjp_pass(fn, wrt, seeds=seeds, name=name)))


def _run_checked(fn: Function, *args):
    """``fn`` run by the interpreter, checking every op for NaNs (``FUSEGRAD_DEBUG_NANS``,
    whose module loads with its first use)."""
    from ..runtime.debug_nans import run_checked

    return run_checked(fn, *args)


def _concrete(x) -> bool:
    return not isinstance(x, Tracer)


def call(fn: Function, *args) -> tuple:
    """Execute ``fn``: compiled (or with NumPy if ``FUSEGRAD_DISABLE_JIT``) on concrete
    arrays; recorded into the enclosing trace otherwise. Eager Tensors (closed over by
    the function) count as their data."""
    args = tuple(_leaf(a) if isinstance(a, _EAGER_TYPES) else a for a in args)
    if all(_concrete(a) for a in args) and not _trace_state.stack:
        if config.DISABLE_JIT:
            return _run_checked(fn, *args)
        return executable(fn)(*args)
    return evaluate(fn, *args)


def _leaf(x):
    """Normalise one argument leaf: Python scalars and lists become NumPy arrays.

    An eager ``Tensor`` counts as its data (no gradient flows back into its
    autograd graph; ``fg.jit`` refuses tensors that require grad).
    """
    if isinstance(x, Tracer | np.ndarray | TensorType):
        return x
    if isinstance(x, _EAGER_TYPES):
        return _EAGER_HOOKS["data"](x)
    if hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__array__"):
        return np.asarray(x)
    if is_weak(x) or isinstance(x, np.generic | list):
        return np.asarray(x)
    raise TypeError(
        f"fusegrad cannot take an argument of type {type(x).__name__}; pass NumPy arrays, "
        "Python scalars or pytrees (tuple, list, dict, NamedTuple, dataclass) of them"
    )


def _argnums_tuple(argnums, nargs: int, who: str, what: str = "argnums",
                   error: type[Exception] = GradError) -> tuple[int, ...]:
    """``argnums`` (an int or ints, negative counting from the end) as indices."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise error(f"{who}: {what}={argnums} but the function was called with "
                        f"{nargs} positional argument(s)")
    return tuple(i % nargs for i in nums)


def _diff_leaves(args, argnums, who) -> list[int]:
    """Flat leaf indices of the differentiated arguments, in ``argnums`` order.

    That is the order ``_structure_grads`` reads the cotangents back in, so
    ``argnums=(1, 0)`` (or a repeated index) gives the gradients in that order.
    Integer inputs are an error.
    """
    flat = [tree_flatten(a)[0] for a in args]
    starts = [sum(len(leaves) for leaves in flat[:i]) for i in range(len(args))]
    idx = []
    for i in argnums:
        leaves = flat[i]
        for k, leaf in enumerate(leaves):
            dt = aval(leaf).dtype
            if not np.issubdtype(dt, np.inexact):
                where = f"argument {i}" + (f" (leaf {k})" if len(leaves) > 1 else "")
                raise GradError(
                    f"{who}: {where} has dtype {dt}, and only floating-point (or complex) "
                    "inputs can be differentiated. Pass it as a float array (e.g. x.astype(float)) "
                    "or leave it out of argnums."
                )
            idx.append(starts[i] + k)
    return idx


def _signature(args, extra=()):
    """A hashable key for the structure, shapes and dtypes of ``args`` (already leaves)."""
    leaves, td = tree_flatten(args)
    return td, tuple((aval(x).shape, aval(x).dtype) for x in leaves), extra


class _Plan:
    """A transformed Function with what calling it needs: closed-over arrays after the
    arguments, then ``extra`` (e.g. the seed cotangent). Runs compiled code (compiled
    on first use), the interpreter with ``FUSEGRAD_DISABLE_JIT``, or inlines into the
    enclosing trace when given tracers."""

    __slots__ = ("donated", "exe", "extra", "fn", "interpret", "kept", "reason", "traced")

    def __init__(self, fn: Function, traced, extra: tuple = (), reason: str = "new function",
                 donated: frozenset[int] = frozenset(), kept: bool = False):
        self.fn, self.traced, self.extra, self.exe = fn, traced, extra, None
        self.reason, self.donated = reason, donated
        self.kept = kept  # reused even if tracing met side effects (jit): worth compiling
        self.interpret = False  # used once (guards fail on nearly every call): not compiled

    @property
    def reusable(self) -> bool:
        """False when it closes over a tracer of an enclosing trace (valid only there)."""
        return not any(isinstance(x, Tracer) for x in self.traced.free)

    @property
    def cacheable(self) -> bool:
        """Reusable, and tracing drew no random numbers and read no clock (``tracer.effects``):
        reusing such a trace would replay the same draws on every call."""
        return self.reusable and not self.traced.effects

    def __call__(self, leaves) -> tuple:
        args = (*leaves, *self.traced.free, *self.extra)
        if _trace_state.stack or not all(_concrete(a) for a in leaves):
            return evaluate(self.fn, *args)
        if config.DISABLE_JIT or self.interpret or (self.traced.effects and not self.kept):
            return _run_checked(self.fn, *args)
        if self.exe is None:
            self.exe = executable(self.fn, self.reason, self.donated)
        return self.exe(*args)


def _reason(cache: dict, key) -> str:
    """Why a signature needs a new compile: the first one, or what differs from the last."""
    if not cache:
        return "new function"
    last = next(reversed(cache))
    if not isinstance(last, tuple) or len(last) < 2 or last[0] != key[0]:
        return "new argument structure"
    old, new = [_shape_dtype(t) for t in last[1]], [_shape_dtype(t) for t in key[1]]
    if [t[1] for t in old] != [t[1] for t in new]:
        return "new dtype"
    return "new shape" if old != new else "new static arguments or state"


def _shape_dtype(t) -> tuple:
    """``(shape, dtype)`` of one argument's key: an aval, ``(shape, dtype)`` or an eager
    Tensor's ``("T", shape, dtype, requires_grad)``; ``(None, None)`` for other kinds."""
    if hasattr(t, "dtype"):
        return t.shape, np.dtype(t.dtype)
    if isinstance(t, tuple) and len(t) == 4 and t[0] == "T":
        return t[1], np.dtype(t[2])
    if isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], tuple):
        return t[0], np.dtype(t[1])
    return None, None


def _ones_like(x):
    t = aval(x)
    return ops.broadcast_to(np.ones((), t.dtype), shape=t.shape)


def _structure_grads(args, argnums, flat_grads, single: bool):
    out, it = [], iter(flat_grads)
    for i in argnums:
        leaves, td = tree_flatten(args[i])
        out.append(tree_unflatten(td, [next(it) for _ in leaves]))
    return out[0] if single else tuple(out)


class SideEffectWarning(UserWarning):
    """The traced function drew random numbers (``random``, ``np.random``) or read a clock."""


_warned: set = set()
_warned_lock = threading.Lock()


def warn_effects(who: str, f, traced, jit: bool = False) -> None:
    """Warn once per function (and transform) that tracing ``f`` met side effects.

    ``grad``, ``jvp`` & co. trace such a function again on every call, so each call
    draws afresh as calling ``f`` would; ``jit`` keeps the trace (its draws are
    constants of the compiled code). Only the outermost transform warns.
    """
    if not traced.effects or _trace_state.stack:
        return
    key = (who, getattr(f, "__code__", None) or id(f))
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    name = getattr(f, "__name__", "f")
    found = _describe_effects(traced.effects)
    if jit:
        msg = (f"fg.jit({name}) traced a function that draws random numbers or reads a clock "
               f"({found}): that ran once, while tracing, and the compiled function returns "
               "the same numbers on every call. To draw new numbers per call, pass a key "
               "argument and draw with fg.random (key = fg.random.key(0); key, sub = "
               "fg.random.split(key); fg.random.normal(sub, shape)); see docs/random.md.")
    else:
        msg = (f"fg.{who}({name}): the function draws random numbers or reads a clock "
               f"({found}), so it is traced again on every call (no trace or compiled code "
               "is reused) and each call draws afresh, as calling it would. For fast, "
               "reproducible randomness pass a key argument and draw with fg.random "
               "(fg.random.normal(key, shape)); see docs/random.md.")
    site = traced.effects[0][1]
    filename, _, line = site.rpartition(":")
    warnings.warn_explicit(msg, SideEffectWarning, filename, int(line) if line.isdigit() else 0)


# --- tracebacks ------------------------------------------------------------------------

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: Raised for a user's mistake (or by the user's own code): shown without fusegrad's frames.
_USER_ERRORS = (FusegradError, TypeError, ValueError, IndexError, FloatingPointError,
                NotImplementedError)
_NOTE = ("(fusegrad's own frames were removed from this traceback; set "
         "FUSEGRAD_TRACEBACK_FILTERING=off to see them)")


def _ours(tb) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_PKG_DIR)


def filter_traceback(e: BaseException) -> None:
    """Drop fusegrad's frames from ``e.__traceback__``, as JAX's traceback filtering does,
    for user mistakes and errors of the user's own code; internal errors keep them."""
    tb = e.__traceback__
    if not config.TRACEBACK_FILTERING or tb is None or isinstance(e, CodegenError):
        return
    keep = []
    while tb is not None:
        if not _ours(tb):
            keep.append(tb)
        last, tb = tb, tb.tb_next
    if not isinstance(e, _USER_ERRORS) and _ours(last):
        return  # raised inside fusegrad and not a user mistake: maybe a bug, keep it all
    new = None
    for t in reversed(keep):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    e.__traceback__ = new
    if _NOTE not in getattr(e, "__notes__", ()):
        e.add_note(_NOTE)


def api_boundary(fn):
    """``fn`` with ``filter_traceback`` applied to what it raises (public transforms)."""

    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            filter_traceback(e)
            raise

    return boundary
