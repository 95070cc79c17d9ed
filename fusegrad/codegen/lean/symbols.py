"""The symbols generated code calls that no generated module defines, by address.

Machine code holds no address of the process that made it: it calls the C library's
math functions, CPython's API (``Py_IncRef``, ``PyEval_SaveThread``, ...), NumPy's and
SciPy's BLAS, LAPACK, FFT and ufunc loops, SciPy's special functions and fusegrad's
Numba C functions by name, and each process defines those names here (``define``) at
the addresses it finds them at: the host's at first use (``_register_host``), the
routines a module names as it is loaded (``host_symbols`` / ``provide``). The objects
NumPy's ``IndexError``, ``ValueError`` and ``LinAlgError`` are read through variables
named ``fusegrad_PyExc_IndexError``, ... that nothing else in the process defines.
LLVM, when loaded, is given them all (``attach``); modules loaded without it
(``elf``) find them by ``resolve``.
"""

from __future__ import annotations

import ctypes
import re
import sys

_state: dict[str, object] = {}
#: the addresses of symbols generated code calls that no module defines (the host's:
#: ``_register_host``, ``provide``) and of the symbols of modules loaded without LLVM
#: (``elf``); LLVM is given every one when it loads (``attach``)
_symbols: dict[str, int] = {}


def attach(llvm) -> None:
    """Give LLVM's binding, just loaded, every symbol defined so far (and, by
    ``define``, every later one)."""
    _register_host()
    _state["llvm"] = llvm
    for name, address_ in _symbols.items():
        llvm.add_symbol(name, address_)


def address(name: str) -> int | None:
    """The address ``name`` was defined at here, if it was."""
    return _symbols.get(name)


def define(name: str, address_: int) -> None:
    """Make ``name`` resolve to ``address_`` in every module loaded from now on."""
    _symbols[name] = address_
    llvm = _state.get("llvm")
    if llvm is not None:
        llvm.add_symbol(name, address_)


def _register_host() -> None:
    if _state.get("host"):
        return
    _state["host"] = True
    api = ctypes.pythonapi
    for name in ("Py_IncRef", "PyEval_SaveThread", "PyEval_RestoreThread", "PyErr_Format"):
        define(name, ctypes.cast(getattr(api, name), ctypes.c_void_p).value)
    for exc in ("IndexError", "ValueError"):
        define(f"fusegrad_PyExc_{exc}",
               ctypes.addressof(ctypes.c_void_p.in_dll(api, f"PyExc_{exc}")))
    import numpy as np

    # a variable holding the class (as ``PyExc_IndexError`` holds its), kept alive here
    _state["LinAlgError"] = cell = ctypes.c_void_p(id(np.linalg.LinAlgError))
    define("fusegrad_LinAlgError", ctypes.addressof(cell))
    _define_libc(_LIBM)
    _define_libc(_libc_more)


def _define_libc(names) -> None:
    libc = ctypes.CDLL(None)
    for name in names:
        fn = getattr(libc, name, None)
        if fn is not None:
            define(name, ctypes.cast(fn, ctypes.c_void_p).value)


#: more C library functions generated code may call (``add_libc``)
_libc_more: list[str] = []


def add_libc(names) -> None:
    """Register C library functions ``names`` too (a module of element rules calling
    them adds them as it is imported)."""
    _libc_more.extend(names)
    if _state.get("host"):
        _define_libc(names)


def resolve(name: str) -> int | None:
    """The address of ``name`` for a module loaded without LLVM: a symbol defined here,
    one LLVM knows if it is loaded (a library it loaded), else the process's."""
    _register_host()
    found = _symbols.get(name)
    if found:
        return found
    # LLVM's symbols: ours once it is loaded, or those others gave it (Numba's threading
    # layer registers ``numba_parallel_for`` and ``get_num_threads`` there)
    llvm = _state.get("llvm") or sys.modules.get("llvmlite.binding")
    found = llvm.address_of_symbol(name) if llvm is not None else None
    if found:
        return found
    fn = getattr(ctypes.CDLL(None), name, None)
    return ctypes.cast(fn, ctypes.c_void_p).value if fn is not None else None


_SPECIAL = re.compile(r"@\"?fusegrad_cs_(\w+)")
_LAPACK = re.compile(r"@\"?fusegrad_(lapack(?:64)?|cblas64|ufunc|numba)_(\w+)")
_POCKETFFT = re.compile(r"@\"?fusegrad_pocketfft_([a-z_]+_[df])\b")


def blas_address(name: str, module: str = "cython_blas") -> int:
    """The address of SciPy's BLAS (or, ``module="cython_lapack"``, LAPACK) routine
    ``name`` (Fortran calling convention): from the OpenBLAS library SciPy's wheels
    bundle, opened directly (importing ``scipy.linalg`` for its ``cython_blas`` costs
    a third of a second), else from ``scipy.linalg.<module>``, whatever BLAS and
    LAPACK that SciPy was built with."""
    lib = bundled_blas()
    fn = getattr(lib, f"scipy_{name}_", None) if lib is not None else None
    if fn is not None:
        return ctypes.cast(fn, ctypes.c_void_p).value
    from .loader import capsule_address  # (llvmlite's binding is loaded by then)

    return capsule_address(f"scipy.linalg.{module}", name)


def bundled_blas():
    """SciPy's bundled LP64 OpenBLAS (``scipy.libs/libscipy_openblas-*.so``), or None."""
    return _bundled("scipy", "libscipy_openblas-*")


def numpy_blas():
    """The ILP64 OpenBLAS NumPy's wheels bundle (``numpy.libs/libscipy_openblas64_*``,
    already loaded by NumPy: opening it again finds the same library), or None."""
    return _bundled("numpy", "libscipy_openblas64_*")


def numpy_lapack():
    """``numpy_blas`` if it has the LAPACK ``np.linalg`` calls (as
    ``scipy_<routine>_64_``), else None (a NumPy built against another LAPACK)."""
    lib = numpy_blas()
    return lib if lib is not None and hasattr(lib, "scipy_dgetrf_64_") else None


def _bundled(package: str, pattern: str):
    """``loader.bundled``, opened once per process."""
    key = ("bundled", package)
    if key not in _state:
        from .loader import bundled

        _state[key] = bundled(package, pattern)
    return _state[key]


def host_symbols(ir_text: str) -> list[str]:
    """The SciPy and NumPy routines module ``ir_text`` calls by address (``provide``
    them)."""
    out = [f"blas:{r}" for r in ("dgemm", "sgemm") if f'@"fusegrad_{r}"' in ir_text]
    out += [f"{kind}:{r}" for kind, r in sorted(set(_LAPACK.findall(ir_text)))]
    out += [f"pocketfft:{r}" for r in sorted(set(_POCKETFFT.findall(ir_text)))]
    return out + [f"special:{c}" for c in sorted(set(_SPECIAL.findall(ir_text)))]


def provide(symbols: list[str]) -> None:
    """Register the addresses of SciPy's BLAS (``blas:<routine>``, imported only for
    a program with products), LAPACK (SciPy's, ``lapack:<routine>``, or NumPy's,
    ``lapack64:<routine>``), NumPy's CBLAS (``cblas64:<name>``), special functions
    (``special:<cname>``), ufunc loops (``ufunc:<name>``), NumPy's FFT loops
    (``pocketfft:<ufunc>_<d|f>``, ``fourier``) and fusegrad's Numba C functions
    (``numba:<name>``)."""
    done = _state.setdefault("provided", set())
    for sym in symbols:
        if sym in done:
            continue
        kind, name = sym.split(":")
        if kind == "blas":
            define(f"fusegrad_{name}", blas_address(name))
        elif kind == "lapack":
            define(f"fusegrad_lapack_{name}", blas_address(name, "cython_lapack"))
        elif kind == "lapack64":
            from .loader import numpy_lapack_address

            define(f"fusegrad_lapack64_{name}", numpy_lapack_address(name))
        elif kind == "pocketfft":  # NumPy's FFT loop and its data
            from .loader import pocketfft_address

            loop, data = pocketfft_address(name)
            define(f"fusegrad_pocketfft_{name}", loop)
            if data:
                define(f"fusegrad_pocketfft_{name}_data", data)
        elif kind == "cblas64":
            from .loader import numpy_cblas_address

            define(f"fusegrad_cblas64_{name}", numpy_cblas_address(name))
        elif kind == "numba":  # Numba C functions (``ufuncs.py``)
            from .loader import numba_address

            define(f"fusegrad_numba_{name}", numba_address(name))
        elif kind == "ufunc":  # a ufunc's loop and its data (``ufuncs.py``)
            from .loader import UFUNCS, ufunc_loop

            loop, data = ufunc_loop(UFUNCS[name])
            define(f"fusegrad_ufunc_{name}", loop)
            define(f"fusegrad_ufdata_{name}", data)
        else:
            from .loader import capsule_address

            define(f"fusegrad_cs_{name}", capsule_address("scipy.special.cython_special", name))
        done.add(sym)


#: the C math functions generated code may call (float64 and float32 versions)
_LIBM = tuple(n + s for n in (
    "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "cbrt",
    "pow", "erf", "erfc", "fmod", "sqrt", "floor", "ceil", "rint", "fabs", "trunc",
) for s in ("", "f"))
