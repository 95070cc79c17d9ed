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
import threading

import numpy as np

from ..ir import Builder, TensorType, Value, register_array_type
from ..ir.bind import register_ambient, rule_types
from ..ir.errors import ShapeError, TracerError
from ..ir.methods import ArrayMethods
from . import writes
from .array_api import ArrayAPIMethods
from .messages import CONVERSIONS, concrete_error, conversion_error, user_location

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _State(threading.local):
    def __init__(self):
        self.stack: list[Trace] = []


_state = _State()


#: dtype -> the TensorType of its scalars (one object: the shape rules' cache is keyed
#: by the identity of operand types)
_SCALAR_TYPES: dict = {}


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
            ty = _SCALAR_TYPES.get(a.dtype)
            if ty is None:
                ty = _SCALAR_TYPES[a.dtype] = TensorType((), a.dtype)
            (v,) = self.builder.emit("constant", (), {"value": value, "dtype": key[0]}, (ty,))
            self._consts[key] = v
        return self._consts[key]

    def emit(self, opdef, operands, attrs, regions):
        vals = tuple([x.value if type(x) is Tracer and x._trace is self
                      and type(x._alias) is not tuple else self.to_value(x) for x in operands])
        types = tuple([v.type for v in vals])
        try:
            if regions:
                out_types = opdef.rule(types, regions=regions, **attrs)
            else:
                out_types = rule_types(opdef, types, attrs)
        except ShapeError as e:
            raise located(e, self.name, vals, user_location()) from None
        results = self.builder.emit(opdef.name, vals, attrs, out_types, regions, user_location())
        if len(results) == 1:
            out = Tracer(self, results[0])
            if opdef.name in writes.VIEW_OPS:
                writes.mark_views(opdef.name, operands, (out,), Tracer)
            return out
        outs = tuple([Tracer(self, r) for r in results])
        writes.mark_views(opdef.name, operands, outs, Tracer)
        return outs


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


def _convert(t: Tracer, guard: str, construct: str = "", kind: str = "value"):
    """``t`` as a Python value (``guard``: "bool", "float", ...): evaluated where the trace
    knows its arguments' values (and recorded as a guard), else the concretisation error
    (``construct``, ``kind``: how it names what asked, for "bool" and "index"), or the
    conversion error for conversions (``messages.CONVERSIONS``)."""
    if not t._trace.active:
        raise _leaked(t)
    source = t._trace.source
    if source is None:
        if guard in CONVERSIONS:
            raise conversion_error(t.value.type, guard, t._trace.kind, dependent=False)
        raise concrete_error(t.value.type, construct, kind, t._trace.kind)
    return source.convert(t, guard, construct, kind)


def _index_text(idx) -> str:
    parts = idx if isinstance(idx, tuple) else (idx,)
    return ", ".join("..." if p is Ellipsis else ":" if isinstance(p, slice) else
                     repr(p) if isinstance(p, int | None) else "idx" for p in parts)


def tracing() -> bool:
    """Whether a trace is open on this thread (ops on tracers are being recorded)."""
    return bool(_state.stack)


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
        return _convert(self, "float")

    def __int__(self):
        return _convert(self, "int")

    def __index__(self):
        return _convert(self, "index", "using a traced value as a Python index (range(), "
                        "list indexing)", "index")

    def __complex__(self):
        return _convert(self, "complex")

    def __array__(self, dtype=None, copy=None):
        a = _convert(self, "array")
        if dtype is not None and np.dtype(dtype) != a.dtype:
            a = a.astype(dtype)
            a.flags.writeable = False
        return a

    def item(self):
        return _convert(self, "item")

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
        return _convert(self, "tolist")


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


def _tracer_dtype(t: Tracer):
    return t.value.type.dtype


register_array_type(Tracer, level=_tracer_level, bind=_tracer_bind, dtype=_tracer_dtype)
register_ambient(_ambient)
