"""Greedy shrinking of a failing program.

Repeatedly tries smaller variants and keeps the first one that is still valid
(every guard holds, see ``gen.valid``) and still fails the same check:

* drop one instruction, rerouting its uses to one of its operands, or dropping
  everything that depends on it;
* drop an input no instruction uses;
* give an input a smaller shape (``()``, ``(1,)``, ``(4,)``, ``(3, 1)``, ...).

until no variant is accepted. The result is usually one or two ops.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .checks import run_check
from .gen import Program, valid

#: Shapes tried when simplifying an input, smallest first.
SMALL_SHAPES = [(), (1,), (4,), (3, 1), (1, 4), (3, 4)]


def fails(p: Program, check: str) -> bool:
    if not valid(p):
        return False
    try:
        run_check(p, check)
    except Exception:
        return True
    return False


def _drop(p: Program, k: int, reroute: int | None) -> Program | None:
    """``p`` without instruction ``k``; uses of its value read ``reroute`` (an earlier value)
    or, for None, the instructions depending on it are dropped as well."""
    n = p.n_inputs
    dead = {n + k}
    kept = []  # (old value index, instr)
    for pos, ins in enumerate(p.instrs):
        v = n + pos
        if v == n + k:
            continue
        if reroute is None and any(a in dead for a in ins.args):
            dead.add(v)
            continue
        kept.append((v, ins))
    new_index = {i: i for i in range(n)}
    for new_pos, (v, _) in enumerate(kept):
        new_index[v] = n + new_pos
    if reroute is not None:
        new_index[n + k] = new_index[reroute]
    instrs = tuple(replace(ins, args=tuple(new_index[a] for a in ins.args)) for _, ins in kept)
    return replace(p, instrs=instrs)


def _drop_input(p: Program, m: int) -> Program | None:
    if any(m in ins.args for ins in p.instrs) or p.n_inputs == 1:
        return None

    def idx(a):
        return a - 1 if a > m else a

    shapes = p.shapes[:m] + p.shapes[m + 1:]
    instrs = tuple(replace(ins, args=tuple(idx(a) for a in ins.args)) for ins in p.instrs)
    return replace(p, shapes=shapes, instrs=instrs)


def _candidates(p: Program):
    n = p.n_inputs
    for k in reversed(range(len(p.instrs))):
        yield _drop(p, k, None)
        for a in dict.fromkeys(p.instrs[k].args):
            yield _drop(p, k, a)
    for m in reversed(range(n)):
        yield _drop_input(p, m)
    for m in range(n):
        size = int(np.prod(p.shapes[m]))
        for s in SMALL_SHAPES:
            if int(np.prod(s)) < size or (int(np.prod(s)) == size and len(s) < len(p.shapes[m])):
                yield replace(p, shapes=p.shapes[:m] + (s,) + p.shapes[m + 1:])


def shrink(p: Program, check: str, max_steps: int = 200) -> Program:
    """A smaller program that still fails ``check`` (``p`` itself if none is found)."""
    for _ in range(max_steps):
        for cand in _candidates(p):
            if cand is not None and cand.instrs and cand != p and fails(cand, check):
                p = cand
                break
        else:
            return p
    return p
