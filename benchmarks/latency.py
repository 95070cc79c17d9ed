"""W5: first-call latency, each measurement in a fresh Python process.

- import time: ``import fusegrad`` (NumPy already imported), ``import numba``, ``import jax``;
- the first W1 gradient (n = 1e6), tracing and compiling included: fusegrad with an empty
  ``FUSEGRAD_CACHE_DIR`` (a new temporary directory), then again in another fresh process
  with the cache that the first one left (warm); the hand-fused Numba kernel
  (``cache=True``) likewise with an empty then warm ``NUMBA_CACHE_DIR``; JAX (no
  persistent compilation cache: its row is in the empty-cache line) once.

For fusegrad only ``FUSEGRAD_CACHE_DIR`` is new; ``NUMBA_CACHE_DIR`` is left unset, so
Numba's caches of fusegrad's own runtime helpers (in the package's ``__pycache__``) are
whatever earlier runs left there. Rounds alternate the implementations, as everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import fmt_time, log, short_error

ROOT = Path(__file__).resolve().parents[1]
N = 1_000_000

_COMMON = """
import json, time
t0 = time.perf_counter()
import numpy as np
t1 = time.perf_counter()
{import_lib}
t2 = time.perf_counter()
x = np.random.default_rng(0).uniform(-3.0, 3.0, {n})
{make}
t3 = time.perf_counter()
g = np.asarray(run(x))
t4 = time.perf_counter()
e = np.exp(-0.5 * x * x); t = np.tanh(x)
want = (np.cos(x) - x * np.sin(x)) * e + t + x * (1.0 - t * t)
ok = bool(np.allclose(g, want, rtol=1e-8, atol=1e-8 * np.abs(want).max()))
print(json.dumps({{"import_s": t2 - t1, "first_call_s": t4 - t3, "correct": ok}}))
"""

_FG_IMPORT = "import fusegrad as fg\nimport fusegrad.numpy as fnp"

SCRIPTS = {
    "fusegrad": _COMMON.format(n=N, import_lib=_FG_IMPORT, make="""
def f(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)
run = fg.grad(f)
"""),
    "numba": _COMMON.format(n=N, import_lib="import numba",
                            make="from benchmarks.kernels import w1_grad as run"),
    "jax.jit": _COMMON.format(n=N, import_lib="import jax\nimport jax.numpy as jnp", make="""
jax.config.update("jax_enable_x64", True)
def f(x):
    return jnp.sum(jnp.sin(x) * jnp.exp(-0.5 * x * x) + jnp.tanh(x) * x)
_g = jax.jit(jax.grad(f))
def run(x):
    return _g(x).block_until_ready()
"""),
}


def _fresh(impl: str, env_extra: dict, timeout: float) -> dict:
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", SCRIPTS[impl]], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=str(ROOT))
    wall = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"fresh process exited with {proc.returncode}: {tail}")
    out = json.loads(lines[-1])
    out["process_s"] = wall
    return out


def _available(impl: str) -> bool:
    if impl == "jax.jit":
        import importlib.util

        return importlib.util.find_spec("jax") is not None
    return True


def run(rounds: int, threads: str, only_impls: set[str] | None = None,
        timeout: float = 900.0) -> list[dict]:
    impls = [i for i in SCRIPTS if _available(i) and (only_impls is None or i in only_impls)]
    runs: dict[tuple[str, str], list[dict]] = {}
    errors: dict[str, str] = {}
    for r in range(rounds):
        k = r % len(impls) if impls else 0
        for impl in impls[k:] + impls[:k]:
            if impl in errors:
                continue
            cache = tempfile.mkdtemp(prefix="fusegrad-bench-w5-")
            var = {"fusegrad": "FUSEGRAD_CACHE_DIR", "numba": "NUMBA_CACHE_DIR"}.get(impl)
            try:
                for state in ("empty cache", "warm cache") if var else ("empty cache",):
                    out = _fresh(impl, {var: cache} if var else {}, timeout)
                    runs.setdefault((impl, state), []).append(out)
                    log(f"[{threads}] W5 round {r + 1} {impl:<9} {state}: import "
                        f"{fmt_time(out['import_s'])}, first call {fmt_time(out['first_call_s'])}"
                        f", process {fmt_time(out['process_s'])}"
                        + ("" if out["correct"] else "  WRONG RESULT"))
            except Exception as e:
                errors[impl] = short_error(e, 2000)
                log(f"[{threads}] W5 {impl}: ERROR {short_error(e)}")
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    return _records(impls, runs, errors, threads)


def _records(impls, runs, errors, threads) -> list[dict]:
    recs = []

    def rec(size, impl, values, **extra):
        return {"workload": "W5", "size": size, "impl": impl, "threads": threads,
                "unit": "", "status": "ok", "times_s": values,
                "median_s": statistics.median(values), "number": 1, **extra}

    for impl in impls:
        if impl in errors:
            recs.append({"workload": "W5", "size": "first grad n=1e6", "impl": impl,
                         "threads": threads, "status": "error", "error": errors[impl]})
            continue
        imports = [o["import_s"] for state in ("empty cache", "warm cache")
                   for o in runs.get((impl, state), [])]
        if imports:
            recs.append(rec("import", impl, imports))
    for state in ("empty cache", "warm cache"):
        for impl in impls:
            outs = runs.get((impl, state))
            if not outs or impl in errors:
                continue
            size = f"first grad n=1e6, {state}"
            r = rec(size, impl, [o["first_call_s"] for o in outs],
                    process_s=[o["process_s"] for o in outs])
            if not all(o["correct"] for o in outs):
                r.update(status="wrong", error="first gradient differs from the NumPy one")
            recs.append(r)
    return recs
