"""``fusegrad eject``: a standalone module of plain Numba functions, run without fusegrad."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fusegrad as fg

pytestmark = pytest.mark.compiled
ROOT = Path(__file__).resolve().parents[2]

TARGET = '''
import fusegrad.numpy as fnp

def w1(x):
    return fnp.sum(fnp.sin(x) * fnp.exp(-0.5 * x * x) + fnp.tanh(x) * x)

def layer(x, w, b):
    h = fnp.tanh(x @ w + b)
    return (fnp.sum(fnp.log1p(h * h)) + fnp.sum(fnp.arctan(x[1:, :]) ** 2)
            + fnp.sum(b // 2.0) + fnp.sum(fnp.sqrt(fnp.abs(w)) * fnp.cos(1e8 * w)))
'''

RUNNER = '''
import sys

class Blocker:
    """No fusegrad in this process, wherever it is installed."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "fusegrad":
            raise ImportError("blocked: " + name)

sys.meta_path.insert(0, Blocker())
sys.path.insert(0, ".")  # -I leaves the script's directory out
import numpy as np
import ejected

try:
    import fusegrad  # noqa: F401
    sys.exit("fusegrad was importable")
except ImportError:
    pass
inputs = np.load("inputs.npz")
args = [inputs[k] for k in sorted(inputs.files)]
out = {"forward": np.asarray(ejected.forward(*args))}
grads = ejected.gradient(*args)
grads = grads if isinstance(grads, tuple) else (grads,)
out.update({f"grad{i}": g for i, g in enumerate(grads)})
np.savez("outputs.npz", **out)
print("modules:", sorted(m for m in sys.modules if m.startswith("fusegrad")))
'''


def _eject(tmp_path, func, types):
    (tmp_path / "target.py").write_text(TARGET)
    out = tmp_path / "ejected.py"
    cmd = [sys.executable, "-m", "fusegrad.cli", "eject", f"{tmp_path / 'target.py'}:{func}",
           *(a for t in types for a in ("--arg", t)), "--grad", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    imports = [ln for ln in text.splitlines() if ln.startswith(("import ", "from "))]
    allowed = ("numba", "numpy", "llvmlite", "contextlib", "ctypes", "glob", "hashlib",
               "importlib", "os", "tempfile")
    assert imports and all(ln.split()[1].split(".")[0] in allowed for ln in imports), imports
    assert "fusegrad" not in "\n".join(imports)
    return text


def _run_without_fusegrad(tmp_path, inputs):
    np.savez(tmp_path / "inputs.npz", **{f"a{i}": a for i, a in enumerate(inputs)})
    (tmp_path / "runner.py").write_text(textwrap.dedent(RUNNER))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSEGRAD_CACHE_DIR")}
    proc = subprocess.run([sys.executable, "-I", "runner.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "modules: []" in proc.stdout
    return dict(np.load(tmp_path / "outputs.npz"))


@pytest.mark.slow  # the matrix test below checks all of this (two cold Numba compiles each)
def test_ejected_w1_gradient_equals_fusegrad_at_another_size(tmp_path):
    _eject(tmp_path, "w1", ["f64[100]"])
    x = np.linspace(-4, 4, 2049)
    got = _run_without_fusegrad(tmp_path, [x])
    ns: dict = {}
    exec(compile(TARGET, "target", "exec"), ns)
    np.testing.assert_allclose(got["forward"], fg.jit(ns["w1"])(x), rtol=1e-12)
    np.testing.assert_allclose(got["grad0"], fg.grad(ns["w1"])(x), rtol=1e-12, atol=1e-300)


def test_ejected_matrix_function_with_overloads_and_rare_trig_inputs(tmp_path):
    _eject(tmp_path, "layer", ["f64[5,3]", "f64[3,4]", "f64[4]"])
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in ((8, 2), (2, 6), (6,))]
    got = _run_without_fusegrad(tmp_path, args)
    ns: dict = {}
    exec(compile(TARGET, "target", "exec"), ns)
    np.testing.assert_allclose(got["forward"], fg.jit(ns["layer"])(*args), rtol=1e-12)
    want = fg.grad(ns["layer"], argnums=(0, 1, 2))(*args)
    for i in range(3):
        np.testing.assert_allclose(got[f"grad{i}"], want[i], rtol=1e-12, atol=1e-15)


def test_eject_usage_errors(tmp_path):
    (tmp_path / "target.py").write_text(TARGET)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "fusegrad.cli", "eject",
                           f"{tmp_path / 'target.py'}:nope", "--arg", "f64[3]", "-o",
                           str(tmp_path / "o.py")], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no function named 'nope'" in proc.stderr
    assert not (tmp_path / "o.py").exists()
