"""Tracers and traces.

A ``Trace`` records ops into a Builder. Each transform opens a trace with its
own level on a thread-local stack; ``bind`` hands an op to the trace of the
highest-level tracer among its operands. Operands that are not that trace's own
tracers are lifted: a tracer of an outer trace (a free variable of a nested
transform) or a closed-over array becomes an implicit input of the Function,
a 0-d literal becomes a ``constant`` op.
"""

from __future__ import annotations

import linecache
import os
import sys
import threading
import warnings

import numpy as np

from ..ir import Builder, TensorType, Value, register_array_type
from ..ir.bind import register_ambient
from ..ir.errors import ShapeError, TracerError
from ..ir.location import override as _loc_override
from ..ir.methods import ArrayMethods
from . import writes
from .array_api import ArrayAPIMethods

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _State(threading.local):
    def __init__(self):
        self.stack: list[Trace] = []


_state = _State()


def user_location() -> str | None:
    """``file:line`` of the innermost stack frame outside fusegrad itself (or the
    location a pass set with ``ir.location.at``)."""
    active, loc = _loc_override()
    if active:
        return loc
    f = sys._getframe(1)
    while f is not None:
        fname = f.f_code.co_filename
        if not fname.startswith(_PKG_DIR) and not fname.startswith("<frozen"):
            return f"{fname}:{f.f_lineno}"
        f = f.f_back
    return None


class Trace:
    """One open recording. Use as a context manager: ``with Trace("f") as t:``."""

    def __init__(self, name: str = "f"):
        self.name = name
        self.builder = Builder(name)
        self.level = 0
        self.active = False
        self.free: dict[int, tuple[object, Value]] = {}
        self._consts: dict[tuple, Value] = {}
        #: the argument values, where the trace knows them (``concrete.Concrete``): Python
        #: control flow on traced values then evaluates them; None: an abstract trace
        self.source = None
        #: the transform that opened an abstract trace ("jit", "vmap", "control"), for errors
        self.kind: str | None = None

    def __enter__(self) -> Trace:
        stack = _state.stack
        self.level = (stack[-1].level + 1) if stack else 1
        self.active = True
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self.active = False
        stack = _state.stack
        if stack and stack[-1] is self:
            stack.pop()
        else:
            stack.remove(self)

    def new_arg(self, type: TensorType, hint: str | None = None) -> Tracer:
        t = Tracer(self, self.builder.param(type, hint))
        t._alias = writes.ARGUMENT
        return t

    def wrap(self, x) -> Tracer:
        """``x`` (a tracer of this trace, a literal or a closed-over array) as a tracer here."""
        if isinstance(x, Tracer) and x._trace is self:
            return x
        t = Tracer(self, self.to_value(x))
        t._alias = writes.ARGUMENT
        return t

    @property
    def free_values(self) -> list:
        """The lifted objects, in the order of their implicit parameters."""
        return [obj for obj, _ in self.free.values()]

    def to_value(self, x) -> Value:
        if isinstance(x, Tracer):
            if type(x._alias) is tuple:  # a view: refused if its root was written since
                writes.check_view(x)
            if x._trace is self:
                return x.value
            if not x._trace.active:
                raise _leaked(x)
        elif isinstance(x, np.ndarray | np.generic) and np.ndim(x) == 0:
            return self._constant(np.asarray(x))
        key = id(x)
        if key not in self.free:
            from ..ir.bind import aval

            hint = "c" if isinstance(x, np.ndarray) else None
            self.free[key] = (x, self.builder.param(aval(x), hint))
        return self.free[key][1]

    def _constant(self, a: np.ndarray) -> Value:
        from ..ir.types import dtype_name

        value = a.item()
        key = (dtype_name(a.dtype), type(value), repr(value))
        if key not in self._consts:
            (v,) = self.builder.emit(
                "constant", (), {"value": value, "dtype": key[0]}, (TensorType((), a.dtype),)
            )
            self._consts[key] = v
        return self._consts[key]

    def emit(self, opdef, operands, attrs, regions):
        vals = tuple(self.to_value(x) for x in operands)
        types = tuple(v.type for v in vals)
        try:
            if regions:
                out_types = opdef.rule(types, regions=regions, **attrs)
            else:
                out_types = opdef.rule(types, **attrs)
        except ShapeError as e:
            raise located(e, self.name, vals, user_location()) from None
        results = self.builder.emit(opdef.name, vals, attrs, out_types, regions, user_location())
        outs = tuple(Tracer(self, r) for r in results)
        writes.mark_views(opdef.name, operands, outs, Tracer)
        return outs[0] if len(outs) == 1 else outs


def located(err: Exception, fname: str, vals=None, loc: str | None = None) -> Exception:
    """``err`` with the operands (``vals``; argument names where they are arguments) and
    the user's line (``loc``, else the innermost frame of ``err``'s traceback outside
    fusegrad); ``err`` itself if it already has them."""
    if getattr(err, "located", False):
        return err
    if loc is None:
        tb = err.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if not name.startswith(_PKG_DIR) and not name.startswith("<frozen"):
                loc = f"{name}:{tb.tb_lineno}"
            tb = tb.tb_next
    lines = [str(err)]
    if vals:
        lines.append("operands " + ", ".join(
            f"%{v.hint}: {v.type}" if v.hint else str(v.type) for v in vals))
    where = ""
    if loc:
        path, _, line = loc.rpartition(":")
        code = linecache.getline(path, int(line)).strip() if line.isdigit() else ""
        where = f", at {loc}" + (f": {code}" if code else "")
    lines.append(f"while tracing @{fname}{where}")
    try:
        new = type(err)("; ".join(lines))  # one line (the CLI prints it as one)
    except TypeError:  # an error class with another signature: left as it is
        return err
    new.located = True
    return new.with_traceback(err.__traceback__)


def _leaked(t: Tracer) -> TracerError:
    return TracerError(
        f"a traced value {t.value.type} from a finished trace of @{t._trace.name} was used "
        "outside the function being transformed (a leaked tracer); return it from the "
        "function instead of storing it in an outer variable"
    )


#: Python construct -> the traced operation that replaces it.
_INSTEAD = {
    "if": "write the `if`/`else` as fg.cond(pred, true_fn, false_fn, *operands)",
    "while": "write the loop as fg.while_loop(cond_fn, body_fn, init), or as "
             "fg.fori_loop(lower, upper, body_fn, init) if it counts",
    "bool": "write an `if`/`else` as fg.cond(pred, true_fn, false_fn, *operands) and a "
            "`while` loop as fg.while_loop(cond_fn, body_fn, init)",
    "int": "loop over a traced bound with fg.fori_loop(lower, upper, body_fn, init) or "
           "fg.scan(f, init, xs)",
    "index": "loop over a traced bound with fg.fori_loop(lower, upper, body_fn, init); "
             "index a traced array with x[i] or fnp.take",
    "value": "keep the computation traced",
}
_ALL = ("(fg.cond for if/else on a traced predicate, fg.while_loop for while, "
        "fg.fori_loop / fg.scan for loops over traced bounds, fnp.where(cond, a, b) to "
        "select between values)")


def _bool_construct(loc: str | None) -> tuple[str, str]:
    """Which Python construct asked for the truth of a traced value, from its source line."""
    import linecache

    fname, _, line = (loc or "").rpartition(":")
    text = linecache.getline(fname, int(line)).strip() if line.isdigit() else ""
    for prefix, construct, kind in (
        ("while ", "a `while` loop condition", "while"),
        ("elif ", "an `elif` condition", "if"),
        ("if ", "an `if` condition", "if"),
        ("assert ", "an `assert`", "if"),
    ):
        if text.startswith(prefix):
            return construct, kind
    if " if " in text and " else " in text:
        return "a conditional expression (`a if c else b`)", "if"
    return "bool() (or `and`/`or`/`not`)", "bool"


def _scipy_hint(loc: str | None) -> str:
    """Inside SciPy's own Python code: say where the traceable versions are."""
    scipy = sys.modules.get("scipy")
    root = os.path.dirname(getattr(scipy, "__file__", None) or "") if scipy else ""
    if not loc or not root or not loc.startswith(root + os.sep):
        return ""
    return ("SciPy's Python-level functions (scipy.stats, scipy.special.logsumexp, "
            "softmax, polygamma, ...) cannot run on traced values: use "
            "fusegrad.scipy.stats / fusegrad.scipy.special instead. ")


#: Why a trace of this kind has no values, and what works instead.
_NO_VALUES = {
    "jit": "fg.jit traces the function once for all argument values, so Python control "
           "flow on values cannot be decided while tracing; call fg.grad (or value_and_grad, "
           "vjp, jvp, hessian) without fg.jit to branch on values",
    "vmap": "inside fg.vmap a traced value stands for a whole batch of per-example values "
            "and has no single Python value",
    "control": "the body of fg.cond / fg.while_loop / fg.fori_loop / fg.scan is traced once "
               "for all iterations and operands",
}


def _concrete_error(t: Tracer, construct: str, kind: str = "value",
                    who: str | None = None) -> TracerError:
    loc = user_location()
    if kind == "bool":
        construct, kind = _bool_construct(loc)
    where = f" at {loc}" if loc else ""
    why = f" ({_NO_VALUES[who]})" if who in _NO_VALUES else ""
    err = TracerError(
        f"{construct} needs a concrete value, but got a traced {t.value.type}{where}{why}. "
        f"{_scipy_hint(loc)}Python control flow on traced values cannot be recorded: "
        f"{_INSTEAD[kind]} {_ALL}. "
        "Or decide the control flow outside the transformed function, or pass the "
        "deciding argument as static: fg.jit(f, static_argnums=...)."
        + ("" if who else " (fg.grad, value_and_grad, vjp, jvp and hessian called on "
           "arrays, outside fg.jit and fg.vmap, do evaluate such values: "
           "see docs/control_flow.md)")
    )
    err.traced = f"a traced {t.value.type}{where}"  # for errors that explain it themselves
    return err


def _convert(t: Tracer, guard: str, construct: str, kind: str = "value"):
    """``t`` as a Python value (``guard``: "bool", "float", ...): evaluated where the trace
    knows its arguments' values (and recorded as a guard), else the concretisation error."""
    if not t._trace.active:
        raise _leaked(t)
    source = t._trace.source
    if source is None:
        raise _concrete_error(t, construct, kind, t._trace.kind)
    return source.convert(t, guard, construct, kind)


def _index_text(idx) -> str:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return ", ".join("..." if p is Ellipsis else ":" if isinstance(p, slice) else
                     repr(p) if isinstance(p, int | None) else "idx" for p in parts)


def tracing() -> bool:
    """Whether a trace is open on this thread (ops on tracers are being recorded)."""
    return bool(_state.stack)


class GradientCutWarning(UserWarning):
    """A traced value became a NumPy constant (``np.asarray`` of it, or NumPy converting a
    list that holds it): no gradient flows through that constant."""


class Tracer(ArrayAPIMethods, ArrayMethods):
    """A stand-in for an array while a function is traced: a type and an IR value."""

    __slots__ = ("__weakref__", "_alias", "_cell", "_trace", "value")

    def __init__(self, trace: Trace, value: Value):
        self._trace = trace
        self.value = value
        #: None, ``writes.ARGUMENT``, or for a view (weakref to its root, the root's write
        #: cell, the cell's value when the view was taken); ``_cell``: of a root, its last
        #: written value, shared with its views (see ``writes``)
        self._alias = None
        self._cell = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.type.shape

    @property
    def dtype(self):
        return self.value.type.dtype

    @property
    def aval(self) -> TensorType:
        return self.value.type

    def __repr__(self) -> str:
        return f"Tracer<{self.value.type}, level {self._trace.level}>"

    def __bool__(self):
        return _convert(self, "bool", "bool()", "bool")

    def __float__(self):
        return _convert(self, "float", "float()")

    def __int__(self):
        return _convert(self, "int", "int()", "int")

    def __index__(self):
        return _convert(self, "index", "using a traced value as a Python index (range(), "
                        "list indexing)", "index")

    def __complex__(self):
        return _convert(self, "complex", "complex()")

    def __array__(self, dtype=None, copy=None):
        a = _convert(self, "array", "converting a traced value to a NumPy array (np.asarray; "
                     "also np.array, np.mean, np.sum, np.full, np.linalg.norm... of a list "
                     "holding traced values, which NumPy converts itself: call fnp.array / "
                     "fnp.stack / fnp.mean... of the list instead)")
        warnings.warn(
            "a traced value was converted to a NumPy array, which is a constant of the trace: "
            "no gradient flows through it. If this is np.asarray(x) on purpose, silence this "
            "with warnings.simplefilter('ignore', fg.GradientCutWarning); if NumPy converted "
            "a list holding traced values "
            "(np.array, np.mean, np.sum, np.full... of a list), call fnp.array / fnp.stack / "
            "fnp.mean... of the list to keep the gradient.", GradientCutWarning, stacklevel=2)
        if dtype is not None and np.dtype(dtype) != a.dtype:
            a = a.astype(dtype)
            a.flags.writeable = False
        return a

    def item(self):
        return _convert(self, "item", ".item()")

    def __setitem__(self, idx, value):
        """``x[idx] = value`` on an array made inside the traced function records
        ``x.at[idx].set(value)`` and makes ``x`` the result (see ``writes``)."""
        why = writes.why_not_writable(self, _state.stack[-1] if _state.stack else None)
        if why is None:
            return writes.set_item(self, idx, value)
        loc = user_location()
        raise TypeError(
            f"traced arrays are immutable: x[{_index_text(idx)}] = ... on a traced "
            f"{self.value.type}{f' at {loc}' if loc else ''} cannot be recorded: {why}. "
            f"Write x = x.at[{_index_text(idx)}].set(value) (or .add(value)), which returns "
            "the updated array, as in JAX.")

    def tolist(self):
        return _convert(self, "tolist", ".tolist()")


def _tracer_level(t: Tracer) -> int:
    return 1000 + t._trace.level


def _tracer_bind(opdef, operands, attrs, regions):
    trace = _state.stack[-1] if _state.stack else None
    for x in operands:
        if isinstance(x, Tracer) and (trace is None or x._trace.level > trace.level):
            trace = x._trace
    if not trace.active:
        raise _leaked(next(x for x in operands if isinstance(x, Tracer) and x._trace is trace))
    return trace.emit(opdef, operands, attrs, regions)


def _ambient():
    return _tracer_bind if _state.stack else None


register_array_type(Tracer, level=_tracer_level, bind=_tracer_bind)
register_ambient(_ambient)
