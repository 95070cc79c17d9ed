"""Locks that a child process made by ``os.fork()`` gets back unlocked.

``fork`` copies only the thread that calls it. A lock that another thread held at that
moment stays held in the child, by a thread that does not exist there, and the child's
first attempt to take it waits forever: a process pool forked while a thread compiles,
say. Every lock of fusegrad is made here; in the child each is reset to unlocked (an
``RLock`` the forking thread itself holds excepted). Modules that keep other state about
work in flight in other threads register their own ``os.register_at_fork`` hook, which
runs after this one.
"""

from __future__ import annotations

import os
import threading
import weakref

_made: weakref.WeakSet = weakref.WeakSet()
_RLock = type(threading.RLock())


def lock() -> threading.Lock:
    """A ``threading.Lock`` that is unlocked in a forked child."""
    made = threading.Lock()
    _made.add(made)
    return made


def rlock() -> threading.RLock:
    """A ``threading.RLock`` that is unlocked in a forked child (unless the forking
    thread holds it)."""
    made = threading.RLock()
    _made.add(made)
    return made


def _unlock_in_child() -> None:
    for held in list(_made):
        if not (type(held) is _RLock and held._is_owned()):
            held._at_fork_reinit()


os.register_at_fork(after_in_child=_unlock_in_child)
