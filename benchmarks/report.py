"""Machine description, the Markdown table and the JSON file of a benchmark run."""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

from . import libs
from .harness import fmt_time

REFERENCES = ("jax.jit", "fusegrad")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def vector_width() -> str:
    """The vector registers fusegrad's generated code uses here (``FUSEGRAD_CPU_FEATURES``
    applied), and how JAX was limited (``XLA_FLAGS``), if it was."""
    from fusegrad import config
    from fusegrad.codegen.lean import engine

    bits = 8 * engine.vector_bytes()
    name = {512: "AVX-512", 256: "AVX2"}.get(bits, "SSE")
    out = f"{bits}-bit vectors ({name})"
    if config.CPU_FEATURES:
        out += f", FUSEGRAD_CPU_FEATURES={config.CPU_FEATURES}"
    if os.environ.get("XLA_FLAGS"):
        out += f", XLA_FLAGS={os.environ['XLA_FLAGS']}"
    return out


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "vector": vector_width(),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "platform": platform.platform(),
        "versions": libs.versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_at_start": _loadavg(),
    }


def _loadavg():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def source_hash() -> str:
    """A hash of fusegrad's Python sources: which code a run measured."""
    import hashlib

    import fusegrad

    h = hashlib.sha256()
    root = Path(fusegrad.__file__).parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def process_info(threads: str, sources_at_start: str | None = None) -> dict:
    """What one worker process ran with: CPU affinity, thread settings, fusegrad's code."""
    import fusegrad
    from fusegrad import config

    now = source_hash()
    info = {
        "threads": threads,
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else None,
        "env": {k: os.environ.get(k) for k in (
            "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
            "XLA_FLAGS", "FUSEGRAD_PARALLEL_THRESHOLD", "NUMBA_THREADING_LAYER")},
        "fusegrad_disable_jit": bool(config.DISABLE_JIT),
        "fusegrad_path": str(Path(fusegrad.__file__).parent),
        "fusegrad_sources": sources_at_start or now,
        "fusegrad_sources_changed": sources_at_start is not None and sources_at_start != now,
        "loadavg_at_end": _loadavg(),
    }
    try:
        import numba

        from fusegrad.runtime import threading_layer

        # fusegrad starts Numba's threads on its own layer (TBB): asking Numba first
        # would start its default one (GNU OpenMP), which kills children forked later
        info["numba_threading_layer"] = layer = threading_layer.layer()
        info["numba_num_threads"] = (numba.get_num_threads() if layer is not None
                                     else numba.config.NUMBA_NUM_THREADS)
        from fusegrad.runtime import blas_kernels

        info["openblas_kernels"] = sorted({str(i.get("architecture"))
                                           for i in blas_kernels.libraries()})
        info["openblas_kernels_note"] = blas_kernels.note()
        from fusegrad.runtime import compiled

        threads_ok = getattr(compiled, "_threads", None)  # set once a large loop compiled
        info["fusegrad_parallel_loops"] = bool(threads_ok[0]) if threads_ok else None
    except Exception:
        pass
    return info


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ratio(rec: dict, refs: dict) -> list[str]:
    out = []
    for ref in REFERENCES:
        r = refs.get((rec["workload"], rec["size"], ref))
        if rec.get("status") != "ok" or r is None or r.get("status") != "ok":
            out.append("—")
        else:
            out.append(f"{rec['median_s'] / r['median_s']:.2f}×")
    return out


def table(records: list[dict]) -> str:
    """Markdown: one row per (workload, size, implementation); ratios are time / reference."""
    refs = {(r["workload"], r["size"], r["impl"]): r for r in records}
    lines = ["| workload | size | implementation | median | vs jax.jit | vs fusegrad |",
             "|---|---|---|---:|---:|---:|"]
    for rec in records:
        status = rec.get("status")
        if status == "ok":
            unit = rec.get("unit", "call")
            median = fmt_time(rec["median_s"]) + (f"/{unit}" if unit else "")
        else:
            label = "WRONG" if status == "wrong" else "error"
            err = rec.get("error", "")
            median = f"{label}: {err[:120]}" + ("…" if len(err) > 120 else "")
        row = [rec["workload"], rec["size"], rec["impl"], median, *_ratio(rec, refs)]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def mode_title(mode: dict) -> str:
    t = mode.get("threads")
    if t == "1":
        pinned = " (pinned: taskset -c 0)" if mode.get("taskset") else " (not pinned)"
        return "1 thread" + pinned
    if t == "default":
        return f"default threads ({os.cpu_count()} cores)"
    return f"threads as set in this process ({t})"


def markdown(result: dict) -> str:
    m = result["machine"]
    v = m["versions"]
    vs = ", ".join(f"{k} {v[k]}" for k in v if v[k])
    vector = f" ({m['vector']})" if m.get("vector") else ""
    parts = [f"Machine: {m['cpu']}{vector}, {m['cores']} cores, {m['memory_gib']} GiB; "
             f"{m['platform']}",
             f"Date: {m['date']}; command: `{result['command']}`", f"Versions: {vs}",
             f"Load average (1, 5, 15 min) at start: {m.get('loadavg_at_start')}", ""]
    for mode in result["modes"]:
        parts.append(f"### {mode_title(mode)}")
        parts.append("")
        if mode.get("error"):
            parts.append(f"(this run failed: {mode['error']})")
        proc = mode.get("process", {})
        if proc.get("fusegrad_disable_jit"):
            parts.append("(fusegrad ran through its NumPy interpreter: FUSEGRAD_DISABLE_JIT)")
        if proc.get("fusegrad_sources_changed"):
            parts.append("(WARNING: fusegrad's sources changed while this ran)")
        if proc:
            parts.append(f"fusegrad sources {proc.get('fusegrad_sources')}, parallel loops: "
                         f"{proc.get('fusegrad_parallel_loops')}, CPUs "
                         f"{proc.get('cpu_affinity')}, load average at end "
                         f"{proc.get('loadavg_at_end')}")
            parts.append("")
        recs = [r for r in result["records"] if r["threads"] == mode["threads"]]
        parts.append(table(recs))
        parts.append("")
    parts.append("median: wall-clock time per call, median over rounds (implementations "
                 "interleaved); ratios: that time divided by the reference's (> 1: slower).")
    return "\n".join(parts)


def write_json(path: str | os.PathLike, result: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    os.replace(tmp, path)
