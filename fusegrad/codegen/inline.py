"""``inline_njit``: a Numba function that LLVM, not Numba, inlines into its callers.

Numba's ``inline="always"`` copies a callee's Numba IR into every caller, so each
generated kernel re-types, re-checks and re-lowers the whole math library it
calls: compile time grew with the square of a program's size (a 320-op gradient
took minutes, almost all of it in Numba's SSA reconstruction). A function made
with ``inline_njit`` is compiled once per signature and kept in Numba's disk
cache like any ``cache=True`` function; when it is compiled or loaded, its LLVM
definitions are marked ``alwaysinline`` in the module that callers link, so
LLVM's inliner takes it into the calling loop (and the loop still vectorises),
while Numba's front end sees one call.
"""

from __future__ import annotations

import pickle

from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

from .._sources import sha256
from . import compile as cg_compile

#: functions Numba adds for calls from Python and C, which callers never link
_WRAPPERS = ("cpython.", "cfunc.")


class InlineDispatcher(CPUDispatcher):
    """A ``CPUDispatcher`` whose compiled and cache-loaded overloads are marked for
    inlining before any caller links them (every overload passes through
    ``add_overload``, compiled or loaded from the cache)."""

    def add_overload(self, cres):
        module = cres.library._get_module_for_linking()
        for fn in module.functions:
            if (not fn.is_declaration and not fn.name.startswith(_WRAPPERS)
                    and "alwaysinline" not in str(fn.attributes)):
                fn.add_function_attribute("alwaysinline")
        super().add_overload(cres)


    def enable_caching(self):
        self._cache = _SaltedCache(self.py_func)


class _SaltedCache(FunctionCache):
    """Numba's disk cache, keyed so that it survives across processes and never
    outlives the code it inlined.

    Numba keys a closure by pickling its cells, and a cell holding another
    dispatcher pickles differently in every process: every math-library function
    (closures built per dtype) missed the cache and compiled again in each
    process. Here a dispatcher in a cell is keyed by its Python function's name
    and bytecode, any other cell by its pickle, and every key includes the
    code generator's salt (the hash of its sources and the library versions), as
    the machine code holds inlined copies of functions from other files.
    """

    def _index_key(self, sig, codegen):
        h = sha256(cg_compile.salt().encode())
        _hash_function(h, self._py_func)
        return (sig, codegen.magic_tuple(), (h.hexdigest(),))


def _hash_function(h, func) -> None:
    h.update(f"{func.__module__}.{func.__qualname__}".encode())
    h.update(func.__code__.co_code)
    h.update(repr(func.__code__.co_consts).encode())
    for cell in func.__closure__ or ():
        value = cell.cell_contents
        inner = getattr(value, "py_func", None)
        if inner is not None:
            _hash_function(h, inner)
        else:
            h.update(pickle.dumps(value))


def inline_njit(py_func):
    """``numba.njit(error_model="numpy", cache=True)`` with LLVM-level inlining."""
    disp = InlineDispatcher(py_func, targetoptions={"nopython": True, "error_model": "numpy"})
    disp.enable_caching()
    return disp
