"""A chunk's gradient inside a Dask worker against the same call in this process.

One single-threaded ``LocalCluster`` worker holds two persisted chunks (float32,
``--n`` examples of ``--d`` features, generated on the worker as in
``dask_scaling.py``). The same function, ``chunk_value_and_grad`` with the same shipped
gradient, runs as a task on the worker's chunk, on a fresh copy of it made in the
worker, in this process on the chunk received from the worker (unpickled), and on a
fresh copy of that; interleaved, the worker and this process pinned to the same core,
one thread each. Prints wall and CPU times, how much of each array lies in transparent
huge pages, and the minor page faults of the computing thread per chunk (a Dask worker
runs with glibc's mmap threshold fixed, so a large temporary array faults anew on every
call)::

    python benchmarks/dask_worker_chunk.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import numpy as np


def loss(w, X, y):
    import fusegrad.numpy as fnp

    return fnp.mean(fnp.logaddexp(0, -y * (X @ w)))


def huge_kb(a) -> int:
    """AnonHugePages (kB) of the mappings overlapping ``a``'s data (Linux)."""
    lo_a = a.__array_interface__["data"][0]
    hi_a = lo_a + a.nbytes
    inside, total = False, 0
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(maxsplit=1)[0]
                if "-" in head and ":" not in head:
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = lo < hi_a and hi > lo_a
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1])
    except OSError:
        return -1
    return total


def _pin(core):
    os.sched_setaffinity(0, {core})
    import numba

    return numba.config.NUMBA_NUM_THREADS


def timed(args, X, y, reps: int, copy: bool):
    from fusegrad.distributed.grad import chunk_value_and_grad

    shipped, frees, block, w = args
    if copy:
        X, y = np.array(X, copy=True), np.array(y, copy=True)
    wall, cpu = [], []
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.thread_time()
        chunk_value_and_grad(shipped, True, [w], frees, "<f4", block, X, y)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    faults = (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults) / reps
    return wall, cpu, huge_kb(X) * 1024 / X.nbytes, faults


def main(argv=None) -> None:
    import dask
    import dask.array as da
    import distributed

    from fusegrad.distributed import grad as dg
    from fusegrad.ir import TensorType

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=625_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--core", type=int, default=sorted(os.sched_getaffinity(0))[-1])
    p.add_argument("--quiet", action="store_true", help="the worker's event loop wakes "
                   "rarely (admin tick, memory and system monitors every 10 s)")
    a = p.parse_args(argv)
    if a.quiet:
        dask.config.set({"distributed.admin.tick.interval": "10s",
                         "distributed.worker.memory.monitor-interval": "10s",
                         "distributed.admin.system-monitor.interval": "10s"})
    n, d = int(a.n), a.d
    env = {"NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    os.environ.update(env)  # before this process's first compile
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40, env=env)
    client = distributed.Client(cluster)
    try:
        threads = {"worker": next(iter(client.run(_pin, a.core).values())),
                   "here": _pin(a.core)}
        rs = da.random.RandomState(0)
        X = rs.standard_normal((2 * n, d), chunks=(n, d)).astype(np.float32)
        y = da.sign(rs.standard_normal(2 * n, chunks=n).astype(np.float32))
        X, y = client.persist([X, y])
        distributed.wait([X, y])
        w = np.zeros(d, np.float32)
        block = min(n, dg.rows_per_call([X, y]))
        made = [dg.gradient_of(loss, w, [TensorType((r, d), np.float32),
                                         TensorType((r,), np.float32)], "bench")
                for r in (block, n % block) if r]
        frees = [m[1] for m in made] + [()] * (2 - len(made))
        shipped = [tuple(m[0]) for m in made] + [None] * (2 - len(made))
        args = (shipped, frees, block, w)
        Xb, yb = X.to_delayed().ravel()[0], y.to_delayed().ravel()[0]
        Xl, yl = dask.compute(Xb, yb)  # pickled over to this process
        cases = ("worker's chunk", "worker, a copy", "here, received", "here, a copy")
        res = {k: ([], []) for k in cases}
        huge, faults = {}, {}
        for _ in range(a.rounds):
            for k in cases:
                copy = k.endswith("copy")
                if k.startswith("worker"):
                    out = client.compute(dask.delayed(timed)(args, Xb, yb, 3, copy)).result()
                else:
                    out = timed(args, Xl, yl, 3, copy)
                res[k][0].extend(out[0])
                res[k][1].extend(out[1])
                huge[k], faults[k] = out[2], out[3]
        print(f"n = {n}, d = {d}, float32, {block} rows per compiled call, Numba threads "
              f"{threads}, core {a.core}, {a.rounds} rounds"
              + (", quiet worker" if a.quiet else ""))
        print("| where | wall median | CPU median | in huge pages | page faults per chunk |")
        print("|---|---:|---:|---:|---:|")
        for k, (wall, cpu) in res.items():
            print(f"| {k} | {statistics.median(wall) * 1e3:.1f} ms | "
                  f"{statistics.median(cpu) * 1e3:.1f} ms | {huge[k]:.0%} | {faults[k]:.0f} |")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
