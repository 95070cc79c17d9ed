"""The lean code generator (codegen/lean): compiled results equal the interpreter's, kernels
are shared by content, the math library is inlined and vectorised, and its cache heals."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen.lean import engine, mathcalls, mathlib_ir
from fusegrad.runtime import compiled
from fusegrad.runtime.interpreter import run
from fusegrad.runtime.lean_exec import LeanExecutable
from fusegrad.scipy.linalg import sqrtm
from tests.helpers import assert_close, damage, interpreted, on_one_and_all_threads

pytestmark = pytest.mark.compiled


def rosen(x):
    return fnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def helical(x):
    theta = fnp.arctan2(x[1], x[0]) / (2 * np.pi)
    return 100 * ((x[2] - 10 * theta) ** 2 + (fnp.sqrt(x[0] ** 2 + x[1] ** 2) - 1) ** 2) + x[2] ** 2


def mixed(x):
    return fnp.sum(fnp.tanh(x) * fnp.exp(-x ** 2) + fnp.log1p(x * x)) + fnp.max(fnp.sin(x))


def rows(x):
    m = x.reshape(3, 4)
    return fnp.sum(fnp.sum(m * m[0], axis=0) ** 2) + fnp.mean(m.T[1:] ** 3)


def clipped(x):
    y = fnp.where(x > 0.5, x, 0.5 * x) + fnp.minimum(x, 0.2) - fnp.abs(x) * fnp.sign(x)
    return fnp.sum(fnp.concatenate([y, x[::-2]]) ** 2) + fnp.sum(fnp.cosh(x) / (1 + x * x))


def mlp(x):
    w = x[:12].reshape(3, 4)
    h = fnp.tanh(w.T @ fnp.cos(w)) @ w.T
    return fnp.mean((h - 0.5) ** 2) + fnp.sum(w @ w.T)


CASES = [
    (mlp, np.linspace(-1.0, 1.0, 12)),
    (mlp, np.linspace(-1.0, 1.0, 12).astype(np.float32)),
    (rosen, np.array([1.0, 2.0, 3.0, 0.5])),
    (helical, np.array([1.0, 0.3, 0.7])),
    (mixed, np.linspace(-1.0, 2.0, 7)),
    (rows, np.linspace(-1.0, 2.0, 12)),
    (clipped, np.linspace(-1.0, 1.5, 9)),
    (mixed, np.linspace(-1.0, 2.0, 7).astype(np.float32)),
]


def _lean_executable(f, x):
    """The executable ``fg.value_and_grad(f)(x)`` ran on, and its results."""
    seen = []
    real = compiled._build

    def spy(fn, reason):
        exe = real(fn, reason)
        seen.append(exe)
        return exe

    compiled._build = spy
    try:
        out = fg.value_and_grad(f)(x)
    finally:
        compiled._build = real
    return seen, out


@pytest.mark.parametrize("f,x", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_lean_equals_interpreter(f, x):
    seen, (_, grad) = _lean_executable(f, x)
    assert seen and all(isinstance(e, LeanExecutable) for e in seen)
    exe = seen[0]
    args = [x, np.asarray(1.0, dtype=x.dtype)]
    ref = run(exe.fn, *args)
    got = exe(*args)
    kind = "f32" if x.dtype == np.float32 else "exact64"
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        assert_close(g, r, kind)
    assert_close(grad, ref[1], kind)


def test_rare_trig_inputs_take_the_exact_path():
    x = np.array([0.5, 3.0e8, -1.0e9, 2.0])
    got = fg.grad(lambda v: fnp.sum(fnp.sin(v) * fnp.cos(v)))(x)
    assert_close(got, np.cos(2 * x), "exact64")


def test_kernels_are_shared_by_content():
    """A second function with the same loop compiles only its own entry."""
    x = np.linspace(0.1, 0.9, 11)
    fg.grad(lambda v: fnp.sum(fnp.exp(v) * v ** 3 + 0.25 * v))(x)
    before = engine.stats()
    fg.grad(lambda w: fnp.sum(fnp.exp(w) * w ** 3 + 0.25 * w))(x)
    after = engine.stats()
    assert after["reused"] > before["reused"]
    assert after["compiled"] - before["compiled"] <= 1  # the entry alone, if anything


def test_math_library_loops_vectorise():
    """The math library is inlined into the kernel and the loop runs on vector registers."""
    from fusegrad.codegen.lean.kernel import PLACEHOLDER, build
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify

    fn = fg.make_ir(lambda v: fnp.exp(v) * fnp.log1p(v * v))(np.ones(4096))
    op = next(o for o in fuse(simplify(fn)).ops if o.name == "fused")
    text = mathcalls.prepare(build(op)[0])
    asm = engine.assembly(text.replace(PLACEHOLDER, "k_test"), mathlib_ir.link_into)
    assert "call" not in asm.split("k_test:")[1].split(".Lfunc_end")[0]
    assert any(f"{op}pd" in asm for op in ("vmul", "vfmadd", "vadd"))


def test_rare_inputs_path_calls_the_library_out_of_line():
    """A kernel with sin/cos runs a vector loop of the fast variants and, only if it met
    rare inputs, the loop again with the exact variants: those are called, not inlined,
    so the kernel's code holds the library once rather than once per call."""
    import re

    from fusegrad.codegen.lean.kernel import PLACEHOLDER, build
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify

    fn = fg.make_ir(lambda v: fnp.sin(v) * fnp.cos(v) + fnp.sin(2.0 * v))(np.ones(4096))
    op = next(o for o in fuse(simplify(fn)).ops if o.name == "fused")
    text = mathcalls.prepare(build(op)[0])
    mod = engine._llvm().parse_assembly(text.replace(PLACEHOLDER, "k_test"))
    mathlib_ir.link_into(mod)
    engine._optimise(mod, 2)
    kernel = str(mod.get_function("k_test"))
    calls = re.findall(r"call [^@]*@\"?(cfunc\.[^\"(]+)", kernel)
    assert len(calls) == 3  # sin, cos, sin: the exact variants, on the rare path
    assert "<4 x double>" in kernel or "<8 x double>" in kernel  # the fast loop's vectors


def test_damaged_object_file_is_recompiled(tmp_path):
    code = (
        "import warnings, numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    g = fg.grad(lambda x: fnp.sum((x[1:] - x[:-1] ** 2) ** 2))(np.arange(4.0))\n"
        "print(list(g), [str(m.message)[:40] for m in w])\n")
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout
    objects = list((tmp_path / "lean").glob("*.o"))
    assert objects
    for path in objects:
        damage(path)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert first.split("]")[0] == second.split("]")[0]
    assert "damaged" in second


def test_compiled_calls_run_the_lean_generators_code():
    code = ("import sys, numpy as np, fusegrad as fg, fusegrad.numpy as fnp\n"
            "from fusegrad.runtime import compiled\n"
            "fg.grad(lambda x: fnp.sum(x * x))(np.ones(3))\n"
            "print(sorted({type(e).__name__ for _, e in compiled._cache.values()}),"
            " 'numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['LeanExecutable'] False"


def test_unlowered_ops_run_between_compiled_segments():
    """An op the generator does not lower runs with NumPy between compiled segments,
    and the gradient equals the interpreter's."""
    def f(w):  # (sqrtm has no native lowering)
        return fnp.sum(sqrtm(fnp.sin(w @ w) + 3.0 * np.eye(3)) ** 2 * (w @ w.T))

    w = np.linspace(0.9, 0.1, 9).reshape(3, 3)
    seen, (_, grad) = _lean_executable(f, w)
    exe = seen[0]
    assert isinstance(exe, LeanExecutable)
    hosts = [p for p in exe.parts if not hasattr(p, "code")]
    assert hosts and len(exe.parts) > len(hosts)
    assert any(p.name == "sqrtm" for p in hosts)
    assert "between segments, with NumPy" in exe.source
    want = interpreted(fg.grad(f), w)
    assert_close(grad, want, "exact64")


def test_control_flow_regions_run_compiled():
    """``while_loop`` and its gradient run inside the compiled program (no region is
    compiled on its own: codegen/lean/control.py), and the gradient equals the
    interpreter's."""
    def f(x):
        c = fg.while_loop(lambda c: fnp.sum(c) < 50.0, lambda c: c * 1.5 + fnp.sin(c), x)
        return fnp.sum(c ** 2)

    x = np.linspace(0.1, 1.0, 5)
    seen, (_, grad) = _lean_executable(f, x)
    assert len(seen) == 1 and seen[0].steps == [seen[0].fused]
    assert "while_grad" in [op.name for op in seen[0].fused.ops]
    want = interpreted(fg.grad(f), x)
    assert_close(grad, want, "exact64")


def test_dump_shows_annotated_llvm_ir(capsys):
    def f(x):
        return fnp.sum(fnp.exp(x) * x)

    fg.dump(f, np.ones(3), stage="source", grad=True)
    text = capsys.readouterr().out
    # (a kernel of a few elements is a small one, ``s_``)
    assert "define i8* @\"e_" in text and re.search(r'define external void @"[ks]_', text)
    assert "; %" in text and "= exp %" in text and "test_lean.py:" in text


def test_threads_share_a_function():
    """Threads calling one compiled function at once each get their own arena."""
    from concurrent.futures import ThreadPoolExecutor

    g = fg.grad(lambda v: fnp.sum(fnp.exp(-v * v) * v ** 3))
    xs = [np.linspace(-1.0, 1.0, 40_000) * (1 + k / 10) for k in range(8)]
    expected = [g(x) for x in xs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(g, xs * 3))
    for k, r in enumerate(got):
        np.testing.assert_array_equal(r, expected[k % len(xs)])


def test_fork_child_computes():
    """A child forked after compiled calls compiles and calls on its own."""
    import multiprocessing

    g = fg.grad(lambda v: fnp.sum(fnp.sin(v) * v))
    x = np.linspace(0.0, 1.0, 9)
    g(x)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply(_child_grad, (x,))
    assert_close(got, np.sin(x) + x * np.cos(x), "exact64")


def _child_grad(x):
    return fg.grad(lambda v: fnp.sum(fnp.sin(v) * v + 0.0 * v ** 2))(x)


def test_large_loops_run_in_chunks_with_the_same_bits_on_any_thread_count(monkeypatch):
    """Kernels of at least ``PARALLEL_THRESHOLD`` iterations run in fixed chunks on the
    threading layer; partial sums are reduced in chunk order, so one thread and two give
    the same bits, close to the interpreter's."""
    pytest.importorskip("numba")
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)

    def f(x):
        return fnp.sum(fnp.sin(x) * fnp.exp(-x * x)) + fnp.max(x ** 3) + fnp.mean(x * x)

    x = np.linspace(-1.0, 1.3, 5001)
    seen, (value, grad) = _lean_executable(f, x)
    exe = seen[0]
    assert isinstance(exe, LeanExecutable)
    assert "_chunks" in exe.source
    g = fg.value_and_grad(f)
    one, two = on_one_and_all_threads(g, x)
    assert one[0] == two[0] and np.array_equal(one[1], two[1])
    want = interpreted(fg.value_and_grad(f), x)
    assert_close(value, want[0], "exact64")
    assert_close(grad, want[1], "exact64")
