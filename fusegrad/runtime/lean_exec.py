"""Running a Function on the lean code generator (``codegen.lean``).

``LeanExecutable`` has the interface of ``compiled.Executable``: ``__call__``,
``call_unchecked`` and ``fast_caller``. Its machine code is one CPython builtin per
Function, called with the parameter arrays, fresh result arrays and an arena;
nothing of Numba is imported. Arenas are reused: one is kept beside the callable
for the usual single-threaded caller, and a thread finding it taken makes its own.
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..codegen import lean
from ..ir import Function
from ..ir.stats import take_phases
from . import blas_threads, debug_nans
from .interpreter import run


class LeanExecutable:
    """``fused`` (the optimised form of ``fn``) compiled by the lean code generator."""

    def __init__(self, fn: Function, fused: Function, reason: str):
        self.fn, self.fused, self.reason = fn, fused, reason
        self.code = lean.compile_function(fused)
        self.out_specs = tuple((r.type.shape, r.type.dtype) for r in fn.results)
        self.param_specs = tuple((p.type.shape, p.type.dtype) for p in fn.params)
        self.arena_bytes = max(self.code.arena_bytes, 1)
        self.spare: list = [np.empty(self.arena_bytes, np.uint8)]
        self.source = self.code.text
        self.phases = take_phases()
        # small matrix products: one BLAS thread (see runtime/blas_threads.py)
        self.serial = (blas_threads.serial()
                       if blas_threads.wanted(fused, config.BLAS_SERIAL_MAX) else None)
        self.warm = True

    def kernels(self) -> tuple[int, int]:
        """Kernels of this function, and how many of them were compiled (not reused)."""
        return self.code.kernels, self.code.compiled

    def _native(self, args) -> list:
        outs = [np.empty(s, d) for s, d in self.out_specs]
        try:
            arena = self.spare.pop()
        except IndexError:
            arena = np.empty(self.arena_bytes, np.uint8)
        if self.serial is None:
            self.code.call(*args, *outs, arena)
        else:
            with self.serial:
                self.code.call(*args, *outs, arena)
        self.spare.append(arena)
        return outs

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
            debug_nans.check(self.fn, args, out)
        return out

    def call_unchecked(self, args):
        out = self._native([a if a.flags.c_contiguous and a.flags.aligned
                            else np.ascontiguousarray(a) for a in args])
        if config.DEBUG_NANS:
            debug_nans.check(self.fn, args, out)
        return out

    def fast_caller(self, extra: tuple = ()):
        """``(args, first) -> results[first:]`` for ndarray arguments of the right types
        (``extra`` appended to them)."""
        extra = tuple(np.asarray(a, dtype=p.type.dtype) for a, p in
                      zip(extra, self.fn.params[len(self.fn.params) - len(extra):]))
        native = self._native
        if config.DEBUG_NANS:
            return lambda args, first=0: self.call_unchecked((*args, *extra))[first:]

        def call(args, first=0):
            for a in args:
                if not a.flags.c_contiguous:
                    return native([np.ascontiguousarray(a) for a in (*args, *extra)])[first:]
            return native((*args, *extra))[first:]
        return call


def build(fn: Function, fused: Function, reason: str) -> LeanExecutable | None:
    """``fn`` on the lean code generator, or None if it has ops that path does not lower."""
    try:
        lean.check(fused)
    except lean.Unsupported:
        return None
    return LeanExecutable(fn, fused, reason)
