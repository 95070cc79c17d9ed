"""``fusegrad.autograd.profiler``: time spent per Tensor operation, as PyTorch's profiler.

Inside ``with profile() as prof:`` every Tensor method call (``aten::mul`` for
``a * b``, ``aten::sum``, ...) and every ``record_function(name)`` block is
timed; ``prof.key_averages().table(sort_by="self_cpu_time_total")`` prints
calls, self time (excluding the operations called inside) and total time per
name, and ``prof.export_chrome_trace(path)`` writes the events for
``chrome://tracing``. Profiling wraps the Tensor methods while a profile is
open (in any thread) and restores them after, so it costs nothing otherwise.

>>> import fusegrad as fg
>>> with fg.autograd.profiler.profile() as prof:
...     with fg.autograd.profiler.record_function("forward"):
...         y = (fg.ones(3) * 2).sum()
>>> sorted(e.key for e in prof.key_averages())
['aten::mul', 'aten::sum', 'forward']
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

from ..eager.tensor import Tensor

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]

#: Tensor methods that read metadata or convert, not operations: never timed.
_SKIP = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "is_floating_point", "is_complex",
    "type", "numpy", "item", "tolist", "requires_grad_", "retain_grad", "register_hook",
    "element_size", "stride", "is_contiguous", "data_ptr", "storage_offset", "get_device",
    "untyped_storage", "__len__", "__repr__", "__format__", "__bool__", "__float__",
    "__int__", "__index__", "__hash__", "__array__", "__iter__", "__reduce_ex__",
    "__deepcopy__", "__init__", "__dir__", "__contains__"})
_DUNDER_OPS = frozenset({
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__",
    "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__",
    "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__ipow__", "__matmul__",
    "__rmatmul__", "__neg__", "__abs__", "__getitem__", "__setitem__", "__eq__", "__ne__",
    "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__", "__xor__", "__invert__"})


class FunctionEvent:
    """One timed call: ``name``, start and end (microseconds), thread, nesting parent."""

    __slots__ = ("children_us", "end_us", "name", "parent", "start_us", "thread")

    def __init__(self, name: str, start_us: float, thread: int, parent):
        self.name, self.start_us, self.thread, self.parent = name, start_us, thread, parent
        self.end_us = start_us
        self.children_us = 0.0

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - self.children_us


class FunctionEventAvg:
    """The events of one name, added up: ``count``, ``cpu_time_total``,
    ``self_cpu_time_total`` (microseconds), ``cpu_time`` (average per call)."""

    def __init__(self, key: str):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, e: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} "
                f"self_cpu_time={_fmt_us(self.self_cpu_time_total)} "
                f"cpu_time={_fmt_us(self.cpu_time)} count={self.count}>")


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of events (or averages) that prints as a table."""

    def table(self, sort_by: str | None = None, row_limit: int = 100, header=None,
              max_name_column_width: int = 55, top_level_events_only: bool = False) -> str:
        """Name, self CPU % and time, CPU total % and time, average and number of calls,
        sorted by ``sort_by`` (``"self_cpu_time_total"``, ``"cpu_time_total"``,
        ``"count"``; PyTorch's ``cpu_time`` means the average), largest first."""
        rows = list(self)
        if sort_by is not None:
            attr = {"cpu_time": "cpu_time", "count": "count"}.get(sort_by, sort_by)
            if not hasattr(FunctionEventAvg("x"), attr.replace("cuda", "cpu")):
                raise AttributeError(f"unknown sort key {sort_by!r}")
            rows.sort(key=lambda e: getattr(e, attr.replace("cuda", "cpu")), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        self_total = sum(e.self_cpu_time_total for e in self) or 1.0
        width = min(max([len(e.key) for e in rows] + [4]), max_name_column_width)
        cols = ("Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls")
        line = "-" * width + "  " + "  ".join("-" * 12 for _ in cols)
        out = [line, f"{'Name':>{width}}  " + "  ".join(f"{c:>12}" for c in cols), line]
        for e in rows:
            name = e.key if len(e.key) <= width else e.key[:width - 3] + "..."
            cells = (f"{100 * e.self_cpu_time_total / self_total:.2f}%",
                     _fmt_us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / self_total:.2f}%", _fmt_us(e.cpu_time_total),
                     _fmt_us(e.cpu_time), str(e.count))
            out.append(f"{name:>{width}}  " + "  ".join(f"{c:>12}" for c in cells))
        out += [line, f"Self CPU time total: {_fmt_us(sum(e.self_cpu_time_total for e in self))}",
                ""]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()


# --- recording ------------------------------------------------------------------------

_lock = threading.Lock()
_active: list = []  # open profiles
_saved: dict = {}  # original Tensor methods while patched


class _Stack(threading.local):
    def __init__(self):
        self.events: list[FunctionEvent] = []


_stack = _Stack()


def _begin(name: str):
    if not _active:
        return None
    parent = _stack.events[-1] if _stack.events else None
    e = FunctionEvent(name, time.perf_counter_ns() / 1e3, threading.get_ident(), parent)
    _stack.events.append(e)
    return e


def _end(e: FunctionEvent | None) -> None:
    if e is None:
        return
    e.end_us = time.perf_counter_ns() / 1e3
    if _stack.events and _stack.events[-1] is e:
        _stack.events.pop()
    if e.parent is not None:
        e.parent.children_us += e.cpu_time_total
    for p in list(_active):
        p._events.append(e)


def _op_name(method: str) -> str:
    if method in _DUNDER_OPS:
        method = method.strip("_")
        if method not in ("rshift", "round") and method.startswith(("r", "i")) and (
                method[1:] in {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                               "matmul"}):
            method = method[1:]
    return f"aten::{method}"


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        e = _begin(name)
        try:
            return fn(*args, **kwargs)
        finally:
            _end(e)
    return wrapper


def _patch() -> None:
    for cls in Tensor.__mro__:
        for name, value in vars(cls).items():
            if (name in _SKIP or (name.startswith("_") and name not in _DUNDER_OPS)
                    or not callable(value) or isinstance(value, staticmethod | classmethod | type)
                    or name in _saved):  # the MRO's first definition wins
                continue
            _saved[name] = Tensor.__dict__.get(name)
            setattr(Tensor, name, _timed(_op_name(name), value))


def _unpatch() -> None:
    for name, original in _saved.items():
        if original is None:
            delattr(Tensor, name)
        else:
            setattr(Tensor, name, original)
    _saved.clear()


class profile:
    """Time every Tensor operation and ``record_function`` block inside the ``with``.

    PyTorch's arguments are accepted; ``use_cuda``/``use_device`` have nothing to
    time here, ``record_shapes``, ``profile_memory`` and ``with_stack`` are not
    recorded."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None,
                 record_shapes: bool = False, with_flops: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False, custom_trace_id_callback=None):
        self.enabled = enabled
        self._events: list[FunctionEvent] = []
        self._t0 = 0.0

    def __enter__(self):
        if self.enabled:
            with _lock:
                if not _active:
                    _patch()
                _active.append(self)
            self._t0 = time.perf_counter_ns() / 1e3
        return self

    def __exit__(self, *exc):
        if self.enabled:
            with _lock:
                _active.remove(self)
                if not _active:
                    _unpatch()
        return False

    @property
    def function_events(self) -> EventList:
        return EventList(sorted(self._events, key=lambda e: e.start_us))

    def events(self) -> EventList:
        return self.function_events

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """One ``FunctionEventAvg`` per name, in order of first call."""
        avgs: dict[str, FunctionEventAvg] = {}
        for e in self.function_events:
            avgs.setdefault(e.name, FunctionEventAvg(e.name)).add(e)
        return EventList(avgs.values())

    def table(self, *args, **kwargs) -> str:
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path) -> None:
        """Write the events as Chrome's trace-event JSON (complete events, microseconds)."""
        events = [{"name": e.name, "ph": "X", "cat": "cpu_op", "ts": e.start_us - self._t0,
                   "dur": e.cpu_time_total, "pid": os.getpid(), "tid": e.thread}
                  for e in self.function_events]
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def __str__(self) -> str:
        return self.table()


class record_function:
    """Time a block (or, as a decorator, a function) under ``name`` in the open profiles."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._event = None

    def __enter__(self):
        self._event = _begin(self.name)
        return self

    def __exit__(self, *exc):
        _end(self._event)
        self._event = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper
