"""Run the fuzzer over a range of seeds and report (also ``python -m tests.fuzz``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from .checks import applicable, failures
from .gen import generate, program
from .shrink import shrink

#: Seeds >= this are the large sample (``pytest -m fuzz``); below it, the default sample.
LARGE_START = 100_000


@dataclass
class Report:
    programs: int = 0
    compiled: int = 0
    checks: int = 0
    ops: Counter = field(default_factory=Counter)
    failed: list = field(default_factory=list)  # (seed, check, exception, shrunk program)
    seconds: float = 0.0

    def summary(self) -> str:
        lines = [f"{self.programs} programs ({self.compiled} also compiled), {self.checks} "
                 f"checks, {len(self.failed)} failing check(s), {self.seconds:.1f} s; "
                 f"{len(self.ops)} distinct ops drawn"]
        for seed, check, exc, small in self.failed:
            head = str(exc).strip().splitlines()[:1] or [""]
            lines.append(f"\nseed {seed}: {check} failed: {type(exc).__name__}: {head[0]}")
            lines.append(f"reproduce: FUSEGRAD_FUZZ_SEED={seed} python -m pytest tests/fuzz "
                         "-k seed")
            lines.append("shrunk to:\n" + small.describe())
        return "\n".join(lines)


def failure_message(seed: int, compiled: bool) -> str | None:
    """None if every check passes on the program of ``seed``, else a report of the first
    failing check: the exception and the program shrunk greedily."""
    p = program(seed)
    bad = failures(p, compiled)
    if not bad:
        return None
    check, exc = bad[0]
    small = shrink(p, check)
    others = ", ".join(n for n, _ in bad[1:]) or "none"
    return (f"seed {seed}: check {check!r} failed ({type(exc).__name__}); other failing "
            f"checks: {others}\n{exc}\n\nreproduce: FUSEGRAD_FUZZ_SEED={seed} python -m pytest "
            f"tests/fuzz -k seed\n\nshrunk program (still fails {check!r}):\n{small.describe()}"
            f"\n\noriginal program:\n{p.source()}")


def run(seeds, compiled_every: int = 0, do_shrink: bool = True, out=None,
        seconds: float | None = None) -> Report:
    """Run every check on the programs of ``seeds``; compile every ``compiled_every``-th;
    stop early once ``seconds`` have passed."""
    rep = Report()
    t0 = time.perf_counter()
    for n, seed in enumerate(seeds):
        if seconds is not None and time.perf_counter() - t0 > seconds:
            break
        p = generate(seed)
        compiled = bool(compiled_every) and n % compiled_every == 0
        rep.programs += 1
        rep.compiled += compiled
        rep.checks += len(applicable(p, compiled))
        rep.ops.update(i.op for i in p.instrs)
        for check, exc in failures(p, compiled):
            small = shrink(p, check) if do_shrink else p
            rep.failed.append((seed, check, exc, small))
            if out is not None:
                print(f"seed {seed}: {check} failed: {type(exc).__name__}", file=out, flush=True)
        if out is not None and (n + 1) % 500 == 0:
            print(f"... {n + 1} programs, {time.perf_counter() - t0:.0f} s", file=out,
                  flush=True)
    rep.seconds = time.perf_counter() - t0
    return rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("-n", type=int, default=1000, help="number of programs (default 1000)")
    ap.add_argument("--start", type=int, default=LARGE_START, help="first seed")
    ap.add_argument("--compiled-every", type=int, default=0, metavar="K",
                    help="also compile every K-th program (0: none)")
    ap.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")
    ap.add_argument("--seconds", type=float, default=None,
                    help="stop starting new programs after this many seconds")
    args = ap.parse_args(argv)
    rep = run(range(args.start, args.start + args.n), args.compiled_every,
              not args.no_shrink, out=sys.stderr, seconds=args.seconds)
    print(rep.summary())
    return 1 if rep.failed else 0
