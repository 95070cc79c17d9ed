"""Glue between ``fusegrad bench`` and the benchmark suite in the checkout's ``benchmarks/``.

The suite is not part of the installed package (it compares fusegrad with NumPy, Numba,
JAX and PyTorch, which fusegrad does not depend on): it is found next to this package
in a source checkout (``pip install -e .``), and the command says so when it is not.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("W1", "W2", "W3", "W4", "W5")


class BenchUnavailable(Exception):
    """No ``benchmarks/`` folder next to this fusegrad (an installed, non-editable copy)."""


def _suite(module: str = "run"):
    if not (ROOT / "benchmarks" / f"{module}.py").is_file():
        raise BenchUnavailable(
            f"the benchmark suite lives in the benchmarks/ folder of a fusegrad source checkout "
            f"and there is none next to this fusegrad ({ROOT}); clone the repository and "
            "run `pip install -e .` there")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"benchmarks.{module}")


def parse_workloads(text: str | None) -> list[str]:
    """``"W1,w4"`` -> ``["W1", "W4"]`` (all five when empty); ValueError on unknown names."""
    if not text:
        return list(WORKLOADS)
    items = [t.strip().upper() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in WORKLOADS]
    if bad:
        raise ValueError(f"unknown workload {', '.join(bad)}: choose from {', '.join(WORKLOADS)}")
    return [w for w in WORKLOADS if w in items]


def run(quick: bool = False, only: str | None = None, json_path: str | None = None,
        threads: str = "both", impls: str | None = None, rounds: int | None = None,
        in_process: bool = False, worker: str | None = None,
        partial: str | None = None) -> int:
    """Run the suite (see ``benchmarks/README.md``); returns the exit code."""
    suite = _suite()
    opts = {
        "workloads": parse_workloads(only),
        "quick": quick,
        "threads": threads,
        "impls": {t.strip() for t in impls.split(",") if t.strip()} if impls else None,
        "rounds": rounds,
        "in_process": in_process,
        "json": json_path,
        "worker": worker,
        "partial": partial,
    }
    return suite.main(opts)


def run_compile(quick: bool = False, json_path: str | None = None, rounds: int | None = None,
                families: str | None = None) -> int:
    """``fusegrad bench compile``: compile latency by program size, against JAX
    (``benchmarks/compile_latency.py``); returns the exit code."""
    argv = [*(["--quick"] if quick else []), *(["--json", json_path] if json_path else []),
            *(["--rounds", str(rounds)] if rounds else []),
            *(["--families", families] if families else [])]
    return _suite("compile_latency").main(argv)


def run_gpt(argv: list[str]) -> int:
    """``fusegrad bench gpt``: a small GPT's training step, fusegrad eager and ``fg.jit``
    against PyTorch eager and ``torch.compile`` (``benchmarks/gpt.py``, which takes
    ``argv``); returns the exit code."""
    return _suite("gpt").main(argv)
