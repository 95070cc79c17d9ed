"""Running the suite: one worker process per thread setting, then the tables and JSON.

Thread counts are fixed when NumPy's BLAS, Numba, XLA and PyTorch start, so each setting
runs in a process of its own started with the right environment: ``1`` (every
library's thread variable set to 1, ``torch.set_num_threads(1)``, and the process pinned
to CPU 0 with ``taskset -c 0`` when that works) and ``default`` (the libraries'
defaults: all cores). Each worker writes its records to a JSON file the parent merges.
``in_process`` runs everything in the calling process instead (tests, profiling).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import elementwise, latency, libs, mlp, pinn, report
from .harness import log, run_case, short_error

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("W1", "W2", "W3", "W4", "W5")
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "latest.json"
ONE_THREAD_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


_AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")


def blas_env() -> dict[str, str]:
    """``OPENBLAS_CORETYPE=SkylakeX`` on an AMD CPU with AVX-512 (Zen 4 and later), unless
    set already. Older OpenBLAS builds map every Zen to their Haswell (AVX2) kernels;
    the AVX-512 ones run single-precision products about twice as fast there (the
    bundled 0.3.30/0.3.31 choose SkylakeX on a Zen 5 by themselves; a preset
    ``OPENBLAS_CORETYPE=Haswell`` is kept, and reported by ``runtime.blas_kernels``).
    It applies to every implementation calling OpenBLAS (NumPy, SciPy, fusegrad's Numba
    code), not to JAX (XLA's own kernels) or PyTorch (its own BLAS)."""
    if os.environ.get("OPENBLAS_CORETYPE") is not None:
        return {}
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    if "AuthenticAMD" in info and all(f in flags for f in _AVX512):
        return {"OPENBLAS_CORETYPE": "SkylakeX"}
    return {}


def cases_for(workload: str, quick: bool, threads: str):
    if workload in ("W1", "W4"):
        return elementwise.cases(workload, quick, threads)
    if workload == "W2":
        return mlp.cases(quick, threads)
    return pinn.cases(quick, threads)


def collect(workloads, quick: bool, threads: str, rounds: int | None,
            impls: set[str] | None) -> list[dict]:
    """Check and time every workload in this process; the records, in order."""
    rounds = rounds or (3 if quick else 7)
    min_time = 0.02 if quick else 0.1
    records: list[dict] = []
    for w in WORKLOADS:
        if w not in workloads:
            continue
        if w == "W5":
            records += latency.run(1 if quick else max(1, min(rounds, 3)), threads, impls)
            continue
        try:
            cases = cases_for(w, quick, threads)
        except Exception as e:
            log(f"[{threads}] {w}: ERROR setting up: {short_error(e)}")
            records.append({"workload": w, "size": "", "impl": "(setup)", "threads": threads,
                            "status": "error", "error": short_error(e, 2000)})
            continue
        for case in cases:
            log(f"[{threads}] {case.workload} {case.size}: checking "
                f"{', '.join(n for n in case.impls if impls is None or n in impls)}")
            records += run_case(case, rounds, min_time, threads, impls)
        del cases
    return records


def worker(threads: str, opts, partial: str) -> int:
    """Run in a process started by ``main`` with the environment for ``threads``."""
    if threads == "1":
        libs.set_torch_threads(1)
    sources = report.source_hash()
    from fusegrad.runtime import blas_kernels

    if blas_kernels.note():
        log(f"[threads={threads}] {blas_kernels.note()}")
    records = collect(opts["workloads"], opts["quick"], threads, opts["rounds"], opts["impls"])
    info = report.process_info(threads, sources)
    Path(partial).write_text(json.dumps({"records": records, "process": info}, default=str))
    return 0


def _taskset_ok() -> bool:
    if shutil.which("taskset") is None:
        return False
    try:
        return subprocess.run(["taskset", "-c", "0", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _worker_argv(threads: str, opts, partial: str) -> list[str]:
    argv = [sys.executable, "-m", "fusegrad.cli", "bench", "--worker", threads,
            "--partial", partial, "--only", ",".join(opts["workloads"])]
    if opts["quick"]:
        argv.append("--quick")
    if opts["rounds"]:
        argv += ["--rounds", str(opts["rounds"])]
    if opts["impls"]:
        argv += ["--impl", ",".join(sorted(opts["impls"]))]
    return argv


def _spawn(threads: str, opts) -> dict:
    """One worker process; its records and process info (or the error that stopped it)."""
    env = dict(os.environ)
    for k in ONE_THREAD_ENV:
        env.pop(k, None)
    if threads == "1":
        env.update(ONE_THREAD_ENV)
    blas = blas_env()
    env.update(blas)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    fd, partial = tempfile.mkstemp(prefix="fusegrad-bench-", suffix=".json")
    os.close(fd)
    argv = _worker_argv(threads, opts, partial)
    pinned = threads == "1" and _taskset_ok()
    if pinned:
        argv = ["taskset", "-c", "0", *argv]
    log(f"[{threads}] starting: {' '.join(argv[:6])} ...")
    mode = {"threads": threads, "taskset": pinned,
            "env": {k: env.get(k) for k in (*ONE_THREAD_ENV, *blas)}}
    try:
        rc = subprocess.run(argv, env=env, cwd=str(ROOT)).returncode
        data = json.loads(Path(partial).read_text() or "{}")
        if rc != 0 or "records" not in data:
            mode["error"] = f"worker exited with code {rc}"
        mode["process"] = data.get("process", {})
        mode["records"] = data.get("records", [])
    finally:
        os.unlink(partial)
    return mode


def command_line(opts) -> str:
    parts = ["fusegrad", "bench"]
    if opts["quick"]:
        parts.append("--quick")
    if tuple(opts["workloads"]) != WORKLOADS:
        parts += ["--only", ",".join(opts["workloads"])]
    if opts["threads"] != "both":
        parts += ["--threads", opts["threads"]]
    if opts["impls"]:
        parts += ["--impl", ",".join(sorted(opts["impls"]))]
    if opts["rounds"]:
        parts += ["--rounds", str(opts["rounds"])]
    if opts["in_process"]:
        parts.append("--in-process")
    return " ".join(parts)


def main(opts: dict) -> int:
    """``opts``: workloads, quick, threads (1|default|both), impls (set or None), rounds,
    in_process, json (path), and for a worker process: worker (its threads), partial."""
    if opts.get("worker"):
        return worker(opts["worker"], opts, opts["partial"])
    result = {"command": command_line(opts), "machine": report.machine(), "modes": [],
              "records": []}
    if opts["in_process"]:
        threads = "current"
        sources = report.source_hash()
        records = collect(opts["workloads"], opts["quick"], threads, opts["rounds"],
                          opts["impls"])
        result["modes"].append({"threads": threads, "taskset": False,
                                "process": report.process_info(threads, sources)})
        result["records"] = records
    else:
        for threads in ("1", "default") if opts["threads"] == "both" else (opts["threads"],):
            mode = _spawn(threads, opts)
            result["records"] += mode.pop("records", [])
            result["modes"].append(mode)
    text = report.markdown(result)
    result["markdown"] = text
    print(text)
    path = opts.get("json") or DEFAULT_JSON
    report.write_json(path, result)
    log(f"wrote {path}")
    bad = [r for r in result["records"] if r.get("status") != "ok"]
    return 1 if any(m.get("error") for m in result["modes"]) or (
        bad and all(r.get("status") != "ok" for r in result["records"])) else 0
