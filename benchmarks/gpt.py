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
eager step spends its time: each part of the step and single operations at the
model's sizes against PyTorch, then cProfile's view.
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


#: (category, file suffix, function name): cumulative time of these calls, in step order
PROFILE_PARTS = (
    ("forward (all)", "gpt_model.py", "forward:GPT"),
    ("  layer norm (5)", "layers_conv.py", "forward:LayerNorm"),
    ("  attention block (2; its linears included)", "gpt_model.py",
     "forward:CausalSelfAttention"),
    ("    softmax (2)", "tensor_reduce.py", "softmax"),
    ("  linear layers (9, all)", "layers.py", "forward:Linear"),
    ("  GELU (2)", "layers_misc.py", "forward:GELU"),
    ("  cross-entropy", "functional.py", "cross_entropy"),
    ("  embeddings (2)", "layers_conv.py", "forward:Embedding"),
    ("backward", "engine.py", "backward"),
    ("gradient clipping (29 norms)", "gpt_model.py", "clip_grad_norm"),
    ("AdamW step (29 tensors)", "optimizer.py", "step"),
    ("zero_grad", "optimizer.py", "zero_grad"),
)


def _native(key) -> bool:
    """A C function doing the arithmetic (NumPy, BLAS) rather than Python bookkeeping."""
    file, _, name = key
    return file == "~" and any(w in name for w in ("numpy", "ufunc", "ndarray", "matmul", "dot"))


def breakdown(stats: pstats.Stats, steps: int) -> str:
    """Milliseconds per step by part of the step, and native (NumPy/BLAS) vs Python time."""
    table = stats.stats  # (file, line, name) -> (calls, prim calls, tottime, cumtime, callers)
    total = max(v[3] for v in table.values())
    lines = ["| part of fusegrad's eager step | ms/step | share |", "|---|---|---|"]
    for label, suffix, name in PROFILE_PARTS:
        fn, _, cls = name.partition(":")
        cum = 0.0
        for (file, line, func), v in table.items():
            if func == fn and file.endswith(suffix) and (not cls or _defines(file, line, cls)):
                cum += v[3]
        lines.append(f"| {label} | {cum / steps * 1e3:.1f} | {cum / total:.0%} |")
    native = sum(v[2] for k, v in table.items() if _native(k))
    ops = sum(v[0] for k, v in table.items() if k[0].endswith("bind.py") and k[2] == "bind")
    lines.append(f"| NumPy functions called by name (not operators/ufuncs, which count as "
                 f"their caller's time) | {native / steps * 1e3:.1f} | {native / total:.0%} |")
    lines.append(f"| IR ops bound per step (each one eager operation's dispatch) | "
                 f"{ops / steps:.0f} ops | |")
    lines.append(f"| whole step (under cProfile) | {total / steps * 1e3:.1f} | 100% |")
    return "\n".join(lines)


def _defines(file: str, line: int, cls: str) -> bool:
    """Whether the function at ``file:line`` is a method of class ``cls`` (the nearest
    ``class`` statement above it)."""
    try:
        text = Path(file).read_text().splitlines()[:line]
    except OSError:
        return False
    for row in reversed(text):
        if row.startswith("    class ") or row.startswith("class "):
            return row.split("class ", 1)[1].startswith(cls)
    return False


def profile_eager(steps: int = 30, top: int = 25) -> str:
    """cProfile of fusegrad's eager step (after 3 warm-up steps): time per part of the
    step, then the functions with the most cumulative and own time."""
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
    return breakdown(stats, steps) + "\n" + out.getvalue()


def phases(impl: str, steps: int = 20) -> dict[str, float]:
    """Median milliseconds of each part of an eager step (no profiler)."""
    lib = _lib(impl)
    model, opt = G.build(lib, seed=0)
    times: dict[str, list[float]] = {k: [] for k in ("forward", "backward", "clip", "step")}
    for i in range(steps + 3):
        x, y = G.batch(lib, i)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = model(x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        G.clip_grad_norm(lib, model.parameters(), 1.0)
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        if i >= 3:
            for k, (a, b) in zip(times, ((t0, t1), (t1, t2), (t2, t3), (t3, t4))):
                times[k].append((b - a) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def composites(impl: str, reps: int = 200) -> dict[str, float]:
    """Microseconds per call of single operations at the model's sizes, inputs that
    require grad (so each records its autograd node), forward only."""
    lib = _lib(impl)
    F = lib.nn.functional
    rng = np.random.default_rng(0)

    def t(*shape):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)

    h, att, wide, w = t(8, 16, 32), t(8, 2, 16, 16), t(8, 16, 128), t(96, 32)
    logits, target = t(128, 65), lib.from_numpy(rng.integers(0, 65, 128))
    gain, bias = t(32), t(32)
    cases = {
        "layer_norm (8,16,32)": lambda: F.layer_norm(h, (32,), gain, bias),
        "softmax (8,2,16,16)": lambda: att.softmax(dim=-1),
        "gelu (8,16,128)": lambda: F.gelu(wide),
        "cross_entropy (128,65)": lambda: F.cross_entropy(logits, target),
        "linear (8,16,32)x(32,96)": lambda: F.linear(h, w),
        "add (8,16,32)": lambda: h + h,
        "norm (96,32)": lambda: w.norm(),
    }
    out = {}
    for name, fn in cases.items():
        for _ in range(10):
            fn()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out[name] = (time.perf_counter() - t0) / reps * 1e6
    return out


def profile_report(impls) -> str:
    """Phases of the eager step and single-operation costs, fusegrad against PyTorch
    (when timed), then cProfile's view of fusegrad's step."""
    eager = [i for i in ("fusegrad", "torch") if i in impls]
    ph = {i: phases(i) for i in eager}
    ops = {i: composites(i) for i in eager}
    lines = ["| part of the eager step (ms, median) | " + " | ".join(eager) + " |",
             "|---|" + "---|" * len(eager)]
    lines += [f"| {k} | " + " | ".join(f"{ph[i][k]:.2f}" for i in eager) + " |"
              for k in ph["fusegrad"]]
    lines += ["", "| one operation (us/call, forward, records autograd) | "
              + " | ".join(eager) + " |", "|---|" + "---|" * len(eager)]
    lines += [f"| {k} | " + " | ".join(f"{ops[i][k]:.0f}" for i in eager) + " |"
              for k in ops["fusegrad"]]
    return "\n".join(lines) + "\n\n" + profile_eager()


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
        print(profile_report(impls))
        return 0
    rounds, inner = (3, 3) if args.quick else (args.rounds, args.inner)
    from benchmarks import report

    info = report.machine()
    rows = measure(impls, rounds, inner)
    print(table(rows))
    if args.json:
        info.update(command="python benchmarks/gpt.py " + " ".join(argv), rounds=rounds,
                    inner=inner, rows=rows, markdown=table(rows),
                    affinity=sorted(os.sched_getaffinity(0)),
                    threads={k: os.environ.get(k) for k in ("OMP_NUM_THREADS",
                                                            "NUMBA_NUM_THREADS",
                                                            "OPENBLAS_NUM_THREADS",
                                                            "OPENBLAS_CORETYPE")})
        Path(args.json).write_text(json.dumps(info, indent=1, default=str))
    return 0 if all(r["status"] == "ok" for r in rows if r["impl"] != "torch.compile") else 1


if __name__ == "__main__":
    sys.exit(main())
