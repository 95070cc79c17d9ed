"""Arrays handed to a compiled entry as its buffer slots (see ``codegen.buffers``).

Each Executable keeps a small pool of *arenas* (one array per arena slot of its
plan). A call takes an arena from the pool (or allocates one when all are in use,
e.g. by concurrent callers), runs, and gives it back, so a steady-state call allocates
no intermediates. ``FUSEGRAD_BUFFER_POOL`` arenas at most are kept per Executable, and
``FUSEGRAD_BUFFER_POOL_MAX_MB`` megabytes at most over all of them (beyond that a
call's arena is simply dropped and allocated afresh next time).

Donated slots are filled with the caller's donated arguments, after checking that
the array may be overwritten: writeable, C-contiguous, its memory owned by a NumPy
array or by Numba (not a memory-mapped file or another object's buffer), not sharing
its memory owner with another argument. If not (or with ``FUSEGRAD_DEBUG_NANS``,
which re-runs a call from its inputs), that slot gets a fresh array (the call is
correct either way; it just does not reuse the memory).
"""

from __future__ import annotations

import numpy as np

from .. import _forksafe, config

_lock = _forksafe.lock()
_pooled_bytes = [0]


class BufferPool:
    __slots__ = ("arena_bytes", "donates", "free", "plan")

    def __init__(self, plan):
        self.plan = plan
        self.free: list[list[np.ndarray]] = []
        self.arena_bytes = sum(s.nbytes for s in plan.arena)
        self.donates = any(s.param is not None for s in plan.slots)

    def take(self) -> list[np.ndarray]:
        with _lock:
            if self.free:
                arena = self.free.pop()
                _pooled_bytes[0] -= self.arena_bytes
                return arena
        return [np.empty(s.shape, s.dtype) for s in self.plan.arena]

    def give(self, arena: list[np.ndarray]) -> None:
        with _lock:
            if (len(self.free) < config.BUFFER_POOL and _pooled_bytes[0] + self.arena_bytes
                    <= config.BUFFER_POOL_MAX_MB * (1 << 20)):
                self.free.append(arena)
                _pooled_bytes[0] += self.arena_bytes

    def slots(self, arena: list[np.ndarray], args) -> list[np.ndarray]:
        """The entry's slot arguments: arena arrays and donated arguments in plan order."""
        out, it, owners = [], iter(arena), None
        for s in self.plan.slots:
            if s.param is None:
                out.append(next(it))
            else:
                a = args[s.param]
                if owners is None:  # each argument's memory owner, found once per call
                    owners = [_owner(b) if type(b) is np.ndarray else None for b in args]
                keep = config.DEBUG_NANS or not _may_overwrite(a, args, s.param, owners)
                out.append(np.empty(s.shape, s.dtype) if keep else a)
        return out


def _owner(a):
    """The object owning ``a``'s memory (an array owning it, or another object)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a if a.base is None else a.base


def _distinct(owner) -> bool:
    """Whether arrays with different owners of this kind never overlap: NumPy arrays
    owning their data and Numba's allocations do; buffers of other objects may not."""
    return isinstance(owner, np.ndarray) or type(owner).__module__ in _NUMBA_OWNERS


_NUMBA_OWNERS = ("_nrt_python", "numba.core.runtime._nrt_python")


def _may_overwrite(a, args, k: int, owners=None) -> bool:
    """``a`` is writeable, C-contiguous, its memory is owned by a NumPy array or by
    Numba, and it shares no memory with another argument (arrays with one owner count
    as overlapping even if they do not: the donation is then skipped, never wrong).

    Memory of any other owner is never overwritten: two ``np.memmap`` (``mmap``) views
    of one file are different addresses for the same bytes, which no address comparison
    sees, and other buffers (``bytes``, ctypes, other libraries' tensors) may be
    shared the same way. ``owners``, if given, holds ``_owner`` of each array of
    ``args`` (None for the others)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous or not a.flags.writeable:
        return False
    owner = _owner(a) if owners is None else owners[k]
    if not _distinct(owner):
        return False
    for j, b in enumerate(args):
        if j == k or type(b) is not np.ndarray:
            continue
        other = _owner(b) if owners is None else owners[j]
        if other is owner or (not _distinct(other) and np.may_share_memory(a, b)):
            return False
    return True
