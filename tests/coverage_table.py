"""The coverage table of ``docs/coverage.md``, made from fusegrad's own registries.

``python -m tests.coverage_table`` prints the page; ``tests/test_coverage_table.py``
fails when the page and the registries disagree, so the table cannot go stale. It lists
every NumPy and SciPy function fusegrad computes on traced values (and whether it is
differentiable), and every NumPy function it does not, which raises a ``TypeError``
naming the function.
"""

from __future__ import annotations

import inspect
import types

import numpy as np

import fusegrad.numpy as fnp
import fusegrad.scipy.integrate as fintegrate
import fusegrad.scipy.linalg as flinalg
import fusegrad.scipy.optimize as foptimize
import fusegrad.scipy.signal as fsignal
import fusegrad.scipy.special as fspecial
import fusegrad.scipy.stats as fstats
from fusegrad.ir import array as A
from fusegrad.ir.methods import _np_name
from fusegrad.numpy import linalg as fnp_linalg
from fusegrad.numpy._coverage import ADDED

#: NumPy functions whose results carry no gradient, and why
NOT_DIFFERENTIABLE = {
    **dict.fromkeys(["argmax", "argmin", "argsort", "argpartition", "searchsorted", "nonzero"],
                    "integer result"),
    **dict.fromkeys(["equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
                     "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
                     "isfinite", "isinf", "isclose", "allclose", "signbit"], "boolean result"),
    **dict.fromkeys(["sign", "floor", "ceil", "round", "around", "rint", "trunc", "fix",
                     "floor_divide"], "piecewise constant: zero gradient"),
    **dict.fromkeys(["shape", "ndim", "size"], "metadata"),
    "copyto": "in-place write: raises, naming the fnp function to use",
    "where": "three arguments: differentiable in both branches; one argument: concrete "
             "conditions only",
}

#: NumPy namespaces whose functions the table accounts for
NAMESPACES = {"np": np, "np.linalg": np.linalg, "np.fft": np.fft}

STATS_METHODS = ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "pmf", "logpmf")


def _dispatchable(obj) -> bool:
    """A NumPy function that hands traced arguments to fusegrad (a ufunc, or one that
    dispatches through ``__array_function__``)."""
    return isinstance(obj, np.ufunc) or hasattr(obj, "_implementation")


def numpy_rows() -> list[tuple[str, str, str]]:
    """``(name, differentiable, note)`` for every NumPy function fusegrad implements."""
    rows = {}
    for func in A.NUMPY_FUNCTIONS:
        name = _np_name(func)
        short = name.rsplit(".", 1)[-1]
        why = NOT_DIFFERENTIABLE.get(short)
        diff = "no" if why and short != "where" else "yes"
        note = why or (ADDED[short][1] if short in ADDED else "")
        rows[name] = (name, diff, note)
    for name in getattr(fnp_linalg, "__all__", ()):
        obj = getattr(fnp_linalg, name)
        if callable(obj) and not isinstance(obj, type):
            rows.setdefault(f"np.linalg.{name}", (f"np.linalg.{name}", "yes", (
                f"as fnp.linalg.{name} only: np.linalg.{name} of a traced value raises")))
    fft = getattr(fnp, "fft", None)
    if isinstance(fft, types.ModuleType):
        for name in getattr(fft, "__all__", ()):
            concrete = name.endswith("freq")
            rows.setdefault(f"np.fft.{name}", (f"np.fft.{name}", "no" if concrete else "yes",
                                               "concrete values" if concrete else ""))
    return sorted(rows.values())


def unsupported() -> dict[str, list[str]]:
    """NumPy functions that reach fusegrad on traced arguments and raise there."""
    done = {_np_name(f) for f in A.NUMPY_FUNCTIONS} | {r[0] for r in numpy_rows()
                                                        if "only:" not in r[2]}
    out = {}
    for prefix, mod in NAMESPACES.items():
        names = []
        for name in sorted(getattr(mod, "__all__", dir(mod))):
            obj = getattr(mod, name, None)
            if name.startswith("_") or obj is None or not _dispatchable(obj):
                continue
            full = f"{prefix}.{name}"
            if full not in done and _np_name(obj) not in done:
                names.append(full)
        out[prefix] = names
    return out


#: notes on SciPy functions differentiable to a limited order in some arguments
SCIPY_NOTES = {
    "betainc": "first derivatives in a, b; second ones raise NotImplementedError",
    "betaincc": "as betainc",
    **{f"{d}.{m}": f"first derivatives in {shapes}; second ones raise NotImplementedError"
       for d, shapes in (("t", "df"), ("beta", "a, b")) for m in ("cdf", "logcdf", "sf", "logsf")},
}


def scipy_rows() -> list[tuple[str, str, str]]:
    rows = [(f"scipy.special.{n}", "yes", SCIPY_NOTES.get(n, "")) for n in fspecial.__all__]
    for family in fstats.__all__:
        mod = getattr(fstats, family)
        for m in STATS_METHODS:
            fn = getattr(mod, m, None)
            if fn is None:
                continue
            try:
                src = inspect.getsource(fn)
            except (OSError, TypeError):
                src = ""
            missing = "not_implemented(" in src or "raise NotImplementedError" in src
            rows.append((f"scipy.stats.{family}.{m}", "no" if missing else "yes",
                         "raises NotImplementedError naming it" if missing
                         else SCIPY_NOTES.get(f"{family}.{m}", "")))
    rows += [(f"scipy.linalg.{n}", "yes", "") for n in flinalg.__all__]
    rows += [(f"scipy.integrate.{n}", "yes", "adjoint method") for n in fintegrate.__all__]
    rows += [(f"scipy.signal.{n}", "yes", "") for n in fsignal.__all__]
    rows.append(("scipy.optimize.minimize", "-", "fg.scipy.minimize: compiled jac (and hessp)"
                 if hasattr(foptimize, "minimize") else ""))
    return rows


def page() -> str:
    num, sci, miss = numpy_rows(), scipy_rows(), unsupported()
    n_diff = sum(r[1] == "yes" for r in num + sci)
    lines = [
        "# What fusegrad differentiates: NumPy and SciPy coverage",
        "",
        "Generated from fusegrad's registries by `python -m tests.coverage_table`;",
        "`tests/test_coverage_table.py` fails when this page and the code disagree.",
        "",
        f"{len(num)} NumPy and {len(sci)} SciPy functions run on traced values; {n_diff} of "
        "them are differentiable (reverse and forward mode, under `vmap`, compiled). NumPy "
        "functions are reached as `np.NAME(x)` on traced arrays (NumPy hands them over) and "
        "as `fnp.NAME`; SciPy's as `fusegrad.scipy.MODULE.NAME` (and `scipy.special`'s "
        "ufuncs also as `scipy.special.NAME(x)`).",
        "",
        "## NumPy",
        "",
        "| function | differentiable | note |",
        "|---|---|---|",
        *[f"| `{n}` | {d} | {note} |" for n, d, note in num],
        "",
        "## SciPy",
        "",
        "| function | differentiable | note |",
        "|---|---|---|",
        *[f"| `{n}` | {d} | {note} |" for n, d, note in sci],
        "",
        "## Not supported",
        "",
        "These NumPy functions hand traced arguments to fusegrad, which raises a `TypeError` "
        "naming the function (`np.NAME is not supported on fusegrad arrays; use the "
        "fusegrad.numpy function of that name if there is one`). Functions NumPy runs "
        "itself on a list it converts (`np.array([x, y])`, `np.mean([x, y])`) cannot be "
        "intercepted: under `fg.jit` they raise an error naming `fnp.array` / `fnp.stack`, "
        "under `fg.grad` they raise `fg.TracerConversionError` when the list holds values "
        "that depend on a differentiated input (the conversion would drop their gradient).",
        "",
    ]
    for prefix, names in miss.items():
        lines.append(f"- `{prefix}` ({len(names)}): "
                     + (", ".join(f"`{n.removeprefix(prefix + '.')}`" for n in names) or "none"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(page(), end="")
