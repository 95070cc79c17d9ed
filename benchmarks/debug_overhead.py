"""Cost of the debugging modes: ``fg.debug_nans`` on a small compiled gradient and
``fg.autograd.detect_anomaly`` on a small eager backward, off vs on.

``python -m benchmarks.debug_overhead [--rounds N]`` prints a Markdown table of the
median microseconds per call (each round times a batch of calls; modes alternate
between rounds so drift hits both alike).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def _per_call(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def _compare(make_off, make_on, rounds: int, calls: int) -> tuple[float, float]:
    off, on = [], []
    for _ in range(rounds):
        off.append(make_off(calls))
        on.append(make_on(calls))
    return statistics.median(off), statistics.median(on)


def compiled_grad(n: int, rounds: int, calls: int) -> tuple[float, float]:
    x = np.random.default_rng(0).uniform(-3.0, 3.0, n)
    df = fg.grad(w1)
    expected = df(x)  # compiles
    with fg.debug_nans(True):
        np.testing.assert_array_equal(df(x), expected)

    def off(k):
        with fg.debug_nans(False):
            return _per_call(lambda: df(x), k)

    def on(k):
        with fg.debug_nans(True):
            return _per_call(lambda: df(x), k)

    return _compare(off, on, rounds, calls)


def eager_backward(n: int, rounds: int, calls: int) -> tuple[float, float]:
    xv = np.random.default_rng(1).uniform(-3.0, 3.0, n)

    def step():
        x = fg.tensor(xv, requires_grad=True)
        (x.sin() * (-0.5 * x * x).exp() + x.tanh() * x).sum().backward()

    def off(k):
        return _per_call(step, k)

    def on(k):
        with fg.autograd.detect_anomaly():
            return _per_call(step, k)

    return _compare(off, on, rounds, calls)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    rows = []
    for n, calls in ((16, 5000), (10_000, 1000)):
        rows.append((f"`fg.grad` compiled, W1, n = {n}", "`fg.debug_nans`",
                     *compiled_grad(n, args.rounds, calls)))
    for n, calls in ((16, 500), (10_000, 200)):
        rows.append((f"eager backward, W1, n = {n}", "`detect_anomaly`",
                     *eager_backward(n, args.rounds, calls)))
    print("| workload | mode | off (µs/call) | on (µs/call) | overhead |")
    print("|---|---|---|---|---|")
    for name, mode, off, on in rows:
        print(f"| {name} | {mode} | {off:.1f} | {on:.1f} | {on / off:.2f}x |")


if __name__ == "__main__":
    main()
