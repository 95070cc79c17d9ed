"""Read bandwidth of this machine: one process against two concurrent processes.

Each process is pinned to its own core and sums its own float32 array (``--gb`` GB,
much larger than the caches) with a compiled reduction. Rounds alternate: process 0
alone, then both together (started on a barrier). A memory-bound gradient on two
workers cannot beat one worker by more than the ratio printed last::

    python benchmarks/memory_bandwidth.py --gb 1 --rounds 9
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np


def _kernel():
    import numba

    @numba.njit(fastmath=True, nogil=True, cache=False)
    def total(a):
        s = np.float32(0)
        for i in range(a.size):  # reassociated (fastmath): vectorised, several lanes
            s += a[i]
        return s

    return total


def _kernels(nbytes: int) -> dict:
    """``{name: function of no arguments}`` reading about ``nbytes`` of this process's
    own data (written here, so its pages are this process's)."""
    total = _kernel()
    a = np.ones(nbytes // 4, np.float32)
    total(a[:1024])
    return {"sum": lambda: total(a)}


def _run(rank, core, nbytes, rounds, reps, barrier, out):
    os.sched_setaffinity(0, {core})
    kernels = _kernels(nbytes)
    times = {(k, m): [] for k in kernels for m in ("solo", "pair")}
    for _ in range(rounds):
        for name, f in kernels.items():
            for mode in ("solo", "pair"):
                barrier.wait()
                if mode == "solo" and rank == 1:
                    barrier.wait()
                    continue
                t0 = time.perf_counter()
                for _ in range(reps):
                    f()
                times[name, mode].append((time.perf_counter() - t0) / reps)
                barrier.wait()
    out.put((rank, times))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args(argv)
    os.environ.update(NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")  # before any compile
    nbytes = int(a.gb * 1e9)
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    cores = sorted(os.sched_getaffinity(0))[:2]
    procs = [ctx.Process(target=_run, args=(r, cores[r], nbytes, a.rounds, a.reps, barrier,
                                            out))
             for r in range(2)]
    for q in procs:
        q.start()
    res = dict(out.get() for _ in procs)
    for q in procs:
        q.join()
    for name in dict.fromkeys(k for k, _ in res[0]):
        solo = [nbytes / t / 1e9 for t in res[0][name, "solo"]]
        # both arrays read, over the time the slower of the two took (started together)
        pair = [2 * nbytes / max(t0, t1) / 1e9
                for t0, t1 in zip(res[0][name, "pair"], res[1][name, "pair"])]
        print(f"{name}: one process (GB/s):  ", [round(x, 1) for x in solo])
        print(f"{name}: two processes (GB/s):", [round(x, 1) for x in pair])
        ratios = [b / s for s, b in zip(solo, pair)]
        print(f"{name}: median one {statistics.median(solo):.1f} GB/s, two "
              f"{statistics.median(pair):.1f} GB/s; ratio per round "
              f"{[round(r, 2) for r in ratios]}, median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
