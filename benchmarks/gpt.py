"""GPT training step: fusegrad eager, fusegrad under ``fg.jit``, PyTorch eager and
``torch.compile``, on the small GPT of ``gpt_model.py`` (2 layers, 2 heads, width 32,
context 16, batch 8, 65 characters, AdamW, gradient clipping), float32, one thread.

The same model code runs with either library; every implementation starts from the
same weights and sees the same batches. Reported per implementation: the time of
the first and second steps (``fg.jit`` runs its first step eagerly, to create the
optimizer's state, and compiles on the second; ``torch.compile`` compiles on the first),
the median time per step over interleaved rounds, and the largest relative difference
of its losses from PyTorch eager's over every step run.

``fg.jit`` and ``torch.compile`` are opt-in (``--jit``, ``--torch-compile``, or ``--all``):
compiling the jitted step takes minutes today.

    python benchmarks/gpt.py [--all | --jit --torch-compile] [--rounds 7] [--inner 10]
                             [--profile] [--json PATH]
    fusegrad bench gpt [same options]

The command re-runs itself in a process with one thread everywhere (the variables in
``run.ONE_THREAD_ENV``, ``torch.set_num_threads(1)``, pinned to CPU 0 with ``taskset``
when it works) unless ``--in-process`` is given. ``--profile`` prints where fusegrad's
eager step spends its time (cProfile).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import gpt_model as G  # noqa: E402

IMPLS = ("fusegrad", "fusegrad.jit", "torch", "torch.compile")


def _lib(impl: str):
    if impl.startswith("torch"):
        import torch

        torch.set_num_threads(1)
        return torch
    import fusegrad

    return fusegrad


class Runner:
    """One implementation: its own model, optimizer and batches; ``step()`` trains on the
    next batch and records the loss."""

    def __init__(self, impl: str, batches: int):
        self.impl = impl
        self.lib = lib = _lib(impl)
        model, opt = G.build(lib, seed=0)
        self.batches = [G.batch(lib, i) for i in range(batches)]
        self.count = 0
        self.losses: list[float] = []
        self.pending: list = []
        if impl == "torch.compile":
            model = lib.compile(model)

        def train(x, y):
            return G.train_step(lib, model, opt, x, y)

        self.train = lib.jit(train) if impl == "fusegrad.jit" else train

    def step(self) -> None:
        x, y = self.batches[self.count % len(self.batches)]
        self.count += 1
        self.pending.append(self.train(x, y))

    def collect(self) -> None:
        """Read the losses of the steps run since the last call (outside the timing)."""
        self.losses += [float(v.detach()) for v in self.pending]
        self.pending.clear()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(impls, rounds: int, inner: int, batches: int = 64) -> list[dict]:
    """Step 1 and 2 times, then ``rounds`` interleaved rounds of ``inner`` steps each."""
    runners, rows = {}, {}
    for impl in impls:
        try:
            r = Runner(impl, batches)
            first = _timed(r.step)
            second = _timed(r.step)
        except Exception as e:  # torch.compile without a working toolchain, say
            rows[impl] = {"impl": impl, "status": "error",
                          "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            continue
        r.collect()
        runners[impl] = r
        rows[impl] = {"impl": impl, "status": "ok", "step1_ms": first * 1e3,
                      "step2_ms": second * 1e3}
    for r in runners.values():  # warm up: a few steps each
        for _ in range(3):
            r.step()
        r.collect()
    times: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(rounds):
        for impl, r in runners.items():
            times[impl].append(_timed(lambda r=r: [r.step() for _ in range(inner)]) / inner)
            r.collect()
    ref = np.array(runners["torch"].losses) if "torch" in runners else None
    for impl, r in runners.items():
        row = rows[impl]
        losses = np.array(r.losses)
        row.update(ms_per_step=statistics.median(times[impl]) * 1e3, steps=len(losses),
                   first_loss=float(losses[0]), last_loss=float(losses[-1]))
        if ref is not None:
            row["max_rel_loss_diff"] = float(np.max(np.abs(losses - ref) / np.abs(ref)))
    return [rows[k] for k in impls]


def table(rows: list[dict]) -> str:
    torch_ms = next((r["ms_per_step"] for r in rows if r["impl"] == "torch"
                     and r["status"] == "ok"), None)
    lines = ["| implementation | step 1 (ms) | step 2 (ms) | ms/step (median) | vs PyTorch eager "
             "| losses vs PyTorch (max rel. diff) |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['impl']} | not run: {r['error']} | | | | |")
            continue
        ratio = f"{r['ms_per_step'] / torch_ms:.2f}x" if torch_ms else "-"
        diff = f"{r['max_rel_loss_diff']:.1e}" if "max_rel_loss_diff" in r else "-"
        lines.append(f"| {r['impl']} | {r['step1_ms']:.1f} | {r['step2_ms']:.1f} | "
                     f"{r['ms_per_step']:.2f} | {ratio} | {diff} ({r['steps']} steps) |")
    return "\n".join(lines)


def profile_eager(steps: int = 30, top: int = 25) -> str:
    """cProfile of fusegrad's eager step (after 3 warm-up steps): the functions with the
    most cumulative and own time."""
    r = Runner("fusegrad", 64)
    for _ in range(3):
        r.step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        r.step()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def _pinned(argv: list[str]) -> list[str]:
    if shutil.which("taskset") is None:
        return argv
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        if subprocess.run(["taskset", "-c", "0", "true"], capture_output=True,
                          timeout=10).returncode == 0:
            return ["taskset", "-c", "0", *argv]
    return argv


def _respawn(argv: list[str]) -> int:
    """Run this module again with one thread everywhere (before any library starts)."""
    from benchmarks.run import ONE_THREAD_ENV

    env = dict(os.environ, **ONE_THREAD_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = _pinned([sys.executable, str(Path(__file__).resolve()), *argv, "--in-process"])
    return subprocess.run(cmd, env=env, cwd=str(ROOT)).returncode


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="fusegrad bench gpt", description=__doc__.split("\n\n")[0])
    p.add_argument("--jit", action="store_true", help="also fg.jit (compiling takes minutes)")
    p.add_argument("--torch-compile", action="store_true", help="also torch.compile(model)")
    p.add_argument("--all", action="store_true", help="--jit and --torch-compile")
    p.add_argument("--no-torch", action="store_true", help="fusegrad only")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    p.add_argument("--inner", type=int, default=10, help="steps per round (default 10)")
    p.add_argument("--quick", action="store_true", help="3 rounds of 3 steps")
    p.add_argument("--profile", action="store_true", help="cProfile fusegrad's eager step")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    p.add_argument("--in-process", action="store_true",
                   help="run in this process with its thread settings (no re-exec)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if not args.in_process:
        return _respawn(argv)
    impls = ["fusegrad"]
    if args.jit or args.all:
        impls.append("fusegrad.jit")
    if not args.no_torch:
        impls.append("torch")
        if args.torch_compile or args.all:
            impls.append("torch.compile")
    if args.profile:
        print(profile_eager())
        return 0
    rounds, inner = (3, 3) if args.quick else (args.rounds, args.inner)
    rows = measure(impls, rounds, inner)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["status"] == "ok" for r in rows if r["impl"] != "torch.compile") else 1


if __name__ == "__main__":
    sys.exit(main())
