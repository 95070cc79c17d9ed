"""Partial reductions on the lean code generator: a kernel of at least
``PARALLEL_THRESHOLD`` iterations with row, column or middle-axis reductions runs in fixed
chunks of an axis its reductions keep, so its results equal the interpreter's and have the
same bits with threads off, on one thread and on all of them; the default backend never
builds Numba's executable for such a program."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import lean
from fusegrad.codegen.lean import kernel as kn
from fusegrad.runtime import compiled, threading_layer
from fusegrad.runtime.lean_exec import LeanExecutable
from tests.helpers import assert_close, interpreted, on_one_and_all_threads

pytestmark = pytest.mark.compiled

pytest.importorskip("numba")


def row_sums(x):
    return fnp.sum(fnp.sum(fnp.sin(x), axis=1) ** 2)


def column_sums(x):
    return fnp.sum(fnp.sum(x * x, axis=0) ** 2) + fnp.sum(fnp.exp(-x * x))


def middle_max(y):
    return fnp.sum(fnp.max(y, axis=1) ** 2) + fnp.mean(y ** 3)


def variances(x):
    m = fnp.mean(x, axis=0, keepdims=True)
    return fnp.sum(fnp.mean((x - m) ** 2, axis=0)) + fnp.sum(fnp.var(x, axis=1) * x[:, 0])


def softmax_cross_entropy(x, labels):
    m = fnp.max(x, axis=1, keepdims=True)
    z = x - m
    lse = fnp.log(fnp.sum(fnp.exp(z), axis=1, keepdims=True))
    return -fnp.mean(fnp.sum(labels * (z - lse), axis=1))


def _x(shape, dtype=np.float64):
    """Random normal values of ``shape``."""
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def _labels(n, k):
    return np.eye(k)[np.random.default_rng(n).integers(0, k, n)]


CASES = [
    (row_sums, (_x((600, 500)),)),
    (column_sums, (_x((600, 500)),)),
    (column_sums, (_x((520, 700), np.float32),)),
    (middle_max, (_x((20, 300, 50)),)),
    (variances, (_x((700, 400)),)),
    (softmax_cross_entropy, (_x((1024, 300)), _labels(1024, 300))),
]


def _compiled(g, *args):
    """``g(*args)`` and the executable it ran on (``g`` a fresh transform: it compiles)."""
    before = set(compiled._cache)
    out = g(*args)
    (exe,) = [e for k, (_, e) in compiled._cache.items() if k not in before]
    return out, exe


def _bits(out) -> list[bytes]:
    return [np.asarray(r).tobytes() for r in out]


@pytest.mark.parametrize("f,args", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_partial_reductions_run_in_chunks_with_the_same_bits_on_any_thread_count(
        f, args, monkeypatch):
    out, exe = _compiled(fg.value_and_grad(f, argnums=0), *args)
    assert isinstance(exe, LeanExecutable)
    partial = [op for op in exe.fused.ops if op.name == "fused" and "partial" in kn.kinds(op)
               and np.prod(kn.space_of(op)) >= config.PARALLEL_THRESHOLD]
    assert partial and set(partial) <= lean.chunked_kernels(exe.fused)
    want = interpreted(fg.value_and_grad(f, argnums=0), *args)
    kind = "f32" if args[0].dtype == np.float32 else "exact64"
    assert_close(out[0], want[0], kind)
    assert_close(out[1], want[1], kind)
    if not exe.threaded:
        pytest.skip("no thread-safe threading layer: chunks run on one thread")
    g = fg.value_and_grad(f, argnums=0)
    one, every = on_one_and_all_threads(g, *args)
    monkeypatch.setattr(threading_layer, "THREAD_SAFE", frozenset())
    off, serial = _compiled(fg.value_and_grad(f, argnums=0), *args)
    assert not serial.threaded  # the chunks one after another, in the entry
    assert _bits(one) == _bits(every) == _bits(off) == _bits(out)


def _kernel(f, *args):
    """The results of ``fg.jit(f)(*args)`` and its one loop kernel."""
    out, exe = _compiled(fg.jit(f), *args)
    (op,) = [op for op in exe.fused.ops if op.name == "fused"]
    return out, op, op in lean.chunked_kernels(exe.fused)


def _check(out, f, *args):
    for got, want in zip(out, interpreted(fg.jit(f), *args)):
        assert_close(got, want, "f32" if got.dtype == np.float32 else "exact64")


def test_mixed_results_in_one_chunked_kernel():
    """Elementwise results, a full reduction, a row maximum computed inside its chunk and
    column sums split over chunks of rows, all in one kernel."""
    def f(x):
        s = fnp.sin(x)
        return s * 2.0, fnp.sum(s * x), fnp.sum(s, axis=0), fnp.max(s * x, axis=1)

    x = _x((600, 500))
    out, op, chunked = _kernel(f, x)
    assert kn.kinds(op) == ["array", "full", "partial", "partial"]
    assert chunked and kn.chunking(op) == (0, (False, False, True, False))
    _check(out, f, x)


def test_outputs_kept_by_the_chunk_axis_are_reduced_as_by_the_one_thread_loop(monkeypatch):
    """A partial reduction keeping the chunk axis adds each output's terms in the order of
    the loop run whole on one thread: the same bits as that loop."""
    def f(x, y):
        return fnp.sum(fnp.cos(x), axis=1), fnp.max(x, axis=1), fnp.sum(y * y, axis=(1, 2))

    args = (_x((600, 500)), _x((30, 200, 60)))
    chunked, exe = _compiled(fg.jit(f), *args)
    ops = [op for op in exe.fused.ops if op.name == "fused"]
    assert set(ops) == lean.chunked_kernels(exe.fused)
    assert all(kn.chunking(op) == (0, (False,) * len(op.results)) for op in ops)
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    whole, exe = _compiled(fg.jit(f), *args)
    assert not lean.chunked_kernels(exe.fused)
    assert _bits(chunked) == _bits(whole)


def test_short_outer_axis_chunks_columns_or_runs_whole():
    """Column sums of (2, N): one partial result per chunk of rows would take as much
    memory as the input, so the kernel runs in chunks of columns; with the row sums in the
    same kernel no axis is kept by both, and it runs whole, on one thread."""
    def columns(x):
        return (fnp.sum(fnp.sin(x), axis=0),)

    def both(x):
        s = fnp.sin(x)
        return fnp.sum(s, axis=0), fnp.max(s, axis=1)

    x = _x((2, 200_000))
    out, op, chunked = _kernel(columns, x)
    assert chunked and kn.chunking(op) == (1, (False,))
    assert kn.chunks(op) == (200_000, kn.CHUNK, -(-200_000 // kn.CHUNK))
    _check(out, columns, x)
    out, op, chunked = _kernel(both, x)
    assert kn.chunking(op) is None and not chunked
    _check(out, both, x)


def test_chunks_are_fixed_by_the_shape():
    """Rows kept: a chunk is the fewest rows covering ``CHUNK`` elements; rows summed:
    the fewest covering ``SPLIT_CHUNK``, each chunk with its own partial column sums."""
    x = _x((600, 1100))
    _, rows, _ = _kernel(lambda x: fnp.sum(x, axis=1), x)
    _, cols, _ = _kernel(lambda x: fnp.sum(x, axis=0), x)
    assert kn.chunking(rows) == (0, (False,)) and kn.chunks(rows) == (600, 1, 600)
    width = -(-kn.SPLIT_CHUNK // 1100)
    assert kn.chunking(cols) == (0, (True,))
    assert kn.chunks(cols) == (600, width, -(-600 // width))
    _, middle, _ = _kernel(lambda y: fnp.sum(y, axis=1), _x((1, 300, 1000)))
    assert kn.chunking(middle) == (1, (True,))  # the outermost axis of more than one
    assert kn.chunks(middle) == (300, 66, 5)


def test_large_partial_reductions_run_on_the_lean_generator():
    """A program with large partial reductions runs on the lean generator."""
    code = ("import sys, numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
            "from fusegrad.runtime import compiled\n"
            "x = np.linspace(-1.0, 1.0, 600 * 500).reshape(600, 500)\n"
            "v, g = fg.value_and_grad(lambda x: fnp.sum(fnp.sum(x, axis=0) ** 2)"
            " + fnp.sum(fnp.max(x * x, axis=1)))(x)\n"
            "print(sorted({type(e).__name__ for _, e in compiled._cache.values()}))\n"
            "print(repr(float(v)), repr(float(np.sum(g * x))))\n")
    lines = subprocess.run([sys.executable, "-c", code], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert lines[0] == "['LeanExecutable']"
    x = np.linspace(-1.0, 1.0, 600 * 500).reshape(600, 500)
    want = float(np.sum(np.sum(x, axis=0) ** 2)) + float(np.sum(np.max(x * x, axis=1)))
    value, dot = (float(s) for s in lines[1].split())
    assert_close(value, want, "exact64")
    grad = 2 * np.sum(x, axis=0) * np.ones_like(x)
    grad += np.where(x * x == np.max(x * x, axis=1, keepdims=True), 2 * x, 0.0)
    assert_close(dot, float(np.sum(grad * x)), "exact64")
