"""Calls with side effects met while tracing: random draws and clocks.

A trace records array operations. A call to Python's ``random``, to ``np.random``
(module functions, ``RandomState``, ``Generator`` and bit-generator methods) or to
a clock (``time.time``, ``time.perf_counter``, ...) runs once, while tracing, and
its result enters the trace as a constant: a cached trace would replay the same
draws on every call. A ``Recorder`` collects such calls made while the user's
function is traced (what was called and the user's ``file:line``), so the
transforms can refuse to reuse the trace (``grad``, ``jvp``, ...) or warn (``jit``).

Four mechanisms, none costing anything per traced op:

* while any trace is open, the entry points that are module attributes are
  wrapped: ``random.Random.random`` / ``getrandbits`` (every method of every
  ``random.Random`` draws through them) and the ``random`` module's functions, the
  ``np.random`` module functions, the clocks and ``os.urandom``. A wrapper records
  only when its own thread is tracing (``Recorder`` s are thread-local), so other
  threads are unaffected; the line is the innermost frame of the user's code.
* a generator made without a seed takes its seed from the OS through
  ``random._urandom`` (NumPy's ``SeedSequence()``: ``default_rng()``,
  ``RandomState()``, ``PCG64()``, ..., whatever they are called in the user's code;
  ``random.SystemRandom``), also wrapped, as is ``random.Random.__init__``
  (``random.Random()``). ``RandomState(seed)``, which draws such a seed before it
  seeds, is told apart by its call on the caller's line (``entropy.seeded_call``).
* the states of NumPy's global generator (its raw MT19937 state, read through
  ctypes) and of Python's ``random`` module are compared before and after the
  trace, so a draw through a name bound before tracing (``from numpy.random
  import uniform``, ``from random import random``) is seen too; a change counts as
  this trace's unless another thread drew from that generator meanwhile (through
  a wrapper, or running code that names a draw function: ``_drew_elsewhere``) and
  the traced code does not name one itself.
* NumPy ``RandomState`` / ``Generator`` objects are Cython types whose methods
  cannot be wrapped: the generators the traced function can reach (its globals,
  closure cells, defaults, bound ``self`` and their attributes, through nested
  functions) are compared before and after the trace; the line reported for a
  generator whose state changed is the first line of the user's code that names it.

``numpy.random`` is not imported here (NumPy 2 loads it on first use; it and the
modules it loads cost a first gradient 20 ms): a trace that begins without it watches
for its import (``_ImportWatch``) and from then on watches it as above.

Not seen: a generator object reached another way (e.g. returned by a call) and
created before tracing, and a legacy ``np.random`` Gaussian that only takes the
cached second deviate of a pair (it leaves the MT19937 state unchanged).
"""

from __future__ import annotations

import contextlib
import ctypes
import dis
import functools
import os
import random
import sys
import threading
import time
import types

import numpy as np

from .entropy import seeded_call
from .messages import library_dirs

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIB_DIRS = (os.path.dirname(os.path.abspath(np.__file__)) + os.sep, _PKG_DIR)
_LIB_FILES = (random.__file__, os.path.abspath(random.__file__))
_CLOCKS = ("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
           "process_time", "process_time_ns")
_RANDOM_METHODS = tuple(n for n in dir(random.Random) if not n.startswith("_")
                        and n != "getstate" and callable(getattr(random.Random, n)))
#: (owner, attribute, name shown to the user; None: ``<generator>.<attribute>``). Every
#: public method of ``random.Random`` (of any instance), and the ``random`` module's
#: functions, which are methods bound to one instance when ``random`` is imported
#: (``np.random``'s functions: ``_NumpyRandom.targets``).
_TARGETS = (
    [(random.Random, n, None) for n in _RANDOM_METHODS]
    + [(random, n, f"random.{n}") for n in _RANDOM_METHODS
       if getattr(getattr(random, n, None), "__self__", None) is random._inst]
    + [(time, n, f"time.{n}") for n in _CLOCKS]
    + [(os, "urandom", "os.urandom")]
)
_CLOCK_NAMES = frozenset(what for owner, _, what in _TARGETS if owner in (time, os))
_LOADS = frozenset(("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_FAST", "LOAD_ATTR",
                    "LOAD_METHOD", "LOAD_CLASSDEREF"))
#: the state of NumPy's global generator before a trace that began without ``numpy.random``
_ABSENT = object()


class _NumpyRandom:
    """What the watch uses of ``numpy.random``: its generator types, its global
    generator and the module functions that draw from it."""

    def __init__(self, module):
        self.module = module
        self.types = (module.RandomState, module.Generator, module.BitGenerator)
        self.rand = module.mtrand._rand
        self.funcs = tuple(n for n in dir(module)
                           if getattr(getattr(module, n), "__self__", None) is self.rand)
        self.targets = [(module, n, f"np.random.{n}") for n in self.funcs]
        self.fast = _mt_bytes(self.rand._bit_generator) is not None


_numpy: list[_NumpyRandom] = []


def _numpy_random() -> _NumpyRandom | None:
    """``numpy.random`` as the watch uses it; None while it is not (fully) loaded: then no
    generator of it exists and nothing has drawn from it. (NumPy 2 loads it on first use,
    and ``import fusegrad`` and a first gradient do not: 20 ms.)"""
    if not _numpy:
        module = sys.modules.get("numpy.random")
        if module is None or getattr(module.__spec__, "_initializing", False):
            return None
        _numpy.append(_NumpyRandom(module))
    return _numpy[0]


class _ImportWatch:
    """First on ``sys.meta_path`` once a trace began without ``numpy.random`` loaded: finds
    nothing itself, but an import of ``numpy.random`` while a trace is open (the traced
    code's ``np.random.rand()``) runs ``_numpy_random_loaded`` when it is done, so the
    draws that follow are watched as if it had been loaded before. Seeding its global
    generator from the OS, which the import does, is not the traced code's draw. It stays
    there (a name compared per import): taking it out while another thread imports could
    make that thread skip the finder after it."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "numpy.random" or not _patch_count:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is _ImportWatch or find is None else find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            _local.importing += 1
            try:
                run(module)
            finally:
                _local.importing -= 1
            _numpy_random_loaded(module)

        with contextlib.suppress(AttributeError):  # (a loader that takes no attribute)
            spec.loader.exec_module = exec_module
        return spec


def _numpy_random_loaded(module) -> None:
    """``numpy.random`` was imported while a trace was open: its functions are wrapped
    (if the wrappers are on) and the open traces that began without it take its global
    generator's state now, as seeded by the import, as their state before."""
    if not _numpy:  # (its import is not over yet: ``_numpy_random`` would wait)
        _numpy.append(_NumpyRandom(module))
    state = _np_global_state()
    with _patch_lock:
        if _patch_count:
            _patch_numpy()
        for rec in _active:
            if rec.globals and rec.globals[0] is _ABSENT:
                rec.globals = (state, *rec.globals[1:])


class _Local(threading.local):
    def __init__(self):
        self.recorders: list[Recorder] = []
        self.importing = 0  # importing ``numpy.random`` (``_ImportWatch``)


_local = _Local()
_patch_lock = threading.Lock()
_patch_count = 0
_active: list = []  # the open Recorders of every thread


def _mark_foreign(kind: str) -> None:
    """A draw from the global generator ``kind`` ("np", "py") on this thread: for the
    Recorders of other threads, a change of that generator's state is not theirs."""
    me = threading.get_ident()
    for rec in _active:
        if rec.thread != me:
            rec.foreign.add(kind)


def _wrap(orig, what: str | None):
    skip = _LIB_DIRS + _LIB_FILES
    #: clocks count only when the user's code reads them: libraries read them for their own
    #: bookkeeping (logging stamps its records, Numba times its passes)
    clock = what in _CLOCK_NAMES
    kind = "np" if (what or "").startswith("np.random.") else "py" if (
        what or "").startswith("random.") else None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        recs = _local.recorders
        if kind is not None:
            _mark_foreign(kind)
        elif what is None and args and args[0] is random._inst:
            _mark_foreign("py")
        caller = sys._getframe(1)
        fname = caller.f_code.co_filename
        if recs and not fname.startswith(skip) and not (clock and fname.startswith(
                library_dirs())):
            if what is None:  # a random.Random method: args[0] is the generator
                owner = "random" if args[0] is random._inst else type(args[0]).__name__
                entry = (f"{owner}.{orig.__name__}", _user_site(caller))
            else:
                entry = (what, _user_site(caller))
            for rec in recs:
                rec.add(entry)
        return orig(*args, **kwargs)

    wrapper.__fusegrad_wrapped__ = orig
    return wrapper


def _record(entry) -> None:
    for rec in _local.recorders:
        rec.add(entry)


def _wrap_entropy(orig):
    """``random._urandom``, through which every generator made without a seed gets its
    seed: NumPy's ``SeedSequence()`` (``default_rng()``, ``RandomState()``, ``PCG64()``,
    ...) and ``random.SystemRandom``, whatever names the user's code calls them by."""

    @functools.wraps(orig)
    def wrapper(n):
        if _local.recorders and not _local.importing:
            caller = sys._getframe(1)
            while caller is not None and caller.f_code.co_filename in _LIB_FILES:
                caller = caller.f_back  # random.py's SystemRandom / secrets.randbits
            if caller is not None and not caller.f_code.co_filename.startswith(_PKG_DIR) \
                    and not seeded_call(caller):
                _record(("a generator made without a seed", _user_site(caller)))
        return orig(n)

    wrapper.__fusegrad_wrapped__ = orig
    return wrapper


def _wrap_random_init(orig):
    """``random.Random.__init__``: ``random.Random()`` seeds itself from the OS."""

    @functools.wraps(orig)
    def __init__(self, x=None, *args, **kwargs):
        if x is None and _local.recorders and not isinstance(self, random.SystemRandom):
            _record(("random.Random() without a seed", _user_site(sys._getframe(1))))
        orig(self, x, *args, **kwargs)

    __init__.__fusegrad_wrapped__ = orig
    return __init__


_wrappers: list = []  # (owner, attribute, original or None if inherited, wrapper)
_np_wrappers: list = []  # the same for ``np.random``'s functions
_np_patched = False


def _patch() -> None:
    if not _wrappers:  # made once: functools.wraps costs microseconds per entry point
        _wrappers.extend(_wrapped(_TARGETS))
        _wrappers.append((random, "_urandom", random._urandom, _wrap_entropy(random._urandom)))
        init = random.Random.__dict__["__init__"]
        _wrappers.append((random.Random, "__init__", init, _wrap_random_init(init)))
    for owner, attr, _, wrapper in _wrappers:
        setattr(owner, attr, wrapper)
    if _numpy_random() is None:
        if _ImportWatch not in sys.meta_path:
            sys.meta_path.insert(0, _ImportWatch)
    else:
        _patch_numpy()


def _patch_numpy() -> None:
    global _np_patched
    if not _np_wrappers:
        _np_wrappers.extend(_wrapped(_numpy_random().targets))
    for owner, attr, _, wrapper in _np_wrappers:
        setattr(owner, attr, wrapper)
    _np_patched = True


def _wrapped(targets) -> list:
    out = []
    for owner, attr, what in targets:
        own = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
        out.append((owner, attr, own, _wrap(getattr(owner, attr), what)))
    return out


def _unpatch() -> None:
    global _np_patched
    for owner, attr, own, _ in (*_wrappers, *(_np_wrappers if _np_patched else ())):
        if own is None:  # random.Random inherits random/getrandbits from its C base
            delattr(owner, attr)
        else:
            setattr(owner, attr, own)
    _np_patched = False


class Recorder:
    """The side-effecting calls made on this thread while tracing ``fn``."""

    __slots__ = ("codes", "effects", "fn", "foreign", "globals", "rngs", "thread")

    def __init__(self, fn):
        self.fn = fn
        self.effects: list[tuple[str, str]] = []
        self.rngs: list[tuple] = []  # (generator, state before, code, name)
        self.codes: list = []  # the user's code objects ``fn`` reaches
        self.globals: tuple = ()  # the global generators' states before
        self.foreign: set[str] = set()  # global generators other threads drew from
        self.thread = threading.get_ident()

    def __enter__(self) -> Recorder:
        global _patch_count
        with _patch_lock:
            if _patch_count == 0:
                _patch()
            _patch_count += 1
            _active.append(self)
        _local.recorders.append(self)
        found, self.codes = _reachable(self.fn)
        self.rngs = [(g, _state(g), code, name) for g, code, name in found]
        self.globals = (_np_global_state(), random.getstate(), _others())
        return self

    def __exit__(self, *exc) -> None:
        global _patch_count
        recs = _local.recorders
        for i in range(len(recs) - 1, -1, -1):
            if recs[i] is self:
                del recs[i]
                break
        self._globals_changed()
        with _patch_lock:
            _active.remove(self)
            _patch_count -= 1
            if _patch_count == 0:
                _unpatch()
        for g, before, code, name in self.rngs:
            if _state(g) != before:
                self._changed(g, code, name)
        self.rngs = []
        for rec in recs:  # what an inner trace drew, the enclosing traces drew too
            for entry in self.effects:
                rec.add(entry)

    def add(self, entry) -> None:
        if entry not in self.effects:
            self.effects.append(entry)

    def _globals_changed(self) -> None:
        """A draw from NumPy's or Python's global generator the wrappers did not see
        (``from numpy.random import uniform``, ``from random import random``): its state
        changed while tracing and no other thread drew from it meanwhile."""
        np_before, py_before, others = self.globals
        for kind, prefix, names, changed in (
            ("np", "np.random", lambda: frozenset(_numpy_random().funcs),
             lambda: _np_global_state() != np_before),
            ("py", "random", lambda: frozenset(_RANDOM_METHODS),
             lambda: random.getstate() != py_before),
        ):
            if kind in self.foreign or any(what.startswith((prefix + ".", prefix + " ("))
                                           for what, _ in self.effects):
                continue  # another thread's draw, or seen with its line by the wrappers
            if not changed():
                continue
            names = names()
            site = _site_of(_Codes(self.codes), names) if self.codes else None
            if site is not None or not _drew_elsewhere(others, names):
                self.add((f"{prefix} (the global generator)", site or self._site()))

    def _site(self) -> str:
        """The first line of the traced function."""
        code = getattr(self.fn, "__code__", None) or (self.codes[0] if self.codes else None)
        return f"{code.co_filename}:{code.co_firstlineno}" if code else "<unknown>:0"

    def _changed(self, g, code, name) -> None:
        site = code and (_site_of(code, {name}) or f"{code.co_filename}:{code.co_firstlineno}")
        self.add((f"{type(g).__name__} {name!r}", site))


def _others() -> list:
    """The code objects of the innermost frames of every other thread (none if there is
    no other thread: the common case costs one call)."""
    if threading.active_count() == 1:
        return []
    me, codes = threading.get_ident(), []
    for t, f in sys._current_frames().items():
        for _ in range(4):
            if t == me or f is None:
                break
            codes.append(f.f_code)
            f = f.f_back
    return codes


def _drew_elsewhere(before: list, names) -> bool:
    """Whether another thread, running code that names one of ``names`` when the trace
    began (``before``: ``_others()``) or when it ended, may have drawn from a global
    generator meanwhile through a function it looked up before the entry points were
    wrapped (which no wrapper sees)."""
    return bool(before) and any(not names.isdisjoint(c.co_names)
                                for c in (*before, *_others()))


def _mt_bytes(bg):
    """The raw state of an MT19937 bit generator (its key and position: 2500 bytes, a
    hundred times cheaper to read than ``.state``), or None if it is laid out otherwise."""
    try:
        raw = ctypes.string_at(bg.ctypes.state_address, 2500)
        st = bg.state["state"]
    except Exception:  # another bit generator, or no ctypes
        return None
    want = np.asarray(st["key"], np.uint32).tobytes() + np.int32(st["pos"]).tobytes()
    return raw if raw == want else None


def _np_global_state():
    """What a draw from NumPy's global generator changes: its MT19937 state (a draw that
    only takes the cached second normal deviate of a pair changes nothing here);
    ``_ABSENT`` while ``numpy.random`` is not loaded."""
    info = _numpy_random()
    if info is None:
        return _ABSENT
    bg = info.rand._bit_generator
    if info.fast and isinstance(bg, info.module.MT19937):
        return ctypes.string_at(bg.ctypes.state_address, 2500)
    return _state(info.rand)


def _state(g):
    if isinstance(g, _numpy_random().module.RandomState):
        s = g.get_state(legacy=False)
    else:
        s = (g.bit_generator if isinstance(g, _numpy_random().module.Generator) else g).state
    return _frozen(s)


def _frozen(x):
    if isinstance(x, dict):
        return tuple((k, _frozen(v)) for k, v in x.items())
    if isinstance(x, np.ndarray):
        return x.tobytes()
    return x


def _reachable(fn, depth: int = 4):
    """``(generator, code, name)`` for the NumPy generators ``fn`` can name, and every
    user code object reached (no generator while ``numpy.random`` is not loaded)."""
    info = _numpy_random()
    rng_types = info.types if info is not None else ()
    found, seen, codes = [], set(), []
    todo = [(fn, depth)]
    while todo:
        obj, d = todo.pop()
        if id(obj) in seen or d < 0:
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            todo += [(x, d - 1) for x in (obj.func, *obj.args, *obj.keywords.values())]
            continue
        if isinstance(obj, types.MethodType):
            todo.append((obj.__func__, d))
            _attrs(obj.__self__, getattr(obj.__func__, "__code__", None), found, rng_types)
            continue
        if not isinstance(obj, types.FunctionType):
            continue
        code = obj.__code__
        if not _is_user(code):
            cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
            todo += [(x, d) for x in cells if callable(x)]
            continue
        codes.append(code)
        named = [(n, obj.__globals__.get(n)) for n in _names(code)]
        named += [(n, c.cell_contents) for n, c in zip(code.co_freevars, obj.__closure__ or ())
                  if _filled(c)]
        named += [(f"default {i}", v) for i, v in enumerate(obj.__defaults__ or ())]
        for n, v in named:
            if isinstance(v, rng_types):
                found.append((v, code, n))
            elif isinstance(v, types.FunctionType | types.MethodType | functools.partial):
                todo.append((v, d - 1))
            elif not isinstance(v, type | types.ModuleType):
                _attrs(v, code, found, rng_types)
    out, ids = [], set()
    for g, code, n in found:
        if id(g) not in ids and g is not info.rand:
            ids.add(id(g))
            out.append((g, code, n))
    return out, codes


class _Codes(list):
    """Several code objects, searched in order by ``_site_of``."""


def _attrs(v, code, found, rng_types) -> None:
    attrs = getattr(v, "__dict__", None)
    if rng_types and type(attrs) is dict and len(attrs) < 256:
        found += [(a, code, k) for k, a in attrs.items() if isinstance(a, rng_types)]


def _filled(cell) -> bool:
    try:
        return cell.cell_contents is not cell
    except ValueError:  # an empty cell
        return False


def _names(code):
    """Global and attribute names used by ``code`` and the functions defined in it."""
    stack, names = [code], []
    while stack:
        c = stack.pop()
        names += c.co_names
        stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return names


def _site_of(code, names) -> str | None:
    """``file:line`` of the first instruction in ``code`` (or the functions defined in
    it) that loads one of ``names``."""
    stack = list(reversed(code)) if isinstance(code, _Codes) else [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in _LOADS and ins.argval in names and ins.positions.lineno:
                return f"{c.co_filename}:{ins.positions.lineno}"
        stack += [k for k in reversed(c.co_consts) if isinstance(k, types.CodeType)]
    return None


def _is_user(code) -> bool:
    name = code.co_filename
    return not (name.startswith(_LIB_DIRS) or name in _LIB_FILES or name.startswith("<frozen"))


def _user_site(frame) -> str:
    """``file:line`` of the innermost frame outside fusegrad, NumPy and ``random``."""
    f = frame
    while f is not None and not _is_user(f.f_code):
        f = f.f_back
    f = f or frame
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def describe(effects) -> str:
    """``random.gauss at file.py:3, RandomState 'rs' at file.py:7``."""
    return ", ".join(f"{what} at {site}" for what, site in effects)
