"""The IR passes' result for a traced function, and how it was compiled, kept on disk
by the hash of its text.

``simplify`` and ``fuse`` cost a large program a third of a second or more (a GPT
training step's 2,000 ops: 0.34 s) and give the same fused Function for the same
traced one. So the fused Function is pickled into the cache directory under the hash
of the traced Function's text (every op, attribute, constant and source location)
and of the passes' and IR's own sources; a later process that traces the same
program reads it back instead of running the passes. Beside it is the plan the lean
generator compiled it by (its segments and their text digests), so a warm start
neither splits nor prints the program again: together with the lean generator's
manifests (``codegen/lean``), a warm start is tracing and loading.

An entry is its body's SHA-256 then the pickle: a damaged or unreadable entry is
ignored (the passes run and write it again). The directory is the private one the
machine code lives in, as trusted as that code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle

from ..codegen import compile as cg_compile
from ..ir import Function
from ..ir.printer import print_function

_salt: list[str] = []


def _passes_salt() -> str:
    """The hash of the sources the entry depends on (``ir``, ``passes`` and the
    segmenting in ``runtime/lean_exec.py``) and of the code generator's salt
    (versions included)."""
    if not _salt:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256(cg_compile.salt().encode())
        for sub in ("ir", "passes"):
            for folder, dirs, files in sorted(os.walk(os.path.join(root, sub))):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(f for f in files if f.endswith(".py")):
                    with open(os.path.join(folder, name), "rb") as f:
                        h.update(name.encode() + f.read())
        with open(os.path.join(root, "runtime", "lean_exec.py"), "rb") as f:
            h.update(f.read())  # how a program is split into segments
        _salt.append(h.hexdigest())
    return _salt[0]


def key(fn: Function) -> str | None:
    """The entry's name for traced ``fn`` (None: an attribute has no text form)."""
    try:
        text = print_function(fn, locs=True)
    except TypeError:
        return None
    return "passes_" + hashlib.sha256((_passes_salt() + text).encode()).hexdigest()[:32]


def _path(name: str) -> str:
    folder = os.path.join(cg_compile._directory(), "lean")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{name}.pkl")


def load(name: str) -> tuple[Function, list] | None:
    """The ``(fused, plan)`` stored under ``name`` (None: none, or unreadable)."""
    try:
        with open(_path(name), "rb") as f:
            data = f.read()
        if hashlib.sha256(data[32:]).digest() != data[:32]:
            return None
        fused, plan = pickle.loads(data[32:])
    except Exception:  # unreadable: the passes run again
        return None
    return (fused, plan) if isinstance(fused, Function) and isinstance(plan, list) else None


def store(name: str, entry: tuple[Function, list]) -> None:
    """Keep ``(fused, plan)``: the passes' result and how the lean generator split it
    into segments, with each segment's text digest (``lean_exec.LeanExecutable``)."""
    with contextlib.suppress(Exception):  # an unwritable or unpicklable result: no entry
        body = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        cg_compile.write_atomic(_path(name), hashlib.sha256(body).digest() + body)
