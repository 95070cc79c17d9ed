"""Run-time distribution of one compiled ``fg.scan`` training epoch, call after call.

The epoch of ``examples/mlp_training.py`` (2048 points, batch 128, two hidden layers of
64, Adam, dropout; 16 scanned steps per call) is called ``--calls`` times with the
same shapes after a warm-up; the script prints min / median / p90 / p99 / max of the
per-call wall time. Run it pinned and unpinned, e.g.

    taskset -c 0 env NUMBA_NUM_THREADS=1 python -m benchmarks.scan_epoch
    env NUMBA_NUM_THREADS=2 python -m benchmarks.scan_epoch
    env NUMBA_NUM_THREADS=2 FUSEGRAD_BLAS_SERIAL_MAX=0 python -m benchmarks.scan_epoch

(the last one keeps OpenBLAS's threads inside the scan, as before the products in loop
bodies were made single-threaded; see docs/performance.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp
from examples import mlp_training as m
from fusegrad.runtime import blas_threads


def _loss_no_dropout(params, x, y, key):
    return m.cross_entropy(m.logits(params, x), y)


def make_epoch(dropout: bool):
    loss_fn = m.loss_fn if dropout else _loss_no_dropout

    def step(carry, batch):
        params, state, key = carry
        x, y = batch
        key, sub = fg.random.split(key)
        loss, grads = fg.value_and_grad(loss_fn)(params, x, y, sub)
        params, state = m.opt.update(grads, state, params)
        return (params, state, key), loss

    @fg.jit
    def epoch(params, state, key, xs, ys):
        (params, state, key), losses = fg.scan(step, (params, state, key), (xs, ys))
        return params, state, key, fnp.mean(losses)

    return epoch


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--no-dropout", action="store_true")
    args = ap.parse_args(argv)
    n, batch = 2048, 128
    x, y = m.spirals(n)
    perm = np.random.default_rng(2).permutation(n)
    xs, ys = x[perm].reshape(n // batch, batch, 2), y[perm].reshape(n // batch, batch, 2)
    params = m.init_params((2, 64, 64, 2))
    state, key = m.opt.init(params), fg.random.key(0)
    epoch = make_epoch(not args.no_dropout)
    params, state, key, _ = epoch(params, state, key, xs, ys)  # compile, warm up
    ts = np.empty(args.calls)
    for i in range(args.calls):
        t0 = time.perf_counter()
        params, state, key, _ = epoch(params, state, key, xs, ys)
        ts[i] = time.perf_counter() - t0
    ts *= 1e3
    (plan,) = epoch._cache.values()
    print(f"calls {args.calls}, dropout {not args.no_dropout}, BLAS threads "
          f"{blas_threads.threads()}, serial BLAS in the scan {plan.exe.serial_blas}: "
          f"min {ts.min():.2f}  median {np.median(ts):.2f}  p90 {np.percentile(ts, 90):.2f}  "
          f"p99 {np.percentile(ts, 99):.2f}  max {ts.max():.2f} ms")


if __name__ == "__main__":
    main()
