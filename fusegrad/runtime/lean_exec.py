"""Running a Function on the lean code generator (``codegen.lean``).

``LeanExecutable`` is what ``compiled.executable`` returns: ``__call__``,
``call_unchecked`` and ``fast_caller``. A Function whose ops the generator all lowers
is one CPython builtin, called with the parameter arrays, fresh result arrays and an
arena; nothing of Numba is imported. Any other Function is split into segments
(``segments``): runs of lowered ops, each compiled the same way, and between them the
ops it does not lower, run with their NumPy implementations, whose control-flow
regions run compiled in turn. Arenas are reused: one is kept beside each segment
for the usual single-threaded caller, and a thread finding it taken makes its own.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..codegen import lean
from ..codegen.lean import caller as lean_caller
from ..codegen.lean import inplace
from ..codegen.lean import sizes as lean_sizes
from ..ir import Function, Op
from ..ir.control_ops import CONTROL_OPS, RUNNER
from ..ir.printer import print_function
from ..ir.stats import take_phases
from . import blas_threads, threading_layer
from .interpreter import run, run_op


def segments(fused: Function) -> list[Function | Op]:
    """``fused``'s ops as a schedule: Functions (runs of ops the lean generator lowers,
    taking the values they read and returning the values read after them) and the
    other ops, one by one. Lowered ops are gathered as early as their operands allow,
    so a Function with a few ops the generator does not lower has few segments. A
    Function whose ops are all lowered but which takes or returns a value of a dtype the
    generator has no place for (a complex carry a loop's condition passes over) is one
    segment of its ops, around those values."""
    ready = {*fused.params}
    pending = list(fused.ops)
    native = {op: lean.lowers(op) for op in pending}
    if all(native.values()) and lean.holds(fused):
        return [fused]
    used = {v for op in fused.ops for v in op.operands} | set(fused.results)
    order: list[list[Op] | Op] = []
    while pending:
        run_, rest = [], []
        for op in pending:
            if native[op] and all(v in ready for v in op.operands):
                run_.append(op)
                ready.update(op.results)
            else:
                rest.append(op)
        if any(r in used for op in run_ for r in op.results):  # else all of it is dead
            order.append(run_)
        for i, op in enumerate(rest):
            if not native[op] and all(v in ready for v in op.operands):
                order.append(op)
                ready.update(op.results)
                del rest[i]
                break
        pending = rest
    wanted = [set(fused.results)]  # values read at or after each step, from the end
    for step in reversed(order):
        reads = set(wanted[-1])
        for op in (step if isinstance(step, list) else [step]):
            reads.update(op.operands)  # regions are closed: their reads are operands
        wanted.append(reads)
    wanted.reverse()
    out: list[Function | Op] = []
    for i, step in enumerate(order):
        if not isinstance(step, list):
            out.append(step)
            continue
        made = {r for op in step for r in op.results}
        inputs = list(dict.fromkeys(v for op in step for v in op.operands if v not in made))
        results = [v for v in dict.fromkeys(r for op in step for r in op.results)
                   if v in wanted[i + 1]]
        out.append(Function(f"{fused.name}.{i}", tuple(inputs), tuple(step), tuple(results)))
    return out


def _text(parts) -> str:
    """The program's text: each segment's LLVM IR, each op between them as a comment."""
    return "\n".join(
        p if isinstance(p, str) else "; between segments, with NumPy:\n; "
        + print_function(Function("host", (), (p,), ())).replace("\n", "\n; ")
        for p in parts)


def source(fused: Function) -> str:
    """The annotated LLVM IR ``fused`` compiles to (``fusegrad dump --stage source``)."""
    return _text([lean.source(s) if isinstance(s, Function) else s for s in segments(fused)])


class _Segment:
    """One compiled run of ops: ``run(args) -> results``, with its arenas."""

    def __init__(self, fn: Function, digest: str | None = None):
        self.fn = fn
        # large loops run in chunks, on threads where the threading layer is thread-safe
        # (a layer that is not runs them on one thread: the same bits)
        threads = bool(lean.chunked_kernels(fn)) and threading_layer.layer() in (
            threading_layer.THREAD_SAFE)
        self.code = lean.compile_function(fn, threads, digest)
        self.threaded = threads
        self.out_specs = tuple((r.type.shape, r.type.dtype) for r in fn.results)
        self.arena_bytes = max(self.code.arena_bytes, 1)
        self.spare: list = [self._arena()]
        # small matrix products: one BLAS thread (see runtime/blas_threads.py)
        self.serial = (blas_threads.serial()
                       if blas_threads.wanted(fn, config.BLAS_SERIAL_MAX) else None)
        #: ``(result, parameter)`` indices: result written over the donated parameter's
        #: array (``LeanExecutable.donate``)
        self.inplace: tuple = ()

    def _arena(self) -> np.ndarray:
        """A new arena, holding the entry's size table (``codegen.lean.sizes``)."""
        return lean_sizes.fill(np.empty(self.arena_bytes, np.uint8), self.code)

    def run(self, args) -> list:
        outs = [np.empty(s, d) for s, d in self.out_specs]
        for j, i in self.inplace:
            if _given_up(args, i):
                outs[j] = args[i]
        try:
            arena = self.spare.pop()
        except IndexError:
            arena = self._arena()
        if self.serial is None:
            self.code.call(*args, *outs, arena)
        else:
            with self.serial:
                self.code.call(*args, *outs, arena)
        self.spare.append(arena)
        return outs


def _given_up(args, i: int) -> bool:
    """Whether donated ``args[i]`` may take a result: a writeable array owning its
    memory that no other argument is or views (such an array keeps its contents)."""
    a = args[i]
    if a.base is not None or not a.flags.writeable:
        return False
    return not any(k != i and (b is a or b.base is a) for k, b in enumerate(args))


def _contiguous(a: np.ndarray, dtype) -> np.ndarray:
    if type(a) is not np.ndarray or a.dtype != dtype:
        a = np.asarray(a, dtype=dtype)
    return a if a.flags.c_contiguous and a.flags.aligned else np.ascontiguousarray(a)


class LeanExecutable:
    """``fused`` (the optimised form of ``fn``) compiled by the lean code generator;
    ``regions(fn, args)`` runs a control-flow region (compiled, by the caller's cache).
    ``plan``: the ``plan`` of an earlier build of ``fused`` (its segments and their
    text digests, kept by the pass cache), so a warm start neither splits nor prints
    the program again."""

    def __init__(self, fn: Function, fused: Function, reason: str, regions=None,
                 plan: list | None = None):
        self.fn, self.fused, self.reason = fn, fused, reason
        self.param_specs = tuple((p.type.shape, p.type.dtype) for p in fn.params)
        self.regions = _region_runner(regions) if regions is not None else None
        if plan is None:
            self.steps = segments(fused)
            plan = [(s, lean.digest(s) if isinstance(s, Function) else None)
                    for s in self.steps]
        else:
            self.steps = [s for s, _ in plan]
        #: ``[(segment Function or op between segments, the segment's digest)]``
        self.plan = plan
        parts = [_Segment(s, d) if isinstance(s, Function) else s for s, d in plan]
        self.parts = parts
        #: whether large loops run on the threading layer's threads
        self.threaded = any(getattr(p, "threaded", False) for p in parts)
        whole = len(parts) == 1 and isinstance(parts[0], _Segment) and parts[0].fn is fused
        # ops run between segments (linear algebra, with NumPy's BLAS) are as
        # small as the segments' when every product of the program is
        self.serial = (blas_threads.serial() if not whole and blas_threads.wanted(
            fused, config.BLAS_SERIAL_MAX) else None)
        self._native = (parts[0].run if whole else self._segmented if self.serial is None
                        else self._serial_segmented)
        self.phases = take_phases()
        self.warm = True

    def donate(self, donated) -> None:
        """Write results over the parameters ``donated`` (indices) where the program
        allows (``codegen.lean.inplace``): one compiled segment only."""
        seg = self.parts[0] if len(self.parts) == 1 else None
        if donated and isinstance(seg, _Segment) and seg.fn is self.fused:
            seg.inplace = inplace.donatable(self.fused, frozenset(donated))

    @property
    def source(self) -> str:
        """The annotated LLVM IR of every segment, with the ops between them."""
        return _text([lean.source(p.fn, p.threaded)
                      if isinstance(p, _Segment) else p for p in self.parts])

    def kernels(self) -> tuple[int, int]:
        """Kernels of this function, and how many of them were compiled (not reused)."""
        segs = [p for p in self.parts if isinstance(p, _Segment)]
        return sum(s.code.kernels for s in segs), sum(s.code.compiled for s in segs)

    def _serial_segmented(self, args) -> list:
        with self.serial:
            return self._segmented(args)

    def _segmented(self, args) -> list:
        env = dict(zip(self.fused.params, args))
        for p in self.parts:
            if isinstance(p, _Segment):
                outs = p.run([_contiguous(env[v], v.type.dtype) for v in p.fn.params])
                env.update(zip(p.fn.results, outs))
                continue
            before = RUNNER.fn
            if p.name in CONTROL_OPS:  # their bodies run compiled
                RUNNER.fn = self.regions
            try:
                out = run_op(self.fn.name, p, [env[v] for v in p.operands])
            finally:
                RUNNER.fn = before
            env.update(zip(p.results, out if len(p.results) > 1 else (out,)))
        params = {id(a) for a in args}
        res = []
        for r in self.fused.results:
            a = env[r]
            if id(a) in params or type(a) is not np.ndarray or not a.flags.owndata:
                a = np.array(a, dtype=r.type.dtype)  # results never alias the arguments
            res.append(a)
        return res

    def _convert(self, args):
        conv = []
        for a, (shape, dtype) in zip(args, self.param_specs):
            a = np.asarray(a)
            if a.dtype != dtype or a.shape != shape:
                return None
            conv.append(a if a.flags.c_contiguous and a.flags.aligned
                        else np.ascontiguousarray(a))
        return conv

    def __call__(self, *args):
        conv = self._convert(args)
        if conv is None:
            return run(self.fn, *args)  # the interpreter raises the precise error
        out = tuple(self._native(conv))
        if config.DEBUG_NANS:
            _check_nans(self.fn, args, out)
        return out

    def call_unchecked(self, args):
        out = self._native([a if a.flags.c_contiguous and a.flags.aligned
                            else np.ascontiguousarray(a) for a in args])
        if config.DEBUG_NANS:
            _check_nans(self.fn, args, out)
        return out

    def fast_caller(self, extra: tuple = ()):
        """``(args, first) -> results[first:]`` for ndarray arguments of the right types
        (``extra`` appended to them)."""
        extra = tuple(np.asarray(a, dtype=p.type.dtype) for a, p in
                      zip(extra, self.fn.params[len(self.fn.params) - len(extra):]))
        native = self._native

        def call(args, first=0):
            if config.DEBUG_NANS:
                return self.call_unchecked((*args, *extra))[first:]
            for a in args:
                if not a.flags.c_contiguous:
                    return native([np.ascontiguousarray(a) for a in (*args, *extra)])[first:]
            return native((*args, *extra))[first:]
        return call

    def native_caller(self, extra: tuple = (), first: int = 0, as_tuple: bool = False):
        """``caller(*args)``: the whole call in machine code (``codegen.lean.caller``) for
        arguments of this function's types (``extra`` appended to them), returning its
        results from ``first`` on (the one, or a tuple if more or ``as_tuple``), or
        ``NotImplemented`` for arguments it does not take (any other type, dtype, shape
        or layout: the caller takes its general path). None where the program is not one
        segment, runs in a BLAS serial section, writes results over donated parameters
        (``donate``: ``_Segment.run`` does) or its results have no native type."""
        seg = self.parts[0]
        if (self._native != getattr(seg, "run", None) or seg.serial is not None
                or seg.inplace):
            return None
        n = len(self.fn.params) - len(extra)
        extra = tuple(np.asarray(a, dtype=p.type.dtype, order="C")
                      for a, p in zip(extra, self.fn.params[n:]))
        return lean_caller.caller(seg.code, self.param_specs[:n], seg.out_specs, extra,
                                  first, as_tuple)


def _check_nans(fn: Function, args, out) -> None:
    from . import debug_nans  # (loaded by the first call with FUSEGRAD_DEBUG_NANS set)

    debug_nans.check(fn, args, out)


def _region_runner(executable):
    """``(region, args) -> results``, running each region by ``executable(region)``,
    looked up once per region."""
    seen: dict[Function, object] = {}

    def run_region(region: Function, args) -> list:
        exe = seen.get(region)
        if exe is None:
            exe = seen[region] = executable(region)
        if type(exe) is LeanExecutable:
            return exe._native([_contiguous(a, p.type.dtype)
                                for a, p in zip(args, region.params)])
        return exe(*args)
    return run_region


def build(fn: Function, fused: Function, reason: str, regions=None,
          plan: list | None = None) -> LeanExecutable:
    """``fn`` on the lean code generator (``regions``, ``plan``: see ``LeanExecutable``)."""
    return LeanExecutable(fn, fused, reason, regions, plan)
