"""Timing: check every implementation once, then time them round-robin and keep medians.

A ``Case`` is one workload at one size with its implementations. Each implementation
is a factory (imports its library, builds its data, returns a zero-argument ``run``);
its first call (compilation included) is checked against the NumPy reference before
anything is timed. Then every round times each implementation once, in an order that
rotates from round to round, so slow drifts of the machine (frequency, other load)
spread over all implementations alike. One measurement is ``number`` calls in a row
(calibrated so that it lasts at least ``min_time``); the result is the median over the
rounds, per call.
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


class Unavailable(Exception):
    """The implementation's library is not importable here (not an error: left out)."""


class CheckError(AssertionError):
    """An implementation computed a wrong result."""


@dataclass
class Case:
    workload: str
    size: str
    #: implementation name -> factory returning a zero-argument callable (one call/step)
    impls: dict[str, Callable[[], Callable[[], object]]]
    #: (implementation name, output of its first call) -> None, or raises CheckError
    check: Callable[[str, object], None]
    rtol: float = 1e-8
    unit: str = "call"
    meta: dict = field(default_factory=dict)


def log(msg: str) -> None:
    """One progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def to_numpy(x):
    """A result of any library (NumPy, JAX, PyTorch) as a NumPy array."""
    if hasattr(x, "detach"):
        x = x.detach()
    return np.asarray(x)


def compare(name: str, got, want, rtol: float, what: str = "gradient") -> float:
    """Raise ``CheckError`` unless ``|got - want| <= rtol * (|want| + max|want|)``.

    The ``max|want|`` term is an absolute tolerance on the scale of the array, so that
    entries that cancel to nearly zero do not demand an impossible relative accuracy.
    Returns the largest error relative to that bound's scale.
    """
    got, want = to_numpy(got), np.asarray(want)
    if got.shape != want.shape:
        raise CheckError(f"{name}: {what} has shape {got.shape}, expected {want.shape}")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bound = rtol * (np.abs(want.astype(np.float64)) + scale)
    if not np.all(np.isfinite(got)) or np.any(err > bound):
        k = int(np.argmax(err - bound)) if np.all(np.isfinite(got)) else int(
            np.argmin(np.isfinite(got)))
        raise CheckError(
            f"{name}: {what} differs from the NumPy reference (rtol {rtol:g}): at flat index "
            f"{k} got {got.ravel()[k]!r}, expected {want.ravel()[k]!r}")
    return float(np.max(err) / (scale or 1.0)) if want.size else 0.0


def compare_all(name: str, got, want, rtol: float) -> float:
    """``compare`` over matching sequences of arrays (e.g. one gradient per weight)."""
    got, want = list(got), list(want)
    if len(got) != len(want):
        raise CheckError(f"{name}: {len(got)} gradients, expected {len(want)}")
    return max(compare(name, g, w, rtol, f"gradient {i}")
               for i, (g, w) in enumerate(zip(got, want)))


def measure(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``number`` calls in a row, with the garbage collector off."""
    return measure_both(fn, number)[0]


def measure_both(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """(wall-clock, process CPU) seconds per call of ``number`` calls in a row.

    CPU time counts every thread of this process and leaves out the time other
    processes held the CPU: on a shared machine it is the steadier number for a
    one-thread run.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(number):
            fn()
        t1, c1 = time.perf_counter(), time.process_time()
        return (t1 - t0) / number, (c1 - c0) / number
    finally:
        if enabled:
            gc.enable()


def calibrate(fn: Callable[[], object], min_time: float) -> int:
    """How many calls in a row make one measurement last at least ``min_time`` seconds."""
    t = measure(fn, 1)
    if t < min_time / 100:  # too short to time alone: estimate from a batch
        t = measure(fn, max(1, int(min_time / 100 / max(t, 1e-7))))
    return max(1, min(1_000_000, math.ceil(min_time / max(t, 1e-9))))


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def short_error(e: BaseException, limit: int = 160) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_case(case: Case, rounds: int, min_time: float, threads: str,
             only_impls: set[str] | None = None) -> list[dict]:
    """Check then time every implementation of ``case``; one record per implementation."""
    prefix = f"[{threads}] {case.workload} {case.size}"
    records: dict[str, dict] = {}
    ready: dict[str, tuple[Callable, int]] = {}
    for name, factory in case.impls.items():
        if only_impls is not None and name not in only_impls:
            continue
        rec = {"workload": case.workload, "size": case.size, "impl": name, "threads": threads,
               "unit": case.unit, **case.meta}
        try:
            t0 = time.perf_counter()
            fn = factory()
            out = fn()
            rec["first_call_s"] = time.perf_counter() - t0
            rec["check_max_err"] = case.check(name, out)
            rec["number"] = calibrate(fn, min_time)
            ready[name] = (fn, rec["number"])
            rec["status"] = "ok"
        except Unavailable as e:
            log(f"{prefix} {name}: not importable ({e}); left out")
            continue
        except CheckError as e:
            rec.update(status="wrong", error=str(e))
            log(f"{prefix} {name}: WRONG RESULT: {e}")
        except Exception as e:  # a crash is a result too: reported, never fatal
            rec.update(status="error", error=short_error(e, 2000))
            log(f"{prefix} {name}: ERROR {short_error(e)}")
        records[name] = rec
    names = list(ready)
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names) if names else 0
        for name in names[k:] + names[:k]:
            fn, number = ready[name]
            wall, used = measure_both(fn, number)
            times[name].append(wall)
            cpu[name].append(used)
    for name in names:
        rec = records[name]
        rec["times_s"] = times[name]
        rec["cpu_s"] = cpu[name]
        rec["median_s"] = statistics.median(times[name])
        rec["median_cpu_s"] = statistics.median(cpu[name])
        spread = (max(times[name]) - min(times[name])) / rec["median_s"] if rounds > 1 else 0
        log(f"{prefix} {name:<14} {fmt_time(rec['median_s']):>11} per {case.unit}  "
            f"(CPU {fmt_time(rec['median_cpu_s'])}; {rounds} rounds x {rec['number']} calls, "
            f"spread {spread:.0%})")
    return list(records.values())
