"""What the tracer says when a traced value is asked for a Python value it cannot give.

Two errors, both naming the user's ``file:line`` and what to write instead:

* ``concrete_error`` (``TracerError``): Python control flow (``if``, ``while``, ``bool``,
  an index) on a value an abstract trace (``fg.jit``, ``fg.vmap``, a control-flow body)
  does not know;
* ``conversion_error`` (``TracerConversionError``): a conversion to a Python number or
  a NumPy array (``float``, ``int``, ``complex``, ``.item()``, ``.tolist()``,
  ``__array__``) of a value that has no Python value there, or whose gradient the
  conversion would drop (it depends on a differentiated input).
"""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys

import numpy as np

from ..ir.errors import TracerConversionError, TracerError
from ..ir.location import _override as _loc_state
from ..ir.location import override as _loc_override

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NP_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


@functools.cache
def library_dirs() -> tuple[str, ...]:
    """The installed libraries' and the standard library's directories, site-packages
    before the lib directory that holds it: a conversion made there was asked for by the
    user's line that called into them. Read on first use (``sysconfig`` takes
    milliseconds to load, and only errors and clocks read while tracing need it)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(sorted({os.path.abspath(paths[k]) + os.sep
                         for k in ("stdlib", "platstdlib", "purelib", "platlib")},
                        key=len, reverse=True))


def user_location() -> str | None:
    """``file:line`` of the innermost stack frame outside fusegrad itself (or the
    location a pass set with ``ir.location.at``)."""
    override = _loc_state
    if override.active:
        return override.loc
    f = sys._getframe(1)
    ours = _OURS
    while f is not None:
        fname = f.f_code.co_filename
        inside = ours.get(fname)
        if inside is None:  # once per file: every op recorded walks ~15 frames
            inside = fname.startswith(_PKG_DIR) or fname.startswith("<frozen")
            if len(ours) < 65536:
                ours[fname] = inside
        if not inside:
            return f"{fname}:{f.f_lineno}"
        f = f.f_back
    return None


#: file name -> whether it is fusegrad's own (or frozen), as ``user_location`` skips it
_OURS: dict[str, bool] = {}


def _conversion_sites() -> tuple[str | None, str | None]:
    """``(user, library)``: the innermost frame outside fusegrad, NumPy and the installed
    libraries (the user's line), and the innermost frame outside fusegrad and NumPy if
    that is inside a library (SciPy, ...: where the value was converted)."""
    active, loc = _loc_override()
    if active:
        return loc, None
    f, lib = sys._getframe(1), None
    while f is not None:
        fname = f.f_code.co_filename
        if not fname.startswith((_PKG_DIR, _NP_DIR, "<frozen")):
            if not fname.startswith(library_dirs()):
                return f"{fname}:{f.f_lineno}", lib
            lib = lib or f"{fname}:{f.f_lineno}"
        f = f.f_back
    return lib, None


def _short(loc: str) -> str:
    """A library's ``file:line`` from its package on (``scipy/optimize/_optimize.py:3``)."""
    for d in library_dirs():
        if loc.startswith(d):
            return loc[len(d):]
    return loc


def _code(loc: str | None) -> str:
    fname, _, line = (loc or "").rpartition(":")
    return linecache.getline(fname, int(line)).strip() if line.isdigit() else ""


def _at(loc: str | None) -> str:
    """`` at file.py:3: `y = float(x)` `` (empty without a location)."""
    if not loc:
        return ""
    code = _code(loc)
    return f" at {loc}" + (f": `{code}`" if code else "")


# --- control flow -------------------------------------------------------------------------

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
    text = _code(loc)
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
            "softmax, polygamma, scipy.optimize.rosen, ...) cannot run on traced values: use "
            "fusegrad.scipy.stats / fusegrad.scipy.special or fnp.* instead. ")


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

_GRAD_EVALUATES = (" (fg.grad, value_and_grad, vjp, jvp and hessian called on arrays, "
                   "outside fg.jit and fg.vmap, do evaluate such values: see "
                   "docs/control_flow.md)")


_GRAD_CONVERTS = (" (fg.grad, value_and_grad, vjp, jvp and hessian called on arrays, "
                  "outside fg.jit and fg.vmap, do convert values that do not depend on a "
                  "differentiated input: see docs/control_flow.md)")


def concrete_error(type_, construct: str, kind: str = "value",
                   who: str | None = None) -> TracerError:
    """Python control flow (``kind``: "bool", "index") on a traced value of type ``type_``
    that an abstract trace of kind ``who`` has no value for."""
    loc = user_location()
    if kind == "bool":
        construct, kind = _bool_construct(loc)
    where = f" at {loc}" if loc else ""
    why = f" ({_NO_VALUES[who]})" if who in _NO_VALUES else ""
    err = TracerError(
        f"{construct} needs a concrete value, but got a traced {type_}{where}{why}. "
        f"{_scipy_hint(loc)}Python control flow on traced values cannot be recorded: "
        f"{_INSTEAD[kind]} {_ALL}. "
        "Or decide the control flow outside the transformed function, or pass the "
        "deciding argument as static: fg.jit(f, static_argnums=...)."
        + ("" if who else _GRAD_EVALUATES)
    )
    err.traced = f"a traced {type_}{where}"  # for errors that explain it themselves
    return err


# --- conversions ----------------------------------------------------------------------------

#: guard kind -> the conversion, as the error names it
CONVERSIONS = {
    "float": "float()",
    "int": "int()",
    "complex": "complex()",
    "item": ".item()",
    "tolist": ".tolist()",
    "array": "converting it to a NumPy array (np.asarray, np.array, or NumPy converting a "
             "list that holds it: np.array / np.mean / np.sum / np.full... of a list)",
}
#: a store into an array, ``a[i] = x`` or ``a[i] += x`` (compiled by its first search, in
#: an error: 2 ms at import)
_STORE = r"(^|;)\s*[\w.]+\s*\[[^;]*\]\s*([-+*/@%]|//|\*\*)?=(?!=)"

_KEEP = ("To keep the gradient, keep the value traced: use it directly (operators, fnp.* "
         "functions) instead of a Python number; fnp.asarray / fnp.array / fnp.stack (and "
         "fnp.mean, fnp.sum... of a list) instead of np.asarray / np.array; and instead of "
         "storing into a NumPy array (g = np.zeros(n); g[i] = v) update a traced array, "
         "g = g.at[i].set(v), starting from a traced one (fnp.zeros_like(x), or "
         "fg.stop_gradient(np.zeros(n))), or build the array with fnp.stack / "
         "fnp.concatenate / fnp.pad.")
_CUT = (" To cut the gradient on purpose, convert fg.stop_gradient(x) instead "
        "(float(fg.stop_gradient(x)), np.asarray(fg.stop_gradient(x))).")


def _conversion(kind: str, loc: str | None) -> str:
    if kind in ("float", "array", "complex", "int") and re.search(_STORE, _code(loc)):
        return "storing it into a NumPy array (`a[i] = x` converts x with " + (
            "np.asarray)" if kind == "array" else f"{CONVERSIONS[kind]})")
    return CONVERSIONS[kind]


def conversion_error(type_, kind: str, who: str | None,
                     dependent: bool) -> TracerConversionError:
    """A conversion (``kind``: a key of ``CONVERSIONS``) of a traced value of type
    ``type_``: one whose gradient it would drop (``dependent``), or one an abstract trace
    of kind ``who`` has no value for."""
    loc, lib = _conversion_sites()
    where = _at(loc) + (f" (converted inside {_short(lib)})" if lib else "")
    what = _conversion(kind, loc)
    if dependent:
        msg = (f"{what} of a traced {type_} that depends on an input being differentiated"
               f"{where}: the result would be a constant of the trace, so the gradient "
               f"through it would be lost and the derivative silently wrong. "
               f"{_scipy_hint(lib)}{_KEEP}{_CUT} If the value only decides Python control "
               "flow, compare the traced value itself (`if x > 0:` works under fg.grad), "
               "or use " + ("fg.fori_loop(lower, upper, body_fn, init) or fg.scan(f, init, "
                            "xs) for a loop bound, " if kind == "int" else "")
               + "fg.cond / fg.while_loop / fnp.where(cond, a, b).")
    else:
        why = f" ({_NO_VALUES[who]})" if who in _NO_VALUES else ""
        instead = _INSTEAD["int" if kind == "int" else "value"]
        msg = (f"{what} needs a concrete value, but got a traced {type_}{where}{why}. "
               f"{_scipy_hint(lib)}{_KEEP} If the value decides Python control flow, "
               f"{instead} {_ALL}, or pass the deciding argument as static: "
               "fg.jit(f, static_argnums=...)." + ("" if who else _GRAD_CONVERTS))
    err = TracerConversionError(msg)
    err.traced = f"a traced {type_}{_at(loc)}"  # for errors that explain it themselves
    return err
