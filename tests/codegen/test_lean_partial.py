"""Partial reductions on the lean code generator: a kernel of at least
``PARALLEL_THRESHOLD`` iterations with row, column or middle-axis reductions runs in fixed
chunks of an axis its reductions keep, so its results equal the interpreter's and have the
same bits with threads off, on one thread and on all of them; the default backend never
builds Numba's executable for such a program."""

from __future__ import annotations

import os
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
from tests.helpers import assert_close, interpreted

pytestmark = pytest.mark.compiled

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def lean_backend(monkeypatch):
    monkeypatch.setattr(config, "BACKEND", "lean")


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
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = g(*args)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)  # all there are
        every = g(*args)
    finally:
        numba.set_num_threads(before)
    monkeypatch.setattr(threading_layer, "THREAD_SAFE", frozenset())
    off, serial = _compiled(fg.value_and_grad(f, argnums=0), *args)
    assert not serial.threaded  # the chunks one after another, in the entry
    assert _bits(one) == _bits(every) == _bits(off) == _bits(out)


def test_mixed_results_in_one_chunked_kernel():
    """Elementwise results, a full reduction and two partial reductions keeping the same
    axis, computed by one kernel run in chunks of columns."""
    def f(x):
        s = fnp.sin(x)
        return s * 2.0, fnp.sum(s * x), fnp.sum(s, axis=0), fnp.max(s * x, axis=0)

    x = _x((600, 500))
    out, exe = _compiled(fg.jit(f), x)
    (op,) = [op for op in exe.fused.ops if op.name == "fused"]
    assert sorted(kn.kinds(op)) == ["array", "full", "partial", "partial"]
    assert kn.chunk_axis(op) == 1 and op in lean.chunked_kernels(exe.fused)
    for got, want in zip(out, interpreted(fg.jit(f), x)):
        assert_close(got, want, "exact64")


def test_each_output_is_reduced_as_by_the_one_thread_loop(monkeypatch):
    """A partial reduction in chunks adds each output's terms in the order of the loop run
    whole on one thread: the same bits as that loop."""
    def f(x, y):
        return fnp.sum(x, axis=0), fnp.sum(fnp.cos(x), axis=1), fnp.sum(y * y, axis=(0, 2))

    args = (_x((600, 500)), _x((30, 200, 60)))
    chunked, exe = _compiled(fg.jit(f), *args)
    assert all(op in lean.chunked_kernels(exe.fused) for op in exe.fused.ops
               if op.name == "fused")
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62)
    whole, exe = _compiled(fg.jit(f), *args)
    assert not lean.chunked_kernels(exe.fused)
    assert _bits(chunked) == _bits(whole)


def test_kernel_without_a_common_kept_axis_runs_whole():
    """Row and column sums of one array in one kernel keep no common axis: the kernel
    runs whole, on one thread, and its results are right."""
    def f(x):
        s = fnp.sin(x)
        return fnp.sum(s, axis=0), fnp.max(s, axis=1)

    x = _x((600, 500))
    out, exe = _compiled(fg.jit(f), x)
    (op,) = [op for op in exe.fused.ops if op.name == "fused"]
    assert kn.chunk_axis(op) is None and not lean.chunked_kernels(exe.fused)
    for got, want in zip(out, interpreted(fg.jit(f), x)):
        assert_close(got, want, "exact64")


def test_chunks_are_fixed_by_the_shape():
    """Rows: a chunk is the fewest rows covering ``CHUNK`` elements; columns: ``CHUNK``
    columns (or all there are), each over all rows."""
    x = _x((600, 1100))
    _, exe = _compiled(fg.jit(lambda x: fnp.sum(x, axis=1)), x)
    (rows,) = [op for op in exe.fused.ops if op.name == "fused"]
    _, exe = _compiled(fg.jit(lambda x: fnp.sum(x, axis=0)), x)
    (cols,) = [op for op in exe.fused.ops if op.name == "fused"]
    assert kn.chunk_axis(rows) == 0 and kn.chunks(rows) == (600, 1, 600)
    assert kn.chunk_axis(cols) == 1 and kn.chunks(cols) == (1100, kn.CHUNK, 3)
    _, exe = _compiled(fg.jit(lambda x: fnp.sum(x * x, axis=0)), x[:, :300])
    (narrow,) = [op for op in exe.fused.ops if op.name == "fused"]
    assert kn.chunks(narrow) == (300, 300, 1)


@pytest.mark.parametrize("backend,kind", [(None, "LeanExecutable"), ("numba", "Executable")])
def test_default_backend_never_builds_numbas_executable(backend, kind):
    """A program with large partial reductions runs on the lean generator by default,
    without importing Numba's module writer; ``FUSEGRAD_BACKEND=numba`` still builds
    Numba's executable, with the same results."""
    code = ("import sys, numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
            "from fusegrad.runtime import compiled\n"
            "x = np.linspace(-1.0, 1.0, 600 * 500).reshape(600, 500)\n"
            "v, g = fg.value_and_grad(lambda x: fnp.sum(fnp.sum(x, axis=0) ** 2)"
            " + fnp.sum(fnp.max(x * x, axis=1)))(x)\n"
            "print(sorted({type(e).__name__ for _, e in compiled._cache.values()}),"
            " 'fusegrad.codegen.module' in sys.modules)\n"
            "print(repr(float(v)), repr(float(np.sum(g * x))))\n")
    env = dict(os.environ)
    env.pop("FUSEGRAD_BACKEND", None)
    if backend is not None:
        env["FUSEGRAD_BACKEND"] = backend
    lines = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert lines[0] == f"['{kind}'] {backend is not None}"
    x = np.linspace(-1.0, 1.0, 600 * 500).reshape(600, 500)
    want = float(np.sum(np.sum(x, axis=0) ** 2)) + float(np.sum(np.max(x * x, axis=1)))
    value, dot = (float(s) for s in lines[1].split())
    assert_close(value, want, "exact64")
    grad = 2 * np.sum(x, axis=0) * np.ones_like(x)
    grad += np.where(x * x == np.max(x * x, axis=1, keepdims=True), 2 * x, 0.0)
    assert_close(dot, float(np.sum(grad * x)), "exact64")
