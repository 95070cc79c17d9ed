"""The exported W1 gradient (``fg.grad(f).njit(x)``) called from a user's ``@njit`` loop,
against the same loop calling the hand-written Numba gradient (``kernels.w1_grad``).

Both loops are compiled Numba code calling a Numba function ``reps`` times, so the
time per call is what calling fusegrad from Numba code costs: building the sizes
table, allocating the result, the fused loop. Rounds alternate between the two
(interleaved), the report is medians and their ratio; the target is at most 1.1x::

    taskset -c 1 python -m benchmarks.numba_export            # n = 16 and n = 1e6
    taskset -c 1 python -m benchmarks.numba_export --rounds 3 --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from .elementwise import data, numpy_grad
from .run import ONE_THREAD_ENV

TARGET = 1.1


def loops():
    """``(exported_loop, hand_loop)``: ``loop(x, reps)`` calling one gradient ``reps``
    times and returning the sum of the first elements (so no call is dropped)."""
    import numba

    import fusegrad as fg
    import fusegrad.numpy as fnp

    from . import kernels

    def f(x):
        return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)

    g = fg.grad(f).njit(np.zeros(4))
    hand = kernels.w1_grad

    @numba.njit(error_model="numpy")
    def exported_loop(x, reps):
        s = 0.0
        for _ in range(reps):
            s += g(x)[0]
        return s

    @numba.njit(error_model="numpy")
    def hand_loop(x, reps):
        s = 0.0
        for _ in range(reps):
            s += hand(x)[0]
        return s

    return exported_loop, hand_loop, g


def measure(n: int, rounds: int, budget: float = 0.2) -> dict:
    """Median seconds per call of each loop at size ``n``, rounds interleaved."""
    exported_loop, hand_loop, g = loops()
    x = data(n)
    np.testing.assert_allclose(g(x), numpy_grad(x), rtol=1e-10, atol=1e-12)
    exported_loop(x, 1), hand_loop(x, 1)  # compile
    t0 = time.perf_counter()
    hand_loop(x, 3)
    reps = max(1, int(budget / max((time.perf_counter() - t0) / 3, 1e-9)))
    times: dict[str, list[float]] = {"exported": [], "hand-written": []}
    for _ in range(rounds):
        for name, loop in (("exported", exported_loop), ("hand-written", hand_loop)):
            t0 = time.perf_counter()
            loop(x, reps)
            times[name].append((time.perf_counter() - t0) / reps)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"n": n, "reps": reps, **med, "ratio": med["exported"] / med["hand-written"]}


def _fmt(s: float) -> str:
    return f"{s * 1e6:.3f} µs" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true", help="shorter rounds")
    opts = p.parse_args(argv)
    os.environ.update(ONE_THREAD_ENV)
    worst = 0.0
    for n in (16, 1_000_000):
        r = measure(n, opts.rounds, 0.05 if opts.quick else 0.2)
        worst = max(worst, r["ratio"])
        print(f"W1 grad n={n}: exported {_fmt(r['exported'])}, hand-written Numba "
              f"{_fmt(r['hand-written'])} per call ({r['reps']} calls per round) -> "
              f"ratio {r['ratio']:.2f} (target <= {TARGET:g})")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
