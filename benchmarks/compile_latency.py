"""Compile latency: how long the first call of a new gradient takes, by program size.

Four program families, each at three or four sizes, all differentiated with respect to
their first argument in float64 (``fg.grad(f)`` against ``jax.jit(jax.grad(f))`` with x64):

- ``elementwise`` n: n elementwise ops (sin/exp/tanh/cos/log1p, products, sums) on a
  1000-vector, then a sum (n = 5, 20, 80, 320);
- ``mlp`` L: mean squared error of an L-layer tanh MLP (16 -> 32 -> ... -> 1, batch 64),
  gradient w.r.t. all weights (L = 2, 8, 32);
- ``loops`` k: k loops in a row, alternately a ``fori_loop`` and a ``scan`` of 10 steps
  over a 64-vector (k = 1, 5, 20);
- ``conds`` k: k ``cond``s nested in their true branches (k = 1, 5, 20);
- ``scalar`` k: small programs, where the compile is all there is: the gradients of
  the scalar test functions of optimisation, 1 Beale (2 variables), 2 Himmelblau (2),
  3 the helical valley (3), 4 Rosenbrock in 10 variables, and 5 the nested Jacobian
  ``jacobian(jacobian(f))`` of ``f(x) = sin(outer(x, x)) + cos(x @ x)`` on a 2-vector
  (``jax.jit(jax.jacrev(jax.jacrev(f)))``). k only numbers them: no growth exponent;
- ``gpt`` L: a training step of the small GPT of ``gpt_model.py`` with L layers (2 heads,
  width 32, context 16, batch 8, AdamW, gradient clipping, float32) under ``fg.jit``:
  the step's first call runs eagerly (it creates the optimizer's state), the second
  compiles; the second is timed. Beside it, PyTorch eager's first step (no JAX here);
  the two steps' losses are checked against PyTorch's to 1e-4.

Every measurement runs in a fresh Python process. A process first imports the library and
runs a one-op program (``x + 1``): that is the process's one-time start-up (the JIT's
initialisation, loading the math library), reported on its own; then the program's first
call is timed. fusegrad runs twice per program: with an empty ``FUSEGRAD_CACHE_DIR``
(cold) and again in a new process with the directory the cold run left (warm). JAX has no
persistent cache here; its first call is the comparison. Each program's result is checked
against the other library's to 1e-9 when JAX is installed.

    python -m benchmarks.compile_latency [--quick] [--families elementwise,mlp] [--json P]
    fusegrad bench compile [...]

Prints the table, the ratios to JAX, the fitted growth exponents (time ~ size^p, least
squares on log-log over the family's sizes) and the start-up times.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAMILIES = {
    "elementwise": (5, 20, 80, 320),
    "mlp": (2, 8, 32),
    "loops": (1, 5, 20),
    "conds": (1, 5, 20),
    "scalar": (1, 2, 3, 4, 5),
    "gpt": (1, 2),
}
QUICK = {"elementwise": (5, 20, 80), "mlp": (2, 8), "loops": (1, 5), "conds": (1, 5),
         "scalar": (1, 5)}
#: Families whose sizes only number their programs (no growth exponent), and the names.
NAMED = {"scalar": {1: "beale", 2: "himmelblau", 3: "helical valley", 4: "rosenbrock 10",
                    5: "jacobian(jacobian(f))"},
         "gpt": {1: "1 layer, vs PyTorch's first step", 2: "2 layers, vs PyTorch's first step"}}
#: Families compared with PyTorch eager's first step rather than with JAX.
AGAINST_TORCH = ("gpt",)


class _Lib:
    """The few calls the programs need, from fusegrad or from JAX."""

    def __init__(self, name: str):
        if name == "fusegrad":
            import fusegrad as fg
            import fusegrad.numpy as fnp

            self.np, self.grad, self.jit = fnp, fg.grad, fg.jit
            self.nested_jacobian = lambda f: fg.jacobian(fg.jacobian(f))
            self.cond, self.fori_loop, self.scan = fg.cond, fg.fori_loop, fg.scan
        else:
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_enable_x64", True)
            self.np, self.grad, self.jit = jnp, lambda f: jax.jit(jax.grad(f)), jax.jit
            self.nested_jacobian = lambda f: jax.jit(jax.jacrev(jax.jacrev(f)))
            self.cond, self.fori_loop, self.scan = (jax.lax.cond, jax.lax.fori_loop,
                                                    jax.lax.scan)


def program(lib: _Lib, family: str, size: int):
    """``(f, args)``: the scalar function of the family at ``size`` and its arguments, or
    ``(f, args, transform)`` when the program is ``transform(f)`` rather than ``lib.grad(f)``."""
    import numpy as np

    xnp = lib.np
    rng = np.random.default_rng(0)
    if family == "elementwise":
        unary = (xnp.sin, xnp.exp, xnp.tanh, xnp.cos, xnp.log1p)

        def f(x):
            y = x
            for i in range(size):
                k = i % 4
                if k == 0:
                    y = unary[(i // 4) % 5](y * 0.5)
                elif k == 1:
                    y = y * x
                elif k == 2:
                    y = y + 0.25 * x
                else:
                    y = xnp.tanh(y)
            return xnp.sum(y)

        return f, (np.linspace(0.1, 0.9, 1000),)
    if family == "mlp":
        widths = [16] + [32] * (size - 1) + [1]
        params = [(rng.normal(0, 1 / math.sqrt(a), (a, b)), np.zeros(b))
                  for a, b in itertools.pairwise(widths)]

        def f(params, x, y):
            h = x
            for i, (w, b) in enumerate(params):
                h = h @ w + b
                if i < len(params) - 1:
                    h = xnp.tanh(h)
            return xnp.mean((h - y) ** 2)

        return f, (params, rng.normal(size=(64, 16)), rng.normal(size=(64, 1)))
    if family == "loops":
        xs = rng.normal(size=(10, 64)) * 0.1

        def f(x, xs):
            total = 0.0
            for i in range(size):
                if i % 2 == 0:
                    x = lib.fori_loop(0, 10, lambda j, c: xnp.sin(c) * 0.9 + 0.1 * c * c, x)
                else:
                    x, ys = lib.scan(lambda c, xi: (xnp.tanh(c + xi) * 0.5, c * xi), x, xs)
                    total = total + xnp.sum(ys)
            return xnp.sum(x) + total

        return f, (np.linspace(-1, 1, 64), xs)
    if family == "conds":
        def nest(level, x):
            if level == size:
                return xnp.sin(x) * x
            return lib.cond(xnp.sum(x) > -100.0 * (level + 1),
                            lambda v: nest(level + 1, v * 0.9),
                            lambda v: xnp.cos(v) + v, x)

        return lambda x: xnp.sum(nest(0, x)), (np.linspace(-1, 1, 64),)
    if family == "scalar":
        return _scalar(lib, size)
    raise ValueError(f"unknown family {family!r}")


def _scalar(lib: _Lib, k: int):
    """The ``scalar`` family's program ``k`` (see the module docstring)."""
    import numpy as np

    xnp = lib.np
    if k == 1:
        def beale(x):
            a, b = x[0], x[1]
            return ((1.5 - a + a * b) ** 2 + (2.25 - a + a * b ** 2) ** 2
                    + (2.625 - a + a * b ** 3) ** 2)

        return beale, (np.array([1.0, 1.5]),)
    if k == 2:
        def himmelblau(x):
            return (x[0] ** 2 + x[1] - 11) ** 2 + (x[0] + x[1] ** 2 - 7) ** 2

        return himmelblau, (np.array([-1.0, 2.5]),)
    if k == 3:
        def helical_valley(x):
            theta = xnp.arctan2(x[1], x[0]) / (2 * math.pi)
            r = xnp.sqrt(x[0] ** 2 + x[1] ** 2)
            return 100 * ((x[2] - 10 * theta) ** 2 + (r - 1) ** 2) + x[2] ** 2

        return helical_valley, (np.array([-1.0, 0.5, 0.3]),)
    if k == 4:
        def rosenbrock(x):
            return xnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

        return rosenbrock, (np.linspace(-1.2, 1.0, 10),)
    if k == 5:
        def f(x):
            return xnp.sin(xnp.outer(x, x)) + xnp.cos(x @ x)

        return f, (np.array([0.3, -0.7]),), lib.nested_jacobian
    raise ValueError(f"no scalar program {k}: choose from 1 to 5")


_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np
from benchmarks.compile_latency import _Lib, program
lib = _Lib({lib!r})
t1 = time.perf_counter()
np.asarray(lib.jit(lambda x: x + 1.0)(np.ones(3)))
t2 = time.perf_counter()
f, args, *how = program(lib, {family!r}, {size})
g = (how[0] if how else lib.grad)(f)
t3 = time.perf_counter()
out = g(*args)
leaves = out if isinstance(out, (list, tuple)) else [out]
flat = [np.asarray(a) for leaf in leaves
        for a in (leaf if isinstance(leaf, (list, tuple)) else [leaf])]
t4 = time.perf_counter()
np.save({out!r}, np.concatenate([a.ravel() for a in flat]))
print(json.dumps({{"import_s": t1 - t0, "startup_s": t2 - t1, "first_s": t4 - t3}}))
"""


_GPT_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import numpy as np
lib = __import__({lib!r})
from benchmarks import gpt_model as G
cfg = G.Config(layers={size})
model, opt = G.build(lib, seed=0, cfg=cfg)
batches = [G.batch(lib, i, cfg) for i in range(2)]
if {lib!r} == "torch":
    lib.set_num_threads(1)
    step = lambda x, y: G.train_step(lib, model, opt, x, y, cfg)
else:
    step = lib.jit(lambda x, y: G.train_step(lib, model, opt, x, y, cfg))
t1 = time.perf_counter()
first = step(*batches[0])
t2 = time.perf_counter()
second = step(*batches[1])
t3 = time.perf_counter()
np.save({out!r}, np.array([float(first.detach()), float(second.detach())]))
timed = (t2 - t1) if {lib!r} == "torch" else (t3 - t2)
print(json.dumps({{"import_s": t1 - t0, "startup_s": t2 - t1, "first_s": timed}}))
"""


def _child(lib: str, family: str, size: int, env: dict, out: str) -> dict:
    template = _GPT_CHILD if family in AGAINST_TORCH else _CHILD
    code = template.format(root=str(ROOT), lib=lib, family=family, size=size, out=out)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=3600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def measure(families: dict, rounds: int = 1, jax: bool = True) -> list[dict]:
    """One row per (family, size): medians over ``rounds`` of fresh-process runs; the
    implementations alternate within each round."""
    import numpy as np

    rows = []
    # no fusegrad setting carries over but the number of compiling processes (default 1)
    base = {k: v for k, v in os.environ.items() if not k.startswith("FUSEGRAD_")}
    base["OMP_NUM_THREADS"] = base["NUMBA_NUM_THREADS"] = "1"
    base["FUSEGRAD_COMPILE_PROCESSES"] = os.environ.get("FUSEGRAD_COMPILE_PROCESSES", "1")
    base["OPENBLAS_NUM_THREADS"] = base["MKL_NUM_THREADS"] = "1"
    base["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    for family, sizes in families.items():
        for size in sizes:
            runs = {"cold": [], "warm": [], "jax": []}
            check = None
            for _ in range(rounds):
                cache = tempfile.mkdtemp(prefix="fg-compile-bench-")
                outs = [os.path.join(cache, f"{k}.npy") for k in ("fg", "jax")]
                try:
                    env = dict(base, FUSEGRAD_CACHE_DIR=cache)
                    runs["cold"].append(_child("fusegrad", family, size, env, outs[0]))
                    runs["warm"].append(_child("fusegrad", family, size, env, outs[0]))
                    other = "torch" if family in AGAINST_TORCH else "jax"
                    if jax and _has(other):
                        runs["jax"].append(_child(other, family, size, base, outs[1]))
                        if all(os.path.exists(p) for p in outs):
                            a, b = (np.load(p) for p in outs)
                            tol = 1e-4 if family in AGAINST_TORCH else 1e-9
                            check = bool(np.allclose(a, b, rtol=tol, atol=tol *
                                                     max(1.0, float(np.abs(b).max()))))
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
            rows.append(_row(family, size, runs, check))
            print(_format_row(rows[-1]), flush=True)
    return rows


def _median(runs: list[dict], key: str):
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else None


def _row(family: str, size: int, runs: dict, check) -> dict:
    row = {"family": family, "size": size, "agrees_with_jax": check}
    for impl, rs in runs.items():
        for key in ("import_s", "startup_s", "first_s"):
            row[f"{impl}_{key}"] = _median(rs, key)
        errors = [r["error"] for r in rs if "error" in r]
        if errors:
            row[f"{impl}_error"] = errors[0]
    cold, jx = row["cold_first_s"], row["jax_first_s"]
    row["ratio_cold_to_jax"] = cold / jx if cold and jx else None
    return row


def _fmt(t) -> str:
    return "-" if t is None else f"{t:.2f} s" if t >= 0.1 else f"{t * 1e3:.0f} ms"


def _format_row(r: dict) -> str:
    ratio = "-" if r["ratio_cold_to_jax"] is None else f"{r['ratio_cold_to_jax']:.1f}x"
    agree = {True: "", False: "  RESULTS DIFFER", None: ""}[r["agrees_with_jax"]]
    err = "".join(f"  {k}: {v}" for k, v in r.items() if k.endswith("_error"))
    size = r["size"]
    name = NAMED.get(r["family"], {}).get(size)
    return (f"| {r['family']} | {size}{f' ({name})' if name else ''} | "
            f"{_fmt(r['cold_first_s'])} | "
            f"{_fmt(r['warm_first_s'])} | {_fmt(r['jax_first_s'])} | {ratio} |{agree}{err}")


def exponents(rows: list[dict], key: str) -> dict[str, float]:
    """Per family, the least-squares slope of log(time) against log(size)."""
    out = {}
    for family in dict.fromkeys(r["family"] for r in rows if r["family"] not in NAMED):
        pts = [(math.log(r["size"]), math.log(r[key])) for r in rows
               if r["family"] == family and r.get(key)]
        if len(pts) >= 2:
            mx = sum(p[0] for p in pts) / len(pts)
            my = sum(p[1] for p in pts) / len(pts)
            num = sum((x - mx) * (y - my) for x, y in pts)
            out[family] = num / sum((x - mx) ** 2 for x, _ in pts)
    return out


def geomean(rows: list[dict]) -> float | None:
    """The geometric mean of cold / JAX over the rows compared with JAX."""
    ratios = [r["ratio_cold_to_jax"] for r in rows
              if r["family"] not in AGAINST_TORCH and r.get("ratio_cold_to_jax")]
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None


def report(rows: list[dict]) -> str:
    lines = ["| family | size | fusegrad cold | fusegrad warm | JAX first call | cold / JAX |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [_format_row(r) for r in rows]
    g = geomean(rows)
    if g is not None:
        worst = max((r for r in rows if r["family"] not in AGAINST_TORCH
                     and r.get("ratio_cold_to_jax")), key=lambda r: r["ratio_cold_to_jax"])
        lines.append(f"\ncold / JAX, geometric mean over the JAX rows: {g:.2f}x; the largest "
                     f"{worst['ratio_cold_to_jax']:.2f}x ({worst['family']} {worst['size']})")
    for key, label in (("cold_first_s", "fusegrad cold"), ("jax_first_s", "JAX")):
        exps = exponents(rows, key)
        if exps:
            lines.append(f"\ngrowth exponents, {label}: " +
                         ", ".join(f"{f} {p:.2f}" for f, p in exps.items()))
    for impl, label in (("cold", "fusegrad, empty cache"), ("warm", "fusegrad, warm cache"),
                        ("jax", "JAX")):
        imp = [r[f"{impl}_import_s"] for r in rows if r.get(f"{impl}_import_s")]
        up = [r[f"{impl}_startup_s"] for r in rows if r.get(f"{impl}_startup_s")]
        if up:
            lines.append(f"start-up, {label}: import {_fmt(statistics.median(imp))}, "
                         f"first one-op call {_fmt(statistics.median(up))} (medians)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="compile_latency", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="the smaller sizes only")
    p.add_argument("--families", metavar="A,B", help=f"a subset of {', '.join(FAMILIES)}")
    p.add_argument("--sizes", metavar="N,M", help="these sizes for every family chosen")
    p.add_argument("--rounds", type=int, default=1, help="fresh-process runs per program")
    p.add_argument("--no-jax", action="store_true",
                   help="leave the other library out (JAX; PyTorch for gpt)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    families = QUICK if args.quick else FAMILIES
    if args.families:
        wanted = [f.strip() for f in args.families.split(",") if f.strip()]
        bad = [f for f in wanted if f not in FAMILIES]
        if bad:
            p.error(f"unknown family {', '.join(bad)}: choose from {', '.join(FAMILIES)}")
        families = {f: families[f] for f in wanted}
    if args.sizes:
        try:
            sizes = tuple(int(n) for n in args.sizes.split(","))
        except ValueError:
            p.error(f"--sizes takes integers, got {args.sizes!r}")
        families = {f: sizes for f in families}
    jax = not args.no_jax
    print(f"compiling processes: {os.environ.get('FUSEGRAD_COMPILE_PROCESSES', '1')} "
          "(FUSEGRAD_COMPILE_PROCESSES)")
    print("| family | size | fusegrad cold | fusegrad warm | JAX first call | cold / JAX |")
    rows = measure(families, rounds=max(1, args.rounds), jax=jax)
    print()
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
