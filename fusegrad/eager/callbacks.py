"""Callbacks that run when the backward pass running now finishes (``queue_callback``).

Each ``engine.execute`` opens a queue for its pass (passes nest when a hook
calls backward); ``queue_callback(fn)`` appends to the innermost one, and the
pass calls the queued functions in order after its last node ran, before it
returns (callbacks may queue more). Per thread, as backward passes are.
"""

from __future__ import annotations

import threading

_local = threading.local()


def begin() -> list:
    """Open the queue of a backward pass that starts now."""
    stack = _local.__dict__.get("stack")
    if stack is None:
        stack = _local.stack = []
    queue: list = []
    stack.append(queue)
    return queue


def run(queue: list) -> None:
    """Call the queued functions (including any they queue) in order."""
    while queue:
        queue.pop(0)()


def end() -> None:
    _local.stack.pop()


def queue_callback(fn) -> None:
    """Call ``fn()`` once the backward pass that is running now has finished."""
    stack = _local.__dict__.get("stack")
    if not stack:
        raise RuntimeError("queue_callback can only be called during the backward pass")
    stack[-1].append(fn)
