"""Fusion and code generation: one kernel for W1's gradient, float32, compile logs, error
paths and the on-disk cache."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.codegen import lean
from fusegrad.codegen.lean import engine
from fusegrad.ir import TensorType
from fusegrad.runtime import compiled
from fusegrad.runtime.compiled import CodegenError, executable
from fusegrad.transforms.inspection import stages

pytestmark = pytest.mark.compiled


def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)


def _grad_ir(f, *types):
    return stages(f, *types)[1][2]


def test_w1_gradient_is_one_kernel():
    exe = executable(_grad_ir(w1, TensorType((1000,), "f64")))
    assert exe.kernels()[0] == 1  # forward and backward fused into one loop
    assert len(exe.parts) == 1


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
    np.testing.assert_array_equal(exe(x, np.float32(1))[-1], g)
    doubles = [ln for ln in exe.source.splitlines() if "double" in ln]
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


def test_log_compiles_says_why(monkeypatch, capsys):
    monkeypatch.setattr(config, "LOG_COMPILES", True)
    g = fg.grad(lambda x: fnp.sum(fnp.cos(x) * x))
    g(np.ones(3))
    g(np.ones(5))
    g(np.ones(5, np.float32))
    err = capsys.readouterr().err
    assert "(new function;" in err and "(new shape;" in err and "(new dtype;" in err
    first = next(line for line in err.splitlines() if "(new function;" in line)
    for part in ("lean code generator, 1 kernels", "trace ", "passes ", "cache load "):
        assert part in first
    assert "LLVM optimisation " in first or "0 compiled" in first


def test_log_compiles_names_an_eager_steps_new_shape(monkeypatch, capsys):
    # fg.jit over eager Tensors keys its calls by ("T", shape, dtype, requires_grad)
    monkeypatch.setattr(config, "LOG_COMPILES", True)
    w = fg.tensor(np.ones(3), requires_grad=True)
    step = fg.jit(lambda x: (w * x).sum())
    for x in (np.ones(3), np.ones((2, 3)), np.ones((2, 3), np.float32)):
        step(fg.tensor(x))
        step(fg.tensor(x))
    reasons = [line.split("(")[1].split(";")[0] for line in capsys.readouterr().err.splitlines()
               if line.startswith("fusegrad: compiled")]
    assert reasons[-2:] == ["new shape", "new dtype"]


def test_internal_failure_dumps_a_reproducer(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    fn = _grad_ir(lambda x: fnp.sum(x * 3.0), TensorType((2,), "f64"))
    monkeypatch.setattr(lean, "compile_function", broken)
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
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".o" for p in files), "machine code was not cached"
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
    """``import fusegrad`` stays cheap: the code generator loads with the first compile,
    and a compiled call of a small function needs no Numba at all."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import fusegrad as fg, fusegrad.numpy as fnp
        fg.make_ir(lambda x: fnp.sum(fnp.sin(x)))(np.ones(3))
        fg.tensor([1.0, 2.0], requires_grad=True).sum().backward()
        assert "numba" not in sys.modules, "numba imported"
        assert "fusegrad.codegen.mathlib" not in sys.modules
        fg.jit(lambda x: x * 2.0)(np.ones(3))
        assert "fusegrad.codegen.lean" in sys.modules
        assert "numba" not in sys.modules, "numba imported by a compiled call"
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
    outs, names = {}, {}
    for level in (1, 3):
        monkeypatch.setattr(config, "OPT", level)
        names[level] = engine.module_name("same text")
        outs[level] = executable(fn)(x, 1.0)
        compiled._cache.clear()
    assert names[1] != names[3]  # machine code of one level is never loaded for another
    for a, b in zip(outs[1], outs[3]):  # no fast-math: a sum's order may differ, no more
        np.testing.assert_allclose(a, b, rtol=1e-14)
