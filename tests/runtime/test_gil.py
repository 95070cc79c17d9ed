"""Compiled code releases the GIL: other Python threads run while a call computes, and
threads calling one compiled function at once get exactly what lone calls get.

Dask's threaded scheduler, a web server's request threads or a ``ThreadPoolExecutor``
then use several cores with fusegrad's compiled functions, as they do with NumPy's.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config

pytestmark = pytest.mark.compiled


def _loss(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.1 * x * x) + fnp.tanh(x) * fnp.log1p(x * x))


def _long_call(f, x, seconds: float):
    """``x`` lengthened until one call of ``f`` takes about ``seconds``."""
    while True:
        times = []
        for _ in range(3):  # the first call at a new shape may compile
            t0 = time.perf_counter()
            f(x)
            times.append(time.perf_counter() - t0)
        if min(times) > seconds:
            return x
        x = np.concatenate([x, x])


def test_other_threads_run_while_a_compiled_call_computes(monkeypatch):
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)  # one thread computes
    f = fg.jit(fg.grad(_loss))
    x = _long_call(f, np.linspace(-3.0, 3.0, 1 << 16), 0.15)
    stamps, stop = [], threading.Event()

    def tick():  # a Python thread: it needs the GIL for every iteration
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        windows = []
        for _ in range(3):
            t0 = time.perf_counter()
            f(x)
            windows.append((t0, time.perf_counter()))
    finally:
        stop.set()
        ticker.join(10)
    for t0, t1 in windows:
        assert t1 - t0 > 0.05  # long enough for the ticker to show a held GIL
        inside = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
        gap = max(b - a for a, b in itertools.pairwise(inside))
        # holding the GIL, the ticker would stop for the whole call
        assert gap < 0.5 * (t1 - t0), (gap, t1 - t0)


@pytest.mark.parametrize("threshold", [1 << 62, 0])  # serial entry; parallel when ready
def test_threads_calling_one_function_get_what_lone_calls_get(threshold, monkeypatch):
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", threshold)
    f = fg.jit(fg.value_and_grad(_loss))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(50_000 + 1000 * i) for i in range(8)]
    alone = [f(x) for x in xs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(f, xs * 3))
    for (v0, g0), (v, g) in zip(alone * 3, together):
        assert v == v0
        np.testing.assert_array_equal(g, g0)
