"""The hash of some of fusegrad's own source files, which the caches' salts hold.

Reading and hashing the ~100 files of the code generator, the passes, the tracer and
the IR cost every process 5 ms before its first compile (or cache load). The digest
of their bytes is kept in the (private) cache directory under the hash of their
names, sizes, modification times and inode numbers, so a later process stats the
files and reads one small file instead. Any edit, new or removed file changes that
signature (an edit that keeps a file's size and its modification time to the
nanosecond is not seen: Python's own ``.pyc`` check compares less), and the bytes are
hashed again.
"""

from __future__ import annotations

import os
import tempfile

try:  # CPython's own SHA-256, the same digests: ``hashlib`` loads OpenSSL's libcrypto
    from _sha256 import sha256  # first, 7 ms of a first gradient (3.10, 3.11)
except ImportError:
    try:
        from _sha2 import sha256  # 3.12 on
    except ImportError:
        from hashlib import sha256


def _files(root: str, dirs: tuple[str, ...], files: tuple[str, ...]) -> list[str]:
    """The ``.py`` files under ``root``'s ``dirs`` and ``files``, as sorted relative
    ``/``-separated paths."""
    found = list(files)
    cut = len(os.path.normpath(root)) + 1
    for sub in dirs:
        for folder, names, entries in os.walk(os.path.normpath(os.path.join(root, sub))):
            names[:] = [d for d in names if d != "__pycache__"]
            rel = folder[cut:]  # "" for root itself
            found += [os.path.join(rel, e) if rel else e for e in entries if e.endswith(".py")]
    return sorted(p.replace(os.sep, "/") for p in found)


def _content(root: str, paths: list[str]) -> str:
    h = sha256()
    for rel in paths:
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.encode() + b"\0" + f.read())
    return h.hexdigest()


def digest(root: str, dirs: tuple[str, ...] = (), files: tuple[str, ...] = (),
           memo: str | None = None) -> str:
    """The hash of the contents (and relative paths) of the ``.py`` files under
    ``root``'s folders ``dirs`` and of ``files``; ``memo``: a private directory where it is
    kept by the files' signature (None: hashed every time)."""
    paths = _files(root, dirs, files)
    if memo is None:
        return _content(root, paths)
    sig = sha256()
    for rel in paths:
        st = os.stat(os.path.join(root, rel))
        sig.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    path = os.path.join(memo, f"sources_{sig.hexdigest()[:32]}.txt")
    try:
        with open(path) as f:
            kept = f.read()
        if len(kept) == 64 and all(c in "0123456789abcdef" for c in kept):
            return kept
    except OSError:
        pass
    value = _content(root, paths)
    tmp = None
    try:  # a new file renamed over the name: a reader never sees half of it
        fd, tmp = tempfile.mkstemp(dir=memo, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(value)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return value
