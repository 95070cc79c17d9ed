"""W6: eager-mode overhead, fusegrad's Tensor vs PyTorch eager autograd.

Two measurements, interleaved rounds, medians, one thread:

* per-op: ``y = x * 2.0 + 1.0`` on a 16-element float64 tensor that requires
  grad, then ``y.sum().backward()``; reported per op (3 forward ops: mul, add,
  sum), backward share included.
* eager W1: the gradient of ``sum(sin(x)*exp(-0.5*x*x) + tanh(x)*x)`` written
  with Tensor ops, float64, n = 1e4 and 1e6.

``--ops`` adds single operations on small float64 tensors that require grad
(forward only: add, mul, a 4x4 matmul, tanh, sum) and forward plus backward of
a 10-op chain, each in us per call.

Run ``taskset -c 1 python benchmarks/w6_eager.py [--quick] [--ops]``; importable as
``run(quick, ops=False) -> list[dict]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import fusegrad as fg

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch optional
    torch = None

OPS_PER_STEP = 3  # mul, add, sum (+ their backward)


def _perop_step(lib):
    def step(x):
        x.grad = None
        y = x * 2.0 + 1.0
        y.sum().backward()
        return x.grad

    return step


def _w1_step(lib):
    def step(x):
        x.grad = None
        y = (lib.sin(x) * lib.exp(-0.5 * x * x) + lib.tanh(x) * x).sum()
        y.backward()
        return x.grad

    return step


def _w1_ref(a):
    s, c, e, t = np.sin(a), np.cos(a), np.exp(-0.5 * a * a), np.tanh(a)
    return c * e - s * e * a + (1 - t * t) * a + t


def _time(fn, x, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn(x)
    return (time.perf_counter() - t0) / inner


def _bench(cases: dict, rounds: int, inner: int) -> dict:
    """``cases``: impl -> (step, x); interleaved rounds, the median seconds per call."""
    for fn, x in cases.values():  # warm up
        for _ in range(max(1, inner // 10)):
            fn(x)
    times: dict = {k: [] for k in cases}
    for _ in range(rounds):
        for k, (fn, x) in cases.items():
            times[k].append(_time(fn, x, inner))
    return {k: statistics.median(v) for k, v in times.items()}


def _cases(maker, a):
    cases = {"fusegrad": (maker(fg), fg.tensor(a.copy(), requires_grad=True))}
    if torch is not None:
        cases["pytorch"] = (maker(torch), torch.tensor(a.copy(), requires_grad=True))
    return cases


def _check(cases, ref, rtol):
    for k, (fn, x) in cases.items():
        g = fn(x)
        g = g.detach().numpy()
        np.testing.assert_allclose(g, ref, rtol=rtol, atol=1e-12, err_msg=k)


def _op_cases(lib, rng):
    a, b = rng.standard_normal(16), rng.standard_normal(16)
    m = rng.standard_normal((4, 4))
    x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
    mat = lib.tensor(m, requires_grad=True)

    def chain(_):
        x.grad = None
        h = x
        for k in range(5):
            h = (h * 0.9).tanh() if k % 2 else h * 1.1 + 0.1
        h.sum().backward()

    return {
        "add (n=16)": lambda _: x + y,
        "mul (n=16)": lambda _: x * y,
        "matmul (4x4)": lambda _: mat @ mat,
        "tanh (n=16)": lambda _: x.tanh(),
        "sum (n=16)": lambda _: x.sum(),
        "10-op chain fwd+bwd (n=16)": chain,
    }


def ops_rows(quick: bool = False) -> list[dict]:
    """The single-operation rows (``--ops``)."""
    libs = {"fusegrad": fg} if torch is None else {"fusegrad": fg, "pytorch": torch}
    made = {k: _op_cases(lib, np.random.default_rng(1)) for k, lib in libs.items()}
    rows = []
    for name in made["fusegrad"]:
        cases = {k: (made[k][name], None) for k in libs}
        # short blocks, many rounds: a block that another process preempts (~10 ms on a
        # shared core) is an outlier the median drops
        med = _bench(cases, 11 if quick else 41, 200)
        rows += [{"workload": name, "impl": k, "unit": "us", "value": t * 1e6}
                 for k, t in med.items()]
    return rows


def run(quick: bool = False, ops: bool = False) -> list[dict]:
    rows = ops_rows(quick) if ops else []
    rng = np.random.default_rng(0)
    rounds = 3 if quick else 7

    a = rng.standard_normal(16)
    cases = _cases(_perop_step, a)
    _check(cases, np.full(16, 2.0), 1e-12)
    med = _bench(cases, rounds, 200 if quick else 2000)
    for k, t in med.items():
        rows.append({"workload": "per-op (n=16)", "impl": k, "unit": "us/op",
                     "value": t / OPS_PER_STEP * 1e6})

    for n in ((10_000,) if quick else (10_000, 1_000_000)):
        a = rng.standard_normal(n)
        cases = _cases(_w1_step, a)
        _check(cases, _w1_ref(a), 1e-8)
        inner = 200 if n <= 10_000 else 5
        med = _bench(cases, rounds, inner if not quick else max(1, inner // 4))
        for k, t in med.items():
            rows.append({"workload": f"W1 eager (n={n:.0e})", "impl": k, "unit": "ms",
                         "value": t * 1e3})
    return rows


def table(rows: list[dict]) -> str:
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r["unit"]), {})[r["impl"]] = r["value"]
    lines = ["| workload | unit | fusegrad | pytorch | ratio |", "|---|---|---|---|---|"]
    for (w, u), v in by.items():
        fgv, pt = v.get("fusegrad"), v.get("pytorch")
        ratio = f"{fgv / pt:.2f}x" if fgv and pt else "-"
        pts = f"{pt:.2f}" if pt is not None else "-"
        lines.append(f"| {w} | {u} | {fgv:.2f} | {pts} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(run(quick="--quick" in sys.argv, ops="--ops" in sys.argv)))
