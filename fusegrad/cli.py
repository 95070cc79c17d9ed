"""The ``fusegrad`` command: ``dump`` (IR at every stage), ``eject`` (a standalone Numba
module), ``demo`` and ``bench``."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import sys

from .ir.errors import FusegradError
from .ir.types import parse_type


class UsageError(Exception):
    """A bad command line: reported in one line with exit code 2."""


def _load_function(spec: str):
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise UsageError(f"expected FILE.py:FUNC, got {spec!r}")
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    mod_spec = importlib.util.spec_from_file_location("_fusegrad_dump_target", path)
    if mod_spec is None or mod_spec.loader is None:
        raise UsageError(f"cannot import {path} (is it a .py file?)")
    module = importlib.util.module_from_spec(mod_spec)
    # registered while it runs, as a normal import would be: dataclasses and typing look
    # their defining module up in sys.modules
    sys.modules[mod_spec.name] = module
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(mod_spec.name, None)
        raise UsageError(f"importing {path} failed: {type(e).__name__}: {e}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UsageError(f"{path} has no function named {name!r}")
    return fn


def _function_and_types(args):
    """The function ``FILE.py:FUNC`` names and its ``--arg`` types, checked against it."""
    fn = _load_function(args.target)
    try:
        types = [parse_type(a) for a in args.arg]
    except ValueError as e:
        raise UsageError(str(e)) from None
    _check_arity(fn, args.target, len(types))
    return fn, types


def _cmd_dump(args) -> int:
    from .transforms.inspection import STAGES, dump

    fn, types = _function_and_types(args)
    if args.grad and not any(t.is_float for t in types):
        given = " ".join(args.arg) or "no --arg"
        raise UsageError(f"--grad: nothing to differentiate: the arguments ({given}) have no "
                         "floating-point type, and only floating-point arguments have "
                         "gradients; give one as f64[...] or f32[...], or drop --grad")
    stage = args.stage or ("all" if args.grad else "traced")
    if stage not in (*STAGES, "all"):
        raise UsageError(f"unknown stage {stage!r}: choose {', '.join(STAGES)} or all")
    dump(fn, *types, stage=stage, grad=args.grad, locs=args.locs)
    return 0


def _cmd_eject(args) -> int:
    import numpy as np

    from .transforms.eject import eject
    from .transforms.reverse import grad

    fn, types = _function_and_types(args)
    examples = tuple(np.zeros(t.shape, t.dtype) for t in types)
    functions = {"forward": (fn, examples)}
    if args.grad:
        nums = [i for i, t in enumerate(types) if t.is_float]
        if not nums:
            raise UsageError("--grad: no floating-point argument to differentiate")
        g = grad(fn, argnums=nums[0] if len(nums) == 1 else tuple(nums))
        functions["gradient"] = (g, examples)
    sig = " ".join(f"--arg {a}" for a in args.arg)
    doc = (f"{args.target} ({sig}{' --grad' if args.grad else ''}), written by "
           "`fusegrad eject`.\n\nPlain Numba functions: `forward(...)`"
           + (" and `gradient(...)` (one array per differentiated argument)" if args.grad
              else "") + ", one positional argument per\n--arg, for any extents of those "
           "ranks (unless the function's structure depends on its\nsizes: then for those "
           "shapes only). Compiles its LLVM IR with llvmlite when imported;\nimports NumPy, Numba "
           "and llvmlite (SciPy for its BLAS or special functions), never fusegrad.\n")
    text = eject(functions, doc)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}: {', '.join(functions)}")
    return 0


def _check_arity(fn, target: str, n: int) -> None:
    """One ``--arg`` per positional parameter, checked before tracing (a usage error)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError as e:
        raise UsageError(
            f"{target}{sig} was given {n} --arg type(s): {e}; pass one --arg per "
            "positional parameter"
        ) from None


def _cmd_demo(args) -> int:
    from .demo import run_demo

    try:
        return run_demo(steps=args.steps, batch_size=args.batch_size, seed=args.seed,
                        jit=not args.no_jit, out=args.out)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _cmd_bench(args) -> int:
    from . import bench

    if args.what == "gpt" or (args.only or "").strip().lower() == "gpt":
        try:
            bench._suite("gpt")
        except bench.BenchUnavailable as e:
            raise UsageError(str(e)) from None
        argv = [*(["--quick"] if args.quick else []), *(["--json", args.json] if args.json else []),
                *(["--rounds", str(args.rounds)] if args.rounds else []),
                *(["--in-process"] if args.in_process else []), *args.gpt]
        return bench.run_gpt(argv)
    if args.what == "compile":
        try:
            families = bench._suite("compile_latency").FAMILIES
            bad = [f for f in (args.only or "").split(",") if f.strip() and f not in families]
            if bad:
                raise ValueError(f"unknown family {', '.join(bad)}: choose from "
                                 f"{', '.join(families)}")
            if args.rounds is not None and args.rounds < 1:
                raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
        except (ValueError, bench.BenchUnavailable) as e:
            raise UsageError(str(e)) from None
        return bench.run_compile(quick=args.quick, json_path=args.json, rounds=args.rounds,
                                 families=args.only)
    try:
        bench.parse_workloads(args.only)
        if args.rounds is not None and args.rounds < 1:
            raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
        bench._suite()
    except (ValueError, bench.BenchUnavailable) as e:
        raise UsageError(str(e)) from None
    return bench.run(quick=args.quick, only=args.only, json_path=args.json,
                     threads=args.threads, impls=args.impl, rounds=args.rounds,
                     in_process=args.in_process, worker=args.worker, partial=args.partial)


def _add_bench(sub) -> None:
    b = sub.add_parser("bench", help="time the workloads W1-W5 against NumPy, Numba, JAX, "
                       "PyTorch, or compile latency against JAX (needs a source checkout)")
    b.add_argument("what", nargs="?", choices=("workloads", "compile", "gpt"),
                   default="workloads",
                   help="the workloads W1-W5 (default), or `compile`: cold and warm "
                   "compile latency by program size (--only takes its families: "
                   "elementwise,mlp,loops,conds), or `gpt` (also `--only gpt`): a small "
                   "GPT's training step against PyTorch (benchmarks/gpt.py; add --gpt=--all "
                   "for fg.jit and torch.compile)")
    b.add_argument("--quick", action="store_true", help="small sizes and few rounds")
    b.add_argument("--only", metavar="W1,W4", help="run only these workloads (W1..W5)")
    b.add_argument("--json", metavar="PATH",
                   help="where to write the results (default benchmarks/results/latest.json)")
    b.add_argument("--threads", choices=("1", "default", "both"), default="both",
                   help="1 thread (pinned with taskset), the default threads, or both")
    b.add_argument("--impl", metavar="A,B",
                   help="only these implementations (fusegrad, numpy, numba, jax.jit, ...)")
    b.add_argument("--rounds", type=int, metavar="N", help="timing rounds (default 7, quick 3)")
    b.add_argument("--in-process", action="store_true",
                   help="run in this process with its thread settings (no re-exec)")
    b.add_argument("--gpt", action="append", default=[], metavar="OPTION",
                   help="an option for `bench gpt` (--jit, --torch-compile, --all, --profile, "
                   "--inner N, --no-torch), e.g. --gpt=--all")
    b.add_argument("--worker", choices=("1", "default"), help=argparse.SUPPRESS)
    b.add_argument("--partial", help=argparse.SUPPRESS)
    b.set_defaults(run=_cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__
    from .transforms.inspection import STAGES

    p = argparse.ArgumentParser(
        prog="fusegrad", description="Differentiate NumPy-style functions; inspect their IR."
    )
    p.add_argument("--version", action="version", version=f"fusegrad {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="print a function's IR after each stage")
    d.add_argument("target", metavar="FILE.py:FUNC", help="the function to trace")
    d.add_argument("--arg", action="append", default=[], metavar="TYPE",
                   help="type of the next positional argument, e.g. f64[1000] or f32[3,4]")
    d.add_argument("--grad", action="store_true", help="also differentiate (reverse mode)")
    d.add_argument("--locs", action="store_true",
                   help="end each op with its source file:line (adjoint ops: the primal op's)")
    d.add_argument("--stage", choices=None, metavar="|".join((*STAGES, "all")),
                   help="which stage to print (default: all with --grad, else traced)")
    d.set_defaults(run=_cmd_dump)
    e = sub.add_parser("eject", help="write a standalone Numba module (no fusegrad import) "
                       "of a function and, with --grad, its gradient")
    e.add_argument("target", metavar="FILE.py:FUNC", help="the function to trace")
    e.add_argument("--arg", action="append", default=[], metavar="TYPE",
                   help="type of the next positional argument, e.g. f64[1000] or f32[3,4]")
    e.add_argument("--grad", action="store_true", help="also write gradient(...)")
    e.add_argument("-o", "--out", required=True, metavar="OUT.py", help="the module to write")
    e.set_defaults(run=_cmd_eject)
    demo = sub.add_parser("demo", help="train an MLP on two spirals with a compiled step")
    demo.add_argument("--steps", type=int, default=1000, help="training steps (default 1000)")
    demo.add_argument("--batch-size", type=int, default=128, help="minibatch size (default 128)")
    demo.add_argument("--seed", type=int, default=0, help="seed of data, init and batches")
    demo.add_argument("--no-jit", action="store_true",
                      help="train with the eager fg.nn / fg.optim step instead of fg.jit")
    demo.add_argument("--out", metavar="PNG",
                      help="where to write the plot (default ./fusegrad-demo.png, or the "
                      "temp directory if the current one is not writable)")
    demo.set_defaults(run=_cmd_demo)
    _add_bench(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as e:
        print(f"fusegrad {args.command}: error: {e}", file=sys.stderr)
        return 2
    except FusegradError as e:
        print(f"fusegrad {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
