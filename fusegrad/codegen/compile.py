"""Generated source -> imported module -> compiled entry point, with an on-disk cache.

A module is written to ``<cache>/fg_<key>.py`` where ``key`` hashes the source
together with the code generator's own sources and the versions of fusegrad,
Numba, llvmlite, NumPy and Python, so any of those changing is a miss, never a
stale load. Writes are atomic (temporary file + rename); Numba's ``cache=True``
keeps the machine code next to the file. An unwritable cache directory falls
back to a private temporary directory with one warning.

One lock per key, across threads (a ``threading.Lock``) and processes (``flock``
on ``fg_<key>.lock``), is held while a module is written and imported and while
its first call compiles it, so processes sharing a cold cache compile each module
once and the others load its machine code.

Trust: whoever can write to the cache directory can run code in every process
that uses it (a module is Python source; Numba's index is a pickle). So the
directory is created ``0700`` and used only if it (and its ``__pycache__``) is
owned by this user and not writable by group or others; otherwise fusegrad warns
once and uses a private temporary directory. A module is executed from the
source text fusegrad generated in memory, never from the file's bytes or a
``.pyc``; the lock file is opened without following symlinks, and modules and
reproducers are written to a new file renamed over the old name.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.abc
import importlib.util
import os
import stat
import sys
import tempfile
import threading
import warnings

try:
    import fcntl
except ImportError:  # not POSIX: threads still share one compile, processes may not
    fcntl = None

from .. import _forksafe, _sources, config
from .._version import __version__
from ..ir.errors import FusegradError
from ..ir.stats import count_module

_HERE = os.path.dirname(os.path.abspath(__file__))
_loaded: dict[str, object] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = _forksafe.lock()
#: lock files open in ``key_lock`` (a forked child closes its copies: see ``_forget_flocks``);
#: the guard, held across ``fork``, keeps the set and the open files in step
_flocked: set[int] = set()
_flocked_guard = _forksafe.lock()
_fallback_dir: str | None = None
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # not on Windows


class CacheError(FusegradError, RuntimeError):
    """A cache file fusegrad must write cannot be written (e.g. a directory squats its name)."""


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

    h = hashlib.sha256()
    # every source under this directory, the math library's subpackage included; the
    # digest kept by the files' signature (``_sources``) in the cache directory, if this
    # process checked it already (finding the salt makes no directory)
    memo = _fallback_dir or (config.CACHE_DIR if config.CACHE_DIR in _verified
                             and _still_private(config.CACHE_DIR) else None)
    h.update(_sources.digest(_HERE, (".",), memo=memo).encode())
    # Numba's version from the module where it is loaded, else from its installed
    # distribution: the lean generator never imports Numba
    numba = sys.modules.get("numba")
    numba_version = numba.__version__ if numba is not None else _installed_version("numba")
    versions = (__version__, numba_version, llvmlite.__version__, numpy.__version__,
                sys.version)
    h.update(repr(versions).encode())
    return h.hexdigest()


_SALT: str | None = None


def salt() -> str:
    """The hash of the code generator's sources and the versions it depends on."""
    global _SALT
    if _SALT is None:
        _SALT = _salt()
    return _SALT


def module_key(source: str) -> str:
    return hashlib.sha256((salt() + source).encode()).hexdigest()[:32]


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


@contextlib.contextmanager
def key_lock(key: str):
    """Hold the lock of module ``key``: this process's threads, then other processes.

    Without a lock file (read-only directory, no ``fcntl``) only threads are excluded;
    processes then may compile the same module twice, which is slower, never wrong.
    """
    directory = _directory()
    with _locks_guard:
        lock = _locks.setdefault(key, _forksafe.lock())
    with lock:
        fd = None
        if fcntl is not None:
            with _flocked_guard, contextlib.suppress(OSError):
                fd = os.open(os.path.join(directory, f"fg_{key}.lock"),
                             os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
                _flocked.add(fd)
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd is not None:
                with _flocked_guard:
                    _flocked.discard(fd)
                    os.close(fd)  # releases the flock


def _forget_flocks() -> None:
    """In a forked child: close the lock files that threads of the parent held. The
    child's copies share the parent's open file descriptions, so while they are open the
    ``flock`` stays held: the child (and every other process) would wait for it forever."""
    for fd in list(_flocked):
        with contextlib.suppress(OSError):
            os.close(fd)
    _flocked.clear()


os.register_at_fork(before=_flocked_guard.acquire, after_in_parent=_flocked_guard.release,
                    after_in_child=_forget_flocks)


def load(source: str):
    """The imported module for ``source`` (written to the cache if new)."""
    key = module_key(source)
    mod = _loaded.get(key)
    if mod is not None:
        return mod
    with key_lock(key):
        mod = _loaded.get(key)
        if mod is not None:
            return mod
        path = os.path.join(_directory(), f"fg_{key}.py")
        if not _has_text(path, source):
            try:
                write_atomic(path, source)
            except OSError as e:
                raise CacheError(
                    f"fusegrad: cannot write the generated module {path} ({e}). Remove what "
                    "is at that path, or set FUSEGRAD_CACHE_DIR to another directory.") from e
        name = f"fusegrad_generated.fg_{key}"
        loader = _SourceLoader(source, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        loader.exec_module(mod)
        count_module()
        _loaded[key] = mod
        return mod


class _SourceLoader(importlib.abc.Loader):
    """Executes the generated text itself (named after its file, so Numba caches next to
    it and tracebacks show its lines): never the file's bytes, never a ``.pyc``."""

    def __init__(self, source: str, path: str):
        self.source, self.path = source, path

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        exec(compile(self.source, self.path, "exec", dont_inherit=True), module.__dict__)


def _has_text(path: str, source: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read() == source.encode()
    except OSError:
        return False


_warned: set[str] = set()


def purge(source: str, err: Exception) -> object:
    """Drop a module whose cached machine code failed to load (truncated, corrupt or
    written by another version), warn once per cause, and load it afresh."""
    import glob

    key = module_key(source)
    cause = type(err).__name__
    if cause not in _warned:
        _warned.add(cause)
        warnings.warn(f"fusegrad: a cached compiled function could not be loaded ({cause}: "
                      f"{err}); it was removed and is being recompiled", RuntimeWarning,
                      stacklevel=4)
    directory = os.path.dirname(_loaded[key].__file__) if key in _loaded else _directory()
    for path in glob.glob(os.path.join(directory, "__pycache__", f"fg_{key}*")):
        with contextlib.suppress(OSError):
            os.unlink(path)
    _loaded.pop(key, None)
    sys.modules.pop(f"fusegrad_generated.fg_{key}", None)
    return load(source)
