"""llvmlite's MCJIT, shared by every lean module of the process, with a disk cache of
machine code keyed by the hash of each module's own IR.

A module is optimised and compiled once per machine: ``add(ir_text)`` parses the
text, and unless its object file is in the cache (``<cache>/lean/<hash>.o``), runs
LLVM's pass pipeline on it alone (so optimisation cost grows with the number of
kernels, not with their product) before MCJIT compiles it. A module already in
the engine (a kernel shared by two functions, or by two layers of one model) is
never added twice: its symbols are simply used again.

The symbols generated code calls that no module defines (libm, CPython's API, NumPy's
and SciPy's routines) are registered by address (``symbols``), so machine code holds
no address of this process and an object file is valid in any process. A warm start
loads object files without LLVM (``elf``); MCJIT loads the others.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import time
import warnings

from ... import _forksafe, config
from ..._sources import sha256
from ...ir.stats import add_phase
from ..compile import _directory, machine_folder, salt, write_atomic
from . import elf, symbols

_lock = _forksafe.lock()
_state: dict[str, object] = {}
_added: set[str] = set()
_stats = {"compiled": 0, "reused": 0, "loaded": 0}
#: object files read for modules being added, handed to MCJIT by ``_get_buffer``
_pending_objects: dict[str, bytes] = {}


def _llvm():
    """``llvmlite.binding``, initialised once (its native target and printer)."""
    llvm = _state.get("llvm")
    if llvm is None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        symbols.attach(llvm)  # (those of modules loaded without LLVM too)
        _state["llvm"] = llvm
    return llvm


def target_machine(level: int = 3):
    """The host's target machine generating code at optimisation ``level`` (0-3)."""
    tm = _state.get(("tm", level))
    if tm is None:
        llvm = _llvm()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                          features=features_text(),
                                          opt=level, reloc="default", codemodel="jitdefault")
        _state[("tm", level)] = tm
    return tm


def features() -> dict[str, bool]:
    """The instruction-set features generated code may use: the host's, changed by
    ``config.CPU_FEATURES`` (a removed feature takes those built on it along)."""
    got = _state.get("features")
    if got is None:
        got = dict(_llvm().get_host_cpu_features())
        for item in filter(None, config.CPU_FEATURES.split(",")):
            on, name = item[0] == "+", item.lstrip("+-")
            got[name] = on
            if not on:
                for other in list(got):
                    if other.startswith(_BUILT_ON.get(name, "\0")):
                        got[other] = False
        _state["features"] = got
    return got


#: a feature -> the prefix of the names of the features that need it
_BUILT_ON = {"avx512f": "avx512", "avx": "avx", "fma": "fma"}


def features_text() -> str:
    """``features()`` as LLVM's feature string."""
    return ",".join(("+" if on else "-") + name for name, on in sorted(features().items()))


def host_has_fma() -> bool:
    """Whether the host CPU fuses multiply-adds (NumPy's complex products use them there)."""
    return bool(features().get("fma", False))


def vector_bytes() -> int:
    """The width of the widest vector registers generated code uses for floating point:
    64 bytes with AVX-512, 32 with AVX, else 16."""
    got = features()
    return 64 if got.get("avx512f") else 32 if got.get("avx") else 16


def triple_and_layout() -> tuple[str, str]:
    tm = target_machine()
    return tm.triple, str(tm.target_data)


def _engine():
    ee = _state.get("ee")
    if ee is None:
        llvm = _llvm()
        ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine())
        ee.set_object_cache(None, _get_buffer)  # every module's object comes from ``add``
        _index_modules(ee)
        _state["ee"] = ee
    return ee


#: the address of each module added to the engine -> its ``ModuleRef``
_by_address: dict[int, object] = {}


def _index_modules(ee) -> None:
    """Make the engine find the module its object cache is asked about by a dict lookup.
    llvmlite's ``ExecutionEngine._find_module_ptr`` compares the address against every
    module added so far, with two ctypes casts each: loading a 160-module program
    made 13,000 comparisons. Falls back to llvmlite's own search for a module not
    indexed here."""
    search = getattr(ee, "_find_module_ptr", None)
    if search is None:  # another llvmlite: its own way
        return

    def find(module_ptr):
        module = _by_address.get(ctypes.cast(module_ptr, ctypes.c_void_p).value)
        return module if module is not None else search(module_ptr)

    with contextlib.suppress(AttributeError):  # (an engine without a __dict__: its own)
        ee._find_module_ptr = find


def _add_module(ee, mod) -> None:
    ee.add_module(mod)
    _by_address[ctypes.cast(mod._ptr, ctypes.c_void_p).value] = mod


def _object_path(name: str, create: bool = False, folder: str | None = None) -> str:
    """Where module ``name``'s object file is kept; ``create``: make the folder (to
    write it; a read needs none: a missing folder is a missing file); ``folder``: the
    cache directory's ``lean`` folder, if the caller has it."""
    if name.startswith("rt_"):  # the runtime's own modules: kept once per machine
        return os.path.join(machine_folder(), f"{name}.o")
    folder = folder or os.path.join(_directory(), "lean")
    if create:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{name}.o")


def _keep_object(name: str, buffer: bytes) -> None:
    # the object file behind the hash of its bytes: a damaged file is never loaded; an
    # unwritable cache costs a compile next time, nothing else
    with contextlib.suppress(OSError):
        write_atomic(_object_path(name, create=True),
                     sha256(buffer).digest() + buffer)


def _read_object(name: str, folder: str | None = None) -> bytes | None:
    """The cached object file of module ``name``; a damaged one is removed (with one
    warning) and None returned, so the module compiles again."""
    path = _object_path(name, folder=folder)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    digest, body = data[:32], data[32:]
    if sha256(body).digest() == digest:
        return body
    if not _state.get("warned damage"):  # one warning per process, however many
        _state["warned damage"] = True
        warnings.warn(f"fusegrad: a damaged machine-code cache entry ({path}) was removed "
                      "and is compiled again (later ones are too, silently)", RuntimeWarning,
                      stacklevel=4)
    with contextlib.suppress(OSError):
        os.unlink(path)
    return None


def _get_buffer(module):
    return _pending_objects.pop(module.name, None)


def module_name(ir_text: str) -> str:
    """The content hash naming a module: its IR, the code generator's salt and the
    optimisation level."""
    return "fgl_" + sha256(f"{salt()}{config.OPT}{ir_text}".encode()).hexdigest()[:32]


#: how hard LLVM works on each kind of module: ``(pass pipeline level, code generation
#: level)``, at most ``FUSEGRAD_OPT``. Kernels are the loops, vectorised at level 2 (3
#: doubled their compile time and changed no measured step time); the runtime's own
#: modules (``copies``), named ``rt_...`` and kept once per machine beside the math
#: library, the same.
#: An entry is straight-line driver code (unpacking arguments, calls to kernels and
#: BLAS, scalar arithmetic) run once per call: optimising it bought nothing measurable
#: and cost half of a large program's compile, so it gets the always-inline pipeline
#: and the fast instruction selector. A small kernel (at most ``SMALL_KERNEL``
#: iterations, named ``s_...``: the kernels of a gradient of a few variables, of a
#: Jacobian of a small function) runs for nanoseconds: it keeps the pass pipeline
#: (vectorised: the light pipeline made a 16-element gradient's call 25% slower) and
#: gets the fast instruction selector, a quarter less compile for the nested Jacobian.
LEVELS = {"kernel": (2, 3), "runtime": (2, 3), "entry": (0, 0), "small": (2, 0)}


def _levels(kind: str) -> tuple[int, int]:
    passes, codegen = LEVELS[kind]
    return min(passes, config.OPT), min(codegen, config.OPT)


def _optimise(mod, level: int) -> None:
    llvm = _llvm()
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = level >= 2
    pto.slp_vectorization = level >= 2
    pb = llvm.create_pass_builder(target_machine(), pto)
    pb.getModulePassManager().run(mod, pb)


def add(ir_text: str, name: str, link=None, kind: str = "kernel") -> bool:
    """Make module ``name`` (IR ``ir_text``) part of the engine: from the disk cache, or
    (after ``link(module)`` adds what it calls, if given) optimised and compiled at the
    levels of its ``kind`` (``LEVELS``). Returns whether it was compiled (False: reused
    in memory or loaded)."""
    with _lock:
        if name in _added:
            _stats["reused"] += 1
            return False
        llvm = _llvm()
        symbols.provide(symbols.host_symbols(ir_text))
        t0 = time.perf_counter()
        mod = llvm.parse_assembly(ir_text)
        mod.name = name
        data = _read_object(name)
        cached = data is not None
        if not cached:
            data = compile_object(mod, link, kind)
            t0 = time.perf_counter()
        _pending_objects[name] = data
        ee = _engine()
        _add_module(ee, mod)
        ee.finalize_object()
        add_phase("cache load" if cached else "machine code", time.perf_counter() - t0)
        _added.add(name)
        _stats["loaded" if cached else "compiled"] += 1
        return not cached


def compile_object(mod, link=None, kind: str = "kernel") -> bytes:
    """The machine code of parsed module ``mod`` (named), after ``link(mod)`` if given,
    optimised at the levels of its ``kind``, and kept in the disk cache."""
    t0 = time.perf_counter()
    if link is not None:
        link(mod)
    passes, codegen = _levels(kind)
    _optimise(mod, passes)
    t1 = time.perf_counter()
    add_phase("LLVM optimisation", t1 - t0)
    data = target_machine(codegen).emit_object(mod)
    _keep_object(mod.name, data)
    add_phase("machine code", time.perf_counter() - t1)
    return data


def count_compiled(names: int) -> None:
    """Count ``names`` modules loaded from the cache as compiled (their machine code was
    made for this program, on helper processes)."""
    with _lock:
        _stats["loaded"] -= names
        _stats["compiled"] += names


def load_objects(names: list[str]) -> bool:
    """Add modules ``names`` from their cached machine code alone (no IR). False if one
    is not cached (none is added then). Loaded without LLVM where the objects allow
    (``elf``), else by MCJIT, given the object file for an empty module of each name."""
    with _lock:
        t0 = time.perf_counter()
        folder = os.path.join(_directory(), "lean")  # once, not per module
        found: dict[str, bytes] = {}
        for name in names:
            if name in _added or name in found:
                _stats["reused"] += 1
                continue
            data = _read_object(name, folder)
            if data is None:
                return False
            found[name] = data
        if found and not _load_elf(found):
            _load_mcjit(found)
        _added.update(found)
        _stats["loaded"] += len(found)
        add_phase("cache load", time.perf_counter() - t0)
    return True


def _load_elf(objects: dict[str, bytes]) -> bool:
    if not elf.supported() or config.LOAD_WITH_LLVM:
        return False
    try:
        exports = elf.load(list(objects.values()), _resolve)
    except elf.Unloadable:
        return False
    for name, address_ in exports.items():
        symbols.define(name, address_)
    return True


def _resolve(name: str) -> int | None:
    """A symbol for a module loaded without LLVM: a host's or a loaded module's (also
    one MCJIT loaded)."""
    found = symbols.resolve(name)
    if not found and "ee" in _state:
        found = _state["ee"].get_function_address(name)
    return found


def _load_mcjit(objects: dict[str, bytes]) -> None:
    llvm = _llvm()
    ee = _engine()
    for name, data in objects.items():
        mod = llvm.parse_assembly("")
        mod.name = name
        _pending_objects[name] = data
        _add_module(ee, mod)
    ee.finalize_object()


def _manifest_path(key: str, create: bool = False) -> str:
    return _object_path(key, create)[:-2] + ".json"


def read_manifest(key: str) -> dict | None:
    """What ``write_manifest`` recorded under ``key`` (None: nothing, or damaged)."""
    try:
        with open(_manifest_path(key), "rb") as f:
            data = f.read()
        manifest = json.loads(data[32:])
    except (OSError, ValueError):
        return None
    return manifest if sha256(data[32:]).digest() == data[:32] else None


def write_manifest(key: str, manifest: dict) -> None:
    body = json.dumps(manifest).encode()
    with contextlib.suppress(OSError):
        write_atomic(_manifest_path(key, create=True), sha256(body).digest() + body)


def address(symbol: str) -> int:
    found = symbols.address(symbol)
    if found:
        return found
    with _lock:
        return _engine().get_function_address(symbol)


def stats() -> dict[str, int]:
    """Modules compiled, reused in memory and loaded from the disk cache so far."""
    return dict(_stats)


def assembly(ir_text: str, link=None, kind: str = "kernel") -> str:
    """The machine code LLVM makes of ``ir_text``, optimised as ``add`` does (for reading)."""
    with _lock:
        mod = _llvm().parse_assembly(ir_text)
        if link is not None:
            link(mod)
        passes, codegen = _levels(kind)
        _optimise(mod, passes)
        return target_machine(codegen).emit_assembly(mod)


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


_METH_FASTCALL = 0x80
_new_cfunction = ctypes.pythonapi.PyCFunction_NewEx
_new_cfunction.restype = ctypes.py_object
_new_cfunction.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
_keep: list = []  # method definitions live as long as the process (as CPython requires)


def builtin(symbol: str, label: str):
    """A Python builtin function calling the generated ``symbol``, a ``METH_FASTCALL``
    C function ``(self, args, nargs) -> self``: no ctypes conversion per call."""
    md = _MethodDef(label.encode(), address(symbol), _METH_FASTCALL, None)
    _keep.append(md)
    return _new_cfunction(ctypes.addressof(md), None, None)
