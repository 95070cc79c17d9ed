"""One chunk's logistic-regression gradient in this process: products apart or in row tiles.

What a ``fusegrad.distributed`` worker computes per chunk (mean log-loss, float32,
``--n`` examples of ``--d`` features), timed on one core: the gradient compiled with
``X @ w`` and ``X.T @ r`` as separate products (in the cache-sized blocks of examples
the workers used for them) and compiled with row-tile kernels (``passes/rowtile.py``;
one call per chunk), interleaved with a compiled sum of ``X`` (one read: the memory
floor of the moment). Times are this thread's CPU time (so time spent waiting for
other processes on the core is left out; memory contention is not). Run it pinned,
single-threaded::

    NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 1 python benchmarks/rowtile_chunk.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def loss(w, X, y):
    import fusegrad.numpy as fnp

    return fnp.mean(fnp.logaddexp(0, -y * (X @ w)))


def _gradient(n, d, block, row_tiles, w, X, y):
    """A function computing the gradient over all ``n`` rows, ``block`` rows per call."""
    import fusegrad.passes.rowtile as rowtile
    from fusegrad.distributed.grad import gradient_of
    from fusegrad.ir import TensorType
    from fusegrad.ir.parser import parse_function
    from fusegrad.runtime.compiled import executable

    seed = np.ones((), np.float32)
    exes = {}
    rowtile.ENABLED = row_tiles
    try:
        for r in {block, n % block} - {0}:
            types = [TensorType((r, d), np.float32), TensorType((r,), np.float32)]
            shipped = gradient_of(loss, w, types, "bench")[0]
            exes[r] = executable(parse_function(shipped.text))  # a fresh compile
            exes[r](w, X[:r], y[:r], seed)
    finally:
        rowtile.ENABLED = True

    def run():
        total = None
        for s in range(0, n, block):
            xs, ys = X[s:s + block], y[s:s + block]
            out = [np.asarray(o) * xs.shape[0] for o in exes[xs.shape[0]](w, xs, ys, seed)]
            total = out if total is None else [a + b for a, b in zip(total, out)]
        return total

    return run


def main(argv=None) -> None:
    import numba

    from fusegrad.distributed.grad import rows_per_call

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=625_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--repeats", type=int, default=9)
    a = p.parse_args(argv)
    n, d = int(a.n), a.d
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = np.sign(rng.standard_normal(n)).astype(np.float32)
    w = 0.01 * np.ones(d, np.float32)

    @numba.njit(fastmath=True)
    def read(flat):
        s = np.float32(0)
        for i in range(flat.size):
            s += flat[i]
        return s

    flat = X.ravel()
    read(flat)
    block = rows_per_call([X, y])
    cases = {"apart, cache blocks": _gradient(n, d, block, False, w, X, y),
             "row tiles, one call": _gradient(n, d, n, True, w, X, y),
             "read X once (floor)": lambda: read(flat)}
    times = {k: [] for k in cases}
    out = {}
    for _ in range(a.repeats):
        for k, f in cases.items():
            t0 = time.thread_time()  # CPU time: on a shared machine, wall time counts
            out[k] = f()  # the other processes' turns too
            times[k].append(time.thread_time() - t0)
    ref = out["apart, cache blocks"][1]
    err = np.abs(out["row tiles, one call"][1] - ref).max() / np.abs(ref).max()
    base = statistics.median(times["apart, cache blocks"])
    print(f"n = {n}, d = {d}, float32, {a.repeats} interleaved rounds, median CPU times "
          f"(gradients differ by {err:.1e} relative)")
    print("| | time | X read at | speed-up |")
    print("|---|---:|---:|---:|")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"| {k} | {m * 1e3:.1f} ms | {X.nbytes / m / 1e9:.1f} GB/s | {base / m:.2f}x |")


if __name__ == "__main__":
    main()
