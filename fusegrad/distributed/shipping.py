"""Traced gradients travel to workers as IR text; each worker compiles one once.

The client traces and differentiates; :func:`ship` prints the resulting Function. A
worker's :func:`executable_for` parses the text and compiles it (or finds it in the disk
cache) the first time it meets its key, and keeps the executable for the process's
life. No generated code and no Python closure of the user's is ever pickled: the tasks
carry the text, the arrays and the names of functions of this module.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from .. import _forksafe, config
from ..ir import Function
from ..ir.parser import parse_function
from ..ir.printer import print_function
from ..ir.stats import compile_stats as _local_compile_stats
from ..runtime.compiled import executable
from ..runtime.interpreter import run


class Shipped(NamedTuple):
    """A Function as text, with the key workers cache its executable under."""

    key: str
    text: str


def ship(fn: Function) -> Shipped:
    text = print_function(fn)
    return Shipped(hashlib.sha256(text.encode()).hexdigest(), text)


_EXES: dict = {}  # key -> executable, in each worker process
_LOCK = _forksafe.lock()


def executable_for(shipped: Shipped):
    """The compiled callable for ``shipped`` in this process (parsed and compiled once;
    the interpreter under ``FUSEGRAD_DISABLE_JIT=1``)."""
    exe = _EXES.get(shipped.key)
    if exe is None:
        with _LOCK:
            exe = _EXES.get(shipped.key)
            if exe is None:
                fn = parse_function(shipped.text)
                exe = (lambda *a: run(fn, *a)) if config.DISABLE_JIT else executable(fn)
                _EXES[shipped.key] = exe
    return exe


def _worker_stats() -> dict:
    stats = _local_compile_stats()
    stats["shipped_functions"] = len(_EXES)
    return stats


def compile_stats(client=None) -> dict:
    """``{worker address: fg.compile_stats()}`` over a ``dask.distributed`` client's
    workers (the current client if ``client`` is None), each with the number of shipped
    functions that worker holds compiled (``"shipped_functions"``)."""
    if client is None:
        from distributed import get_client

        client = get_client()
    return client.run(_worker_stats)
