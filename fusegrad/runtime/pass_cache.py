"""The IR passes' results for a traced function, and how it was compiled, kept on disk
by a fingerprint of the program.

``simplify`` and ``fuse`` cost a large program a third of a second or more (a GPT
training step's 2,000 ops: 0.34 s) and give the same fused Function for the same
traced one. So the fused Function is kept in the cache directory under the
fingerprint (``ir.fingerprint``: every op, attribute, constant and source location,
what the program's text shows) of the traced Function and the hash of the passes',
tracer's and IR's own sources; a later process that traces the same program reads it
back instead of running the passes. Beside it is the plan the lean generator compiled
it by (its segments and their text digests), so a warm start neither splits nor
prints the program again: together with the lean generator's manifests
(``codegen/lean``), a warm start is tracing and loading.

Reverse mode (``vjp``) is kept the same way: the gradient program of a traced
function (for the differentiated parameters, seeds, name and the location its
ops without a primal op of their own are given), and the name of its own entry, so
the compile that follows looks it up without fingerprinting it (``remember``).

Programs are kept as tables (``ir.serial``: read back in one loop, not one Python call
per object as ``pickle`` of IR objects takes). An entry is its body's SHA-256 then the
pickle: a damaged or unreadable entry is ignored (the passes run and write it again).
The directory is the private one the machine code lives in, as trusted as that code.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections import OrderedDict
from collections.abc import Callable

from .. import _forksafe, _sources, config
from .._sources import sha256
from ..codegen import compile as cg_compile
from ..ir import Function
from ..ir.fingerprint import fingerprint
from ..ir.serial import decode, encode
from ..tracer.core import tracing
from ..tracer.messages import user_location

_salt: list[str] = []
#: id(Function) -> (Function, its entry's name): programs whose name is known without a
#: fingerprint (a gradient program read from, or written to, the cache); the most recent
_known: OrderedDict[int, tuple[Function, str]] = OrderedDict()
_known_lock = _forksafe.lock()
_KNOWN_SIZE = 64


def _passes_salt() -> str:
    """The hash of the sources the entries depend on (``ir``, ``passes``, ``tracer`` and
    the segmenting in ``runtime/lean_exec.py``) and of the code generator's salt
    (versions included)."""
    if not _salt:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sources = _sources.digest(root, ("ir", "passes", "tracer"),
                                  (os.path.join("runtime", "lean_exec.py"),),
                                  memo=cg_compile.sources_memo())
        tiling = f"row tiling {config.ROW_TILING}"  # (passes/tiling.py)
        _salt.append(sha256((cg_compile.salt() + sources + tiling).encode()).hexdigest())
    return _salt[0]


def remember(fn: Function, name: str) -> None:
    """``fn``'s entry is ``name``: ``key(fn)`` returns it without a fingerprint."""
    with _known_lock:
        _known[id(fn)] = (fn, name)
        while len(_known) > _KNOWN_SIZE:
            _known.popitem(last=False)


def key(fn: Function) -> str | None:
    """The entry's name for traced ``fn`` (None: an attribute has no text form)."""
    known = _known.get(id(fn))
    if known is not None and known[0] is fn:
        return known[1]
    digest = fingerprint(fn, locs=True, salt=_passes_salt())
    return None if digest is None else "passes_" + digest[:32]


def _path(name: str, create: bool = False) -> str:
    folder = os.path.join(cg_compile._directory(), "lean")
    if create:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{name}.pkl")


def _read(name: str):
    """The unpickled body of entry ``name`` (None: none, damaged or unreadable)."""
    try:
        with open(_path(name), "rb") as f:
            data = f.read()
        if sha256(data[32:]).digest() != data[:32]:
            return None
        return pickle.loads(data[32:])
    except Exception:  # unreadable: the passes run again
        return None


def _write(name: str, body) -> None:
    with contextlib.suppress(Exception):  # an unwritable or unpicklable result: no entry
        data = pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
        cg_compile.write_atomic(_path(name, create=True), sha256(data).digest() + data)


def load(name: str) -> tuple[Function, list] | None:
    """The ``(fused, plan)`` stored under ``name`` (None: none, or unreadable)."""
    body = _read(name)
    try:
        form, digests = body
        fused, *steps = decode(form)
    except Exception:  # not an entry this version wrote: the passes run again
        return None
    if not isinstance(fused, Function) or len(steps) != len(digests):
        return None
    return fused, list(zip(steps, digests))


def store(name: str, entry: tuple[Function, list]) -> None:
    """Keep ``(fused, plan)``: the passes' result and how the lean generator split it
    into segments, with each segment's text digest (``lean_exec.LeanExecutable``)."""
    fused, plan = entry
    with contextlib.suppress(Exception):  # unencodable: no entry
        body = (encode([fused, *(step for step, _ in plan)]), [d for _, d in plan])
        _write(name, body)


def vjp(fn: Function, wrt, seeds, name, make: Callable[[], Function]) -> Function:
    """``make()``, the reverse-mode program of traced ``fn`` (parameters ``wrt``,
    ``seeds``, ``name``: the arguments it was made with), or the one a process made
    before for the same program, read back. Only outside any trace: inside one (a
    gradient under ``jit``, say), the files this reads and writes would draw their
    temporary names while the user's function is traced, which counts as its side
    effect (``tracer.effects``), and the enclosing program is cached whole anyway."""
    if tracing():
        return make()
    where = user_location()  # the location of ops made outside any primal op's
    salt = _passes_salt() + repr((tuple(wrt), None if seeds is None else tuple(seeds),
                                  name, where))
    digest = fingerprint(fn, locs=True, salt=salt)
    if digest is None:
        return make()
    entry = "vjp_" + digest[:32]
    body = _read(entry)
    if body is not None:
        try:
            form, known = body
            (g,) = decode(form)
        except Exception:  # not an entry this version wrote: made again
            g = None
        if isinstance(g, Function):
            if known is not None:
                remember(g, known)
            return g
    g = make()
    known = key(g)
    if known is not None:
        remember(g, known)
    with contextlib.suppress(Exception):
        _write(entry, (encode([g]), known))
    return g
