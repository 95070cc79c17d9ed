"""Data-parallel gradient throughput on Dask: one worker against two.

A logistic-regression loss (mean log-loss, float32) over ``--n`` examples of ``--d``
features, generated and kept on the workers (as many chunks on each). Two
``LocalCluster``s run side by side, one of 1 worker and one of 2, each worker a
single-threaded process (Numba and BLAS on one thread); their
``fusegrad.distributed.value_and_grad`` calls are interleaved and the medians compared.
A tiny loss over two chunks of 8 examples measures the per-step overhead (scheduling,
shipping parameters and gradients, the tree sum)::

    python benchmarks/dask_scaling.py                  # n = 1e7, d = 100
    python benchmarks/dask_scaling.py --n 1e6 --repeats 5
    python benchmarks/dask_scaling.py --threads --n 2e6   # Dask's threaded scheduler
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def loss(w, X, y):
    import fusegrad.numpy as fnp

    return fnp.mean(fnp.logaddexp(0, -y * (X @ w)))


def _cluster(n_workers: int):
    import distributed

    env = {"NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       silence_logs=40, env=env)
    return cluster, distributed.Client(cluster, set_as_default=False)


def _pin_workers(client) -> None:
    """Pin the cluster's workers to distinct cores (worker i to the i-th allowed core)."""
    import os

    cores = sorted(os.sched_getaffinity(0))
    for i, addr in enumerate(sorted(client.scheduler_info()["workers"])):
        client.run(os.sched_setaffinity, 0, {cores[i % len(cores)]}, workers=[addr])


def _data(client, n: int, d: int, chunk: int):
    """``X`` [n, d] and labels ``y``, kept on the workers: consecutive runs of chunks, as
    many on each worker (a gradient's tasks go where their data are; left to itself, the
    scheduler may place 9 chunks of 16 on one worker and 7 on the other)."""
    import dask.array as da

    workers = sorted(client.scheduler_info()["workers"])
    with client.as_current():
        rs = da.random.RandomState(0)
        X = rs.standard_normal((n, d), chunks=(chunk, d)).astype(np.float32)
        w_true = np.linspace(-1, 1, d).astype(np.float32)
        y = da.sign(X @ w_true + rs.standard_normal(n, chunks=chunk).astype(np.float32))
        edges = np.linspace(0, len(X.chunks[0]), len(workers) + 1).astype(int) * chunk
        parts = []
        for w, a, b in zip(workers, edges[:-1], edges[1:]):
            # one after the other: the halves share small keys (w_true), which two
            # persists in flight at once, restricted to different workers, would race for
            parts.append(client.persist([X[a:b], y[a:b]], workers=[w]))
            distributed_wait(parts[-1])
        X, y = client.persist([da.concatenate([p[i] for p in parts]) for i in (0, 1)])
        distributed_wait([X, y])
    return X, y


def chunks_per_worker(client, X) -> list[int]:
    """How many chunks of ``X`` each worker holds, most first."""
    import collections

    held = collections.Counter(w for ws in client.who_has(X).values() for w in ws)
    return sorted(held.values(), reverse=True)


def _tiny(client, d: int):
    """Two chunks of 8 examples, kept on the workers: a step that is all overhead."""
    import dask.array as da

    with client.as_current():
        X = da.from_array(np.ones((16, d), np.float32), chunks=(8, d))
        y = da.from_array(np.ones(16, np.float32), chunks=8)
        X, y = client.persist([X, y])
        distributed_wait([X, y])
    return X, y


def distributed_wait(xs):
    from distributed import wait

    wait(xs)


def _time(client, fn) -> float:
    with client.as_current():
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def threaded(n: int, d: int, chunks: int, repeats: int) -> None:
    """Dask's threaded scheduler in this process (no ``distributed``), 1 thread against
    2: NumPy data cut into ``chunks``; compiled calls release the GIL."""
    import dask
    import dask.array as da

    from fusegrad import distributed as fd

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = np.sign(rng.standard_normal(n)).astype(np.float32)
    rows = -(-n // chunks)
    Xd, yd = da.from_array(X, chunks=(rows, d)), da.from_array(y, chunks=rows)
    w = np.zeros(d, np.float32)
    times = {1: [], 2: []}
    for r in range(repeats + 1):  # the first round compiles
        for k in times:
            with dask.config.set(scheduler="threads", num_workers=k):
                t0 = time.perf_counter()
                fd.value_and_grad(loss, w, Xd, yd)
                if r:
                    times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"threaded scheduler, logistic regression, n = {n:.3g}, d = {d}, float32, "
          f"{chunks} chunks, {repeats} interleaved rounds, medians: 1 thread "
          f"{med[1] * 1e3:.1f} ms, 2 threads {med[2] * 1e3:.1f} ms, "
          f"ratio {med[1] / med[2]:.2f}x")


def main(argv=None) -> None:
    from fusegrad import distributed as fd

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e7)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--chunks", type=int, default=16, help="chunks along the examples")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--pin", action="store_true", help="pin each worker to its own core")
    p.add_argument("--threads", action="store_true",
                   help="Dask's threaded scheduler in this process instead of LocalClusters")
    a = p.parse_args(argv)
    n, d = int(a.n), a.d
    if a.threads:
        return threaded(n, d, a.chunks, a.repeats)
    chunk = -(-n // a.chunks)
    clusters = {k: _cluster(k) for k in (1, 2)}
    try:
        if a.pin:
            for _, c in clusters.values():
                _pin_workers(c)
        data = {k: _data(c, n, d, chunk) for k, (_, c) in clusters.items()}
        w = np.zeros(d, np.float32)
        results, overhead = {1: [], 2: []}, {1: [], 2: []}
        tiny = {k: _tiny(c, d) for k, (_, c) in clusters.items()}

        for k, (_, c) in clusters.items():  # compile on every worker, detect the mean
            _time(c, lambda k=k: fd.value_and_grad(loss, w, *data[k]))
            _time(c, lambda k=k: fd.value_and_grad(loss, w, *tiny[k]))
        values = {}
        for _ in range(a.repeats):
            for k, (_, c) in clusters.items():
                results[k].append(_time(c, lambda k=k: values.__setitem__(
                    k, fd.value_and_grad(loss, w, *data[k]))))
        for _ in range(4 * a.repeats):  # apart: right after a large step, Dask is still busy
            for k, (_, c) in clusters.items():  # releasing its intermediate results
                overhead[k].append(_time(c, lambda k=k: fd.value_and_grad(loss, w, *tiny[k])))
        print("chunks per worker:", {k: chunks_per_worker(c, data[k][0])
                                     for k, (_, c) in clusters.items()})
        print("rounds (ms):", {k: [round(t * 1e3) for t in v] for k, v in results.items()})
        np.testing.assert_allclose(values[1][1], values[2][1], rtol=1e-4)
        med = {k: statistics.median(v) for k, v in results.items()}
        print(f"logistic regression, n = {n:.3g}, d = {d}, float32, {a.chunks} chunks, "
              f"{a.repeats} interleaved rounds, medians" + (", workers pinned" if a.pin else ""))
        ratios = [t1 / t2 for t1, t2 in zip(results[1], results[2])]
        print("ratio per round:", [round(r, 2) for r in ratios])
        print("| workers | gradient time | examples/s | per-step overhead (2 chunks of 8) |")
        print("|---|---:|---:|---:|")
        for k in (1, 2):
            print(f"| {k} | {med[k] * 1e3:.0f} ms | {n / med[k]:.3g} | "
                  f"{statistics.median(overhead[k]) * 1e3:.1f} ms |")
        print(f"throughput ratio, 2 workers / 1 worker: {med[1] / med[2]:.2f}x")
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()


if __name__ == "__main__":
    main()
