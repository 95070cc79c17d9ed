"""The code generator's on-disk cache: its directory and its salt.

What compiled code keeps on disk (machine code per module, manifests, the math
library's bitcode, pass results, reproducers) lives in one directory
(``_directory``), under names hashed with ``salt``: the code generator's own sources,
the versions of fusegrad, Numba, llvmlite, NumPy and Python, and the CPU the machine
code is made for, so any of those changing is a miss, never a stale load (a cache
shared by machines of different CPUs, as a home directory on a cluster is, keeps
each one's machine code apart). Writes are atomic (``write_atomic``: a new
file renamed over the name, a symlink there replaced, never followed).

Trust: whoever can write to the cache directory can change the code every process
that uses it runs. So the directory is created ``0700`` and used only if it (and its
``__pycache__``) is owned by this user and not writable by group or others;
otherwise, or if it is not writable, fusegrad warns once and uses a private
temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
import warnings

from .. import _forksafe, _sources, config
from .._sources import sha256
from .._version import __version__

_HERE = os.path.dirname(os.path.abspath(__file__))
_locks_guard = _forksafe.lock()
_fallback_dir: str | None = None


def _installed_version(dist: str) -> str:
    """The version of distribution ``dist``, from the name of the first ``.dist-info``
    folder of it on ``sys.path`` (``importlib.metadata`` finds the same folder, but loading
    it and the email parser it reads ``METADATA`` with costs a first gradient 30 ms)."""
    prefix = f"{dist}-"
    for entry in sys.path:
        with contextlib.suppress(OSError):
            for name in os.listdir(entry or "."):
                if name.startswith(prefix) and name.endswith(".dist-info"):
                    return name[len(prefix):-len(".dist-info")]
    import importlib.metadata  # an egg, a zip: whatever importlib.metadata reads

    return importlib.metadata.version(dist)


def _salt() -> str:
    import llvmlite
    import numpy

    h = sha256()
    # every source under this directory, the math library's subpackage included; the
    # digest kept by the files' signature (``_sources``)
    h.update(_sources.digest(_HERE, (".",), memo=sources_memo()).encode())
    # Numba's version from the module where it is loaded, else from its installed
    # distribution: the lean generator never imports Numba
    numba = sys.modules.get("numba")
    numba_version = numba.__version__ if numba is not None else _installed_version("numba")
    versions = (__version__, numba_version, llvmlite.__version__, numpy.__version__,
                sys.version)
    h.update(repr(versions).encode())
    h.update(_machine().encode())
    return h.hexdigest()


#: what ``/proc/cpuinfo`` says of a CPU that decides the machine code made for it
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "flags", "isa",
               "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part")


def _machine() -> str:
    """The CPU machine code is made for (LLVM targets the host's own): its vendor, model
    and instruction-set features, from the first processor's entry in ``/proc/cpuinfo``
    on Linux (cheap; what LLVM's detection reads, as the kernel reports it), else from
    LLVM."""
    keep = []
    with (contextlib.suppress(OSError),
          open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f):
        for line in f:
            if not line.strip():
                break
            if line.split(":", 1)[0].strip() in _CPU_FIELDS:
                keep.append(" ".join(line.split()))
    if config.CPU_FEATURES:
        keep.append(f"changed features: {config.CPU_FEATURES}")
    if keep:
        return "\n".join(keep)
    import llvmlite.binding as llvm

    return f"{llvm.get_host_cpu_name()} {llvm.get_host_cpu_features().flatten()}"


_SALT: str | None = None
#: the package's folder for what is made once per machine (None: not writable), then
#: the folder it is kept in (``machine_folder``)
_package_folder: list[str | None] = []


def _in_package() -> str | None:
    """The package's folder for what is made once per machine, if it can be written."""
    if not _package_folder:
        here = os.path.join(_HERE, "mathlib", "__pycache__")
        with contextlib.suppress(OSError):
            os.makedirs(here, exist_ok=True)
        _package_folder.append(here if os.access(here, os.W_OK) else None)
    return _package_folder[0]


def machine_folder() -> str:
    """Where what is built once per machine is kept (the math library's bitcode, the
    runtime's own modules, the digests of the sources): beside Numba's cache of the math
    library, in the package, as trusted as the package itself; where the package cannot
    be written, in the cache directory."""
    if len(_package_folder) < 2:
        folder = _in_package()
        if folder is None:
            folder = os.path.join(_directory(), "lean")
            os.makedirs(folder, mode=0o700, exist_ok=True)
        _package_folder.append(folder)
    return _package_folder[1]


def sources_memo() -> str | None:
    """Where the digests of fusegrad's sources are kept by the files' signature
    (``_sources.digest``): the package's folder for what is made once per machine (an
    empty cache directory hashes no source), else the cache directory if this process
    checked it already (finding a salt makes no directory), else nowhere."""
    return _in_package() or _fallback_dir or (
        config.CACHE_DIR if config.CACHE_DIR in _verified and _still_private(config.CACHE_DIR)
        else None)


def salt() -> str:
    """The hash of the code generator's sources and the versions it depends on."""
    global _SALT
    if _SALT is None:
        _SALT = _salt()
    return _SALT


#: cache directories this process checked and found private and writable
_verified: set[str] = set()


def _directory() -> str:
    """The cache directory, or this process's fallback (the same one for every thread).
    A directory checked before in this process is only looked at again (one ``stat``:
    still a private directory of this user), not written to: a warm start reads an
    object file per module, each asking for the directory."""
    if _fallback_dir is not None:
        return _fallback_dir
    path = config.CACHE_DIR
    if path in _verified and _still_private(path):
        return path
    with _locks_guard:
        return _checked_directory()


def _still_private(path: str) -> bool:
    """Whether checked directory ``path`` is still a directory of this user that no one
    else can write to, and so is its ``__pycache__`` (or there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o022
            and (not hasattr(os, "geteuid") or st.st_uid == os.geteuid())
            and _untrusted(os.path.join(path, "__pycache__")) is None)


def _checked_directory() -> str:
    global _fallback_dir
    if _fallback_dir is not None:
        return _fallback_dir
    try:
        os.makedirs(config.CACHE_DIR, mode=0o700, exist_ok=True)
        problem = _untrusted(config.CACHE_DIR) or _untrusted(
            os.path.join(config.CACHE_DIR, "__pycache__"))
        if problem is None:
            with tempfile.NamedTemporaryFile(dir=config.CACHE_DIR):
                pass
            # Numba keeps its index there: made private before Numba makes it under the umask
            os.makedirs(os.path.join(config.CACHE_DIR, "__pycache__"), mode=0o700, exist_ok=True)
            _verified.add(config.CACHE_DIR)
            return config.CACHE_DIR
        why = (f"is {problem}, so others could put code in it that this process would run; "
               f"make it yours and private (chmod 700) or set FUSEGRAD_CACHE_DIR")
    except OSError as e:
        why = (f"is not writable ({e}). Set FUSEGRAD_CACHE_DIR to a writable directory to "
               "keep it across runs")
    _fallback_dir = tempfile.mkdtemp(prefix="fusegrad-")
    warnings.warn(
        f"fusegrad: cache directory {config.CACHE_DIR!r} {why}; compiled code is kept in "
        f"{_fallback_dir} for this process only.",
        RuntimeWarning,
        stacklevel=5,
    )
    return _fallback_dir


def _untrusted(path: str) -> str | None:
    """Why ``path`` (if it exists) must not be trusted with code, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {st.st_mode & 0o777:o})"
    return None


def write_atomic(path: str, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to a new private file and rename it to ``path`` (a
    symlink at ``path`` is replaced, its target never written)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
