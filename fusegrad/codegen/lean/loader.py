"""What a module written by ``fusegrad eject`` runs at import: it compiles the module's
LLVM IR with llvmlite for the CPU it runs on (``load``).

``transforms.eject`` copies this file's source into every module it writes, so it
imports only the standard library and llvmlite (and, for a program that calls them,
SciPy's BLAS, LAPACK and special functions, or the LAPACK NumPy bundles, when it
loads): never fusegrad. The engine finds those routines with its ``capsule_address``
and ``bundled`` too.
"""

import contextlib
import ctypes
import glob
import hashlib
import importlib
import importlib.util
import os
import tempfile

import llvmlite

#: the ufuncs of ``scipy.special`` whose loops generated code calls (``ufuncs.UFUNCS``)
UFUNCS = {"zeta": "_ufuncs._zeta"}
#: fusegrad's Numba C functions generated code calls: name -> (module, function giving
#: its address); a program calling them needs fusegrad (and Numba) where it runs
NUMBA = {"gammainc_da": ("fusegrad.ir.incgamma_kernel", "gammainc_da_address"),
         "betainc_grad": ("fusegrad.ir.betainc_kernel", "betainc_grad_address")}


def capsule_address(module: str, name: str) -> int:
    """The address of C function ``name`` that Cython module ``module`` exports."""
    capsule = importlib.import_module(module).__pyx_capi__[name]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                 ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def bundled(package: str, pattern: str):
    """The shared library matching ``pattern`` that ``package``'s wheel bundles (in
    ``<package>.libs``, or ``<package>/.dylibs`` on macOS), opened, or None."""
    spec = importlib.util.find_spec(package)  # finds the package, imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    inside = next(iter(spec.submodule_search_locations))
    paths = sorted(glob.glob(os.path.join(os.path.dirname(inside), f"{package}.libs",
                                          pattern + ".so"))
                   + glob.glob(os.path.join(inside, ".dylibs", pattern + ".dylib")))
    with contextlib.suppress(OSError, IndexError):
        return ctypes.CDLL(paths[0])
    return None


def numpy_lapack_address(name: str) -> int:
    """The address of LAPACK routine ``name`` in the ILP64 OpenBLAS NumPy's wheels
    bundle (``np.linalg``'s)."""
    fn = getattr(bundled("numpy", "libscipy_openblas64_*"), f"scipy_{name}_64_", None)
    if fn is None:
        raise ImportError(f"the compiled code calls NumPy's bundled LAPACK ({name}), "
                          "which this NumPy does not have")
    return ctypes.cast(fn, ctypes.c_void_p).value


#: where a ``PyUFuncObject`` keeps its ``functions`` and ``data`` arrays and ``ntypes``
_UFUNC_FUNCTIONS, _UFUNC_DATA, _UFUNC_NTYPES = 32, 40, 48


def _ufunc_loop_at(ufunc, index: int) -> tuple[int, int]:
    """The addresses of ufunc ``ufunc``'s loop ``index`` (of its ``types``) and of the
    ``data`` NumPy passes it (0 for none), read from the ufunc object."""
    if (type(ufunc).__name__ != "ufunc"
            or ctypes.c_int.from_address(id(ufunc) + _UFUNC_NTYPES).value != len(ufunc.types)):
        raise ImportError(f"the compiled code calls a loop of {ufunc!r}, which this NumPy "
                          "does not keep where the code looks for it")

    def entry(offset):
        table = ctypes.c_void_p.from_address(id(ufunc) + offset).value
        return ctypes.c_void_p.from_address(table + 8 * index).value or 0 if table else 0
    return entry(_UFUNC_FUNCTIONS), entry(_UFUNC_DATA)


def pocketfft_address(name: str) -> tuple[int, int]:
    """The loop of NumPy's pocketfft gufunc ``<ufunc>_<d|f>`` (its double or float loop,
    by the type of its factor) and its data (``_ufunc_loop_at``), from
    ``numpy.fft._pocketfft_umath``."""
    ufunc_name, _, letter = name.rpartition("_")
    module = importlib.import_module("numpy.fft._pocketfft_umath")
    ufunc = getattr(module, ufunc_name, None)
    index = [i for i, t in enumerate(getattr(ufunc, "types", ())) if t[1:2] == letter]
    if not index:
        raise ImportError(f"the compiled code calls NumPy's FFT loop {name}, which this "
                          "NumPy does not have")
    return _ufunc_loop_at(ufunc, index[0])


def numpy_cblas_address(name: str) -> int:
    """The address of CBLAS routine ``cblas_<name>`` in the ILP64 OpenBLAS NumPy's
    wheels bundle (``np.dot``'s)."""
    fn = getattr(bundled("numpy", "libscipy_openblas64_*"), f"scipy_cblas_{name}64_", None)
    if fn is None:
        raise ImportError(f"the compiled code calls NumPy's bundled BLAS ({name}), "
                          "which this NumPy does not have")
    return ctypes.cast(fn, ctypes.c_void_p).value


def ufunc_loop(name: str) -> tuple[int, int]:
    """The float64 inner loop of ufunc ``scipy.special.<name>`` (its ``d...d->d`` loop)
    and that loop's data (``_ufunc_loop_at``)."""
    module, _, attr = name.rpartition(".")
    uf = getattr(importlib.import_module("scipy.special." + module), attr)
    return _ufunc_loop_at(uf, uf.types.index("d" * uf.nin + "->" + "d" * uf.nout))


def numba_address(name: str) -> int:
    """The address of fusegrad's Numba C function ``name`` (``NUMBA``)."""
    module, function = NUMBA[name]
    return getattr(importlib.import_module(module), function)()


def provide(symbols) -> None:
    """Register the functions the modules call by name: ``blas:<routine>`` and
    ``lapack:<routine>`` (SciPy's BLAS and LAPACK), ``lapack64:<routine>`` (NumPy's
    LAPACK), ``cblas64:<name>`` (NumPy's CBLAS), ``special:<cname>`` (``scipy.special``'s
    C functions), ``ufunc:<name>`` (a ufunc's loop and its data), ``pocketfft:<loop>``
    (NumPy's FFT loops and their data), ``numba:<name>`` (``NUMBA``) and C library
    functions (libm's, ``_setjmp``) by their own name."""
    import llvmlite.binding as llvm  # (not before a module is loaded)

    libc = ctypes.CDLL(None)
    for symbol in symbols:
        kind, _, name = symbol.rpartition(":")
        if kind == "blas":
            address = capsule_address("scipy.linalg.cython_blas", name)
            name = "fusegrad_" + name
        elif kind == "lapack":
            address = capsule_address("scipy.linalg.cython_lapack", name)
            name = "fusegrad_lapack_" + name
        elif kind == "lapack64":
            address = numpy_lapack_address(name)
            name = "fusegrad_lapack64_" + name
        elif kind == "cblas64":
            address = numpy_cblas_address(name)
            name = "fusegrad_cblas64_" + name
        elif kind == "special":
            address = capsule_address("scipy.special.cython_special", name)
            name = "fusegrad_cs_" + name
        elif kind == "pocketfft":
            address, data = pocketfft_address(name)
            name = "fusegrad_pocketfft_" + name
            if data:
                llvm.add_symbol(name + "_data", data)
        elif kind == "numba":
            address, name = numba_address(name), "fusegrad_numba_" + name
        elif kind == "ufunc":
            loop, data = ufunc_loop(UFUNCS[name])
            llvm.add_symbol("fusegrad_ufdata_" + name, data)
            address, name = loop, "fusegrad_ufunc_" + name
        else:
            address = ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
        llvm.add_symbol(name, address)


def _cached(cache, name: str, tag: str):
    """The object file kept for module ``name`` under ``tag`` (None: none, or damaged)."""
    try:
        with open(os.path.join(cache, f"{name}.{tag}.o"), "rb") as f:
            data = f.read()
    except (OSError, TypeError):
        return None
    return data[32:] if hashlib.sha256(data[32:]).digest() == data[:32] else None


def _keep(cache, name: str, tag: str, data: bytes) -> None:
    """Keep ``data`` as module ``name``'s object file (nothing if it cannot be written)."""
    if cache is None:
        return
    try:
        os.makedirs(cache, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(data).digest() + data)
        os.replace(tmp, os.path.join(cache, f"{name}.{tag}.o"))
    except OSError:
        pass


def load(modules, symbols, cache=None):
    """An llvmlite execution engine holding ``modules`` (``(name, kind, IR text)``, in
    order) compiled for this CPU: loops (``kernel``, ``runtime``) optimised and
    vectorised, an ``entry`` (straight-line code run once per call) not, each entry's
    symbol registered by name (for ``call_symbol``). Machine code is kept in directory
    ``cache`` (if given) per module, CPU and llvmlite version, and loaded from there
    by later imports. Keep the engine alive."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    provide(symbols)
    target = llvm.Target.from_default_triple()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    tag = hashlib.sha256(f"{cpu} {features} {llvmlite.__version__}".encode()).hexdigest()[:16]
    machines = {level: target.create_target_machine(cpu=cpu, features=features, opt=level,
                                                    reloc="default", codemodel="jitdefault")
                for level in (0, 3)}
    objects = {}
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machines[3])
    engine.set_object_cache(None, lambda mod: objects.pop(mod.name, None))
    for name, kind, text in modules:
        data = _cached(cache, name, tag)
        if data is None:
            mod = llvm.parse_assembly(text)
            mod.name = name
            level = 0 if kind == "entry" else 2
            options = llvm.create_pipeline_tuning_options(speed_level=level)
            options.loop_vectorization = options.slp_vectorization = level >= 2
            passes = llvm.create_pass_builder(machines[3], options)
            passes.getModulePassManager().run(mod, passes)
            data = machines[0 if kind == "entry" else 3].emit_object(mod)
            _keep(cache, name, tag, data)
        mod = llvm.parse_assembly("")  # MCJIT takes the object made for this name
        mod.name = name
        objects[name] = data
        engine.add_module(mod)
    engine.finalize_object()
    for name, kind, _ in modules:
        if kind == "entry":
            llvm.add_symbol(name, engine.get_function_address(name))
    return engine
