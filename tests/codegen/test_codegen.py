"""Fusion and code generation: golden structure, shape reuse, float32, parallel bits,
compile logs, error paths and the on-disk cache."""

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import module as codegen_module
from fusegrad.ir import TensorType
from fusegrad.runtime import compiled
from fusegrad.runtime.compiled import CodegenError, executable
from fusegrad.runtime.interpreter import run
from fusegrad.transforms.inspection import stages

pytestmark = [pytest.mark.compiled, pytest.mark.numba_codegen]


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def _grad_ir(f, *types):
    return stages(f, *types)[1][2]


def test_w1_gradient_is_one_loop_reading_x_once():
    fused = stages(w1, TensorType((1000,), "f64"))[3][2]
    assert [op.name for op in fused.ops] == ["fused"]
    (kernel,) = fused.ops
    assert [str(t) for t in kernel.regions[0].in_types] == ["f64[1000]", "f64[]"]
    assert [str(t) for t in kernel.regions[0].out_types] == ["f64[]", "f64[1000]"]
    source = stages(w1, TensorType((1000,), "f64"))[4][2]
    entry = source.split("def entry(")[1].split("def entry_parallel(")[0]
    # entry_exact, used only for huge trig arguments, is the same with exact functions
    assert "def entry_exact(" in source and "ml.sincos_full_f64" in source
    assert entry.count("for k0_j in range(") == 1  # one pass over the elements
    assert entry.count("a_x[k0_i]") == 1  # x read once per element
    assert entry.count("k0_out0[k0_i] =") == 1  # the gradient written once


def test_new_shape_of_same_rank_reuses_the_module():
    a = executable(_grad_ir(w1, TensorType((1000,), "f64")))
    b = executable(_grad_ir(w1, TensorType((77,), "f64")))
    assert a.source == b.source and a.module is b.module
    c = executable(_grad_ir(w1, TensorType((3, 4), "f64")))
    assert c.source != a.source


def test_compiled_gradient_matches_interpreter_and_closed_form():
    x = np.linspace(-3, 3, 2001)
    g = fg.grad(w1)(x)
    want = (np.cos(x) * np.exp(-0.5 * x * x) - x * np.sin(x) * np.exp(-0.5 * x * x)
            + (1 - np.tanh(x) ** 2) * x + np.tanh(x))
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-13)


def test_float32_stays_float32_without_double_math():
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    g = fg.grad(w1)(x)
    assert g.dtype == np.float32
    exe = executable(_grad_ir(w1, TensorType((64,), "f32")))
    exe(x, np.float32(1))
    (llvm,) = exe.entry.inspect_llvm().values()
    doubles, inside = [], False
    for ln in llvm.splitlines():
        if ln.startswith("define"):
            # the compiled function itself, not the CPython wrapper that boxes arguments
            inside = "cpython" not in ln and "cfunc" not in ln
        elif inside and "double" in ln:
            doubles.append(ln)
    assert not doubles, doubles[:5]


def test_trig_rare_inputs_are_fixed_up():
    x = np.array([0.5, 1e9, -3e15, 2.0, 1e300])
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x)))(x)
    np.testing.assert_array_equal(g, np.cos(x))


def test_gather_out_of_bounds_raises_the_interpreters_error():
    idx = np.array([0, 5])
    f = fg.jit(lambda x, i: fnp.take(x, i))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3"):
        f(np.ones(3), idx)


def test_parallel_loops_give_the_same_bits_on_one_and_two_threads(monkeypatch):
    import numba

    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)
    x = np.random.default_rng(0).normal(size=50_000)
    exe = executable(_grad_ir(w1, TensorType(x.shape, "f64")))
    if exe.parallel is None:
        pytest.skip("no thread-safe threading layer on this machine")
    slots = exe.pool.slots(exe.pool.take(), [x, 1.0]) if exe.pool else []  # buffer slots
    serial = exe.module.entry(exe.dims, x, 1.0, *slots)[:-1]
    out = []
    for n in (1, 2):
        numba.set_num_threads(n)
        out.append(exe.module.entry_parallel(exe.dims, x, 1.0, *slots)[:-1])
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    for a, b, c in zip(*out, serial):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_crossing_the_parallel_threshold_never_waits_for_a_compile(monkeypatch, capsys):
    """The parallel entry compiles in another process while the serial one serves calls;
    once it is ready, calls use it, with the same bits."""
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1000)
    monkeypatch.setattr(config, "LOG_COMPILES", True)
    x = np.random.default_rng(1).normal(size=30_000)
    exe = executable(_grad_ir(lambda v: fnp.sum(fnp.cos(v) * fnp.exp(-0.25 * v * v)),
                              TensorType(x.shape, "f64")))
    if exe.parallel is None:
        pytest.skip("no thread-safe threading layer on this machine")
    first = exe(x, 1.0)
    assert exe.parallel.started
    assert not exe.module.entry_parallel.signatures  # the call ran the serial entry
    assert _wait(exe.parallel)
    again = exe(x, 1.0)
    assert exe.module.entry_parallel.signatures
    for a, b in zip(first, again):
        assert np.array_equal(a, b)
    assert "entry_parallel (loops of at least" in capsys.readouterr().err


def _wait(background, seconds=300):
    deadline = time.monotonic() + seconds
    while not background.done and time.monotonic() < deadline:
        time.sleep(0.05)
    return background.done


def test_background_compile_mode_answers_with_the_interpreter_until_ready(monkeypatch):
    monkeypatch.setattr(config, "COMPILE", "background")
    x = np.linspace(-2.0, 2.0, 300)
    fn = _grad_ir(lambda v: fnp.sum(fnp.tanh(v) * fnp.exp(-0.3 * v)), TensorType(x.shape, "f64"))
    exe = executable(fn)
    first = exe(x, 1.0)
    assert exe.tier.started and not exe.module.entry.signatures  # nothing compiled here
    for a, b in zip(first, run(fn, x, 1.0)):
        assert np.array_equal(a, b)  # the interpreter's own bits
    assert _wait(exe.tier)
    compiled_out = exe(x, 1.0)
    assert exe.module.entry.signatures
    for a, b in zip(compiled_out, first):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_log_compiles_says_why(monkeypatch, capsys):
    monkeypatch.setattr(config, "LOG_COMPILES", True)
    g = fg.grad(lambda x: fnp.sum(fnp.cos(x) * x))
    g(np.ones(3))
    g(np.ones(5))
    g(np.ones(5, np.float32))
    err = capsys.readouterr().err
    assert "(new function;" in err and "(new shape;" in err and "(new dtype;" in err
    first = next(line for line in err.splitlines() if "(new function;" in line)
    for part in ("serial entry", "trace ", "passes ", "codegen "):
        assert part in first
    assert "Numba/LLVM " in first or "cache load " in first
    assert "machine code reused" in next(line for line in err.splitlines() if "new shape" in line)


def test_internal_failure_dumps_a_reproducer(monkeypatch):
    def broken(fn, buffers=None):
        raise RuntimeError("boom")

    fn = _grad_ir(lambda x: fnp.sum(x * 3.0), TensorType((2,), "f64"))
    monkeypatch.setattr(codegen_module, "generate", broken)  # imported by the first compile
    with pytest.raises(CodegenError) as info:
        executable(fn)
    msg = str(info.value)
    assert "FUSEGRAD_DISABLE_JIT=1" in msg and "boom" in msg
    path = msg.split("The IR that failed is in ")[1].split(". ")[0]
    with open(path) as f:
        assert f.read().startswith("func @")


SCRIPT = textwrap.dedent("""
    import warnings, numpy as np, fusegrad as fg, fusegrad.numpy as fnp
    warnings.simplefilter("always")
    g = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))(np.linspace(0, 1, 101))
    x = np.linspace(0, 1, 101)
    assert np.allclose(g, np.sin(x) + x * np.cos(x), rtol=1e-12), g
    print("OK")
""")


#: The checkout under test: children import this one, not whichever fusegrad is installed.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env(cache_dir) -> dict:
    return dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)


def _run(cache_dir):
    env = _env(cache_dir)
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)


def test_cache_survives_corruption_and_unwritable_directories(tmp_path):
    first = _run(tmp_path)
    assert first.stdout.strip() == "OK", first.stderr
    files = [p for p in (tmp_path / "__pycache__").iterdir()]
    assert files, "machine code was not cached"
    for p in files:  # truncate every cached file
        p.write_bytes(p.read_bytes()[:7])
    second = _run(tmp_path)
    assert second.stdout.strip() == "OK", second.stderr
    assert second.stderr.count("RuntimeWarning") <= 1
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    third = _run(blocked / "cache")
    assert third.stdout.strip() == "OK", third.stderr
    assert third.stderr.count("is not writable") == 1


@pytest.mark.slow  # test_cache_faults.py's spawned processes race the same way, behind a barrier
def test_two_processes_compile_the_same_function_at_once(tmp_path):
    env = _env(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert out.strip() == "OK", err


def test_import_loads_neither_numba_nor_the_code_generator():
    """``import fusegrad`` stays cheap: Numba (and the math library, which needs it) load
    with the first compile."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import fusegrad as fg, fusegrad.numpy as fnp
        fg.make_ir(lambda x: fnp.sum(fnp.sin(x)))(np.ones(3))
        fg.tensor([1.0, 2.0], requires_grad=True).sum().backward()
        assert "numba" not in sys.modules, "numba imported"
        assert "fusegrad.codegen.mathlib" not in sys.modules
        fg.jit(lambda x: x * 2.0)(np.ones(3))
        assert "numba" in sys.modules
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "FUSEGRAD_DISABLE_JIT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_optimisation_level_is_part_of_the_module_and_its_key(monkeypatch):
    fn = _grad_ir(lambda v: fnp.sum(fnp.exp(v) * v), TensorType((50,), "f64"))
    x = np.linspace(-1.0, 1.0, 50)
    outs = {}
    for level in (1, 3):
        monkeypatch.setattr(config, "OPT", level)
        exe = executable(fn)
        assert f"optimisation level {level} (FUSEGRAD_OPT)" in exe.source
        outs[level] = exe(x, 1.0)
        compiled._cache.clear()
    for a, b in zip(outs[1], outs[3]):
        assert np.array_equal(a, b)  # no fast-math: the same bits at any level
