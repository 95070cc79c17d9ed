"""PyTorch's autograd tutorials, rewritten as scripts in ``tests/e2e/tutorials``, run
unchanged with ``import fusegrad as torch`` and print PyTorch's numbers.

Each script is run three ways: as written with real PyTorch (when installed; all
scripts in one process, each from a new process's state), with
its ``import torch`` / ``from torch import`` lines pointed at fusegrad, and (for
the training scripts) with every ``step = NAME  # jit-step`` line turned into
``step = fg.jit(NAME)``, so the training step runs compiled. The printed text must
agree exactly apart from the numbers, which must agree to 1e-5 relative.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).with_name("tutorials")
SCRIPTS = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")
JIT_LINE = re.compile(r"^(\s*)(\w+) = (\w+)  # jit-step$", re.M)


def _run(source: str, tmp_path, *argv) -> tuple[str, str]:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[2]))
    out = subprocess.run([sys.executable, "-c", source, *map(str, argv)], capture_output=True,
                         text=True, env=env, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout, out.stderr


def as_fusegrad(source: str) -> str:
    assert source.count("\nimport torch\n") == 1
    source = source.replace("\nimport torch\n", "\nimport fusegrad as torch\n")
    return re.sub(r"^from torch(\.\w+)* import",
                  lambda m: m.group(0).replace("torch", "fusegrad", 1), source, flags=re.M)


def with_jit_steps(source: str) -> str:
    source = JIT_LINE.sub(r"\1\2 = _fg_jit(\3)", source)
    head = ("import fusegrad as _fg\n_fg_jitted = []\n"
            "def _fg_jit(f):\n    j = _fg.jit(f)\n    _fg_jitted.append(j)\n    return j\n")
    tail = ("\nimport sys as _sys\n"
            "print('jit caches', [len(j._eager.cache) for j in _fg_jitted], file=_sys.stderr)\n")
    return head + source + tail


def compare(got: str, want: str) -> None:
    got_lines, want_lines = got.splitlines(), want.splitlines()
    assert len(got_lines) == len(want_lines), (got, want)
    for g, w in zip(got_lines, want_lines):
        assert NUMBER.sub("#", g) == NUMBER.sub("#", w), (g, w)  # the same text around numbers
        np.testing.assert_allclose([float(v) for v in NUMBER.findall(g)],
                                   [float(v) for v in NUMBER.findall(w)], rtol=1e-5, atol=1e-7,
                                   err_msg=g)


#: Runs every script with real PyTorch in one process (importing torch takes seconds),
#: each in a fresh namespace from the state a new process starts in (torch's initial
#: seed, float32 default, gradients on), and prints {name: stdout} as JSON.
TORCH_ALL = """
import contextlib, io, json, pathlib, sys
import torch

seed = torch.initial_seed()
printed = {}
for path in map(pathlib.Path, sys.argv[1:]):
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(path.read_text(), str(path), "exec"), {"__name__": "__main__"})
    printed[path.stem] = out.getvalue()
print(json.dumps(printed))
"""

_OUTPUTS: dict = {}


def _output(kind: str, name: str, tmp_path) -> str:
    """What script ``name`` prints with real PyTorch (``kind="torch"``) or fusegrad."""
    if kind == "torch" and (kind, name) not in _OUTPUTS:
        stdout = _run(TORCH_ALL, tmp_path, *(HERE / f"{n}.py" for n in SCRIPTS))[0]
        printed = json.loads(stdout.splitlines()[-1])
        _OUTPUTS.update({("torch", n): text for n, text in printed.items()})
    if (kind, name) not in _OUTPUTS:
        _OUTPUTS[kind, name] = _run(as_fusegrad((HERE / f"{name}.py").read_text()), tmp_path)[0]
    return _OUTPUTS[kind, name]


def _reference(name, tmp_path) -> str:
    """PyTorch's output when it is installed; else fusegrad's eager output."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return _output("fusegrad", name, tmp_path)
    return _output("torch", name, tmp_path)


@pytest.mark.parametrize("name", SCRIPTS)
def test_eager_prints_pytorchs_numbers(name, tmp_path):
    got = _output("fusegrad", name, tmp_path)  # runs (and must succeed) without torch too
    pytest.importorskip("torch")
    compare(got, _output("torch", name, tmp_path))


JIT_SCRIPTS = [n for n in SCRIPTS if JIT_LINE.search((HERE / f"{n}.py").read_text())]


@pytest.mark.parametrize("name", JIT_SCRIPTS)
def test_compiled_steps_print_pytorchs_numbers(name, tmp_path):
    got, err = _run(with_jit_steps(as_fusegrad((HERE / f"{name}.py").read_text())), tmp_path)
    caches = eval(re.search(r"jit caches (\[.*\])", err).group(1))
    # each step compiles once, or twice where its first call starts without gradients
    assert caches and all(1 <= n <= 2 for n in caches), caches
    compare(got, _reference(name, tmp_path))


def test_scripts_run_without_torch(tmp_path):
    """The fusegrad runs need nothing from PyTorch (CI has no torch)."""
    source = as_fusegrad((HERE / "autogradqs.py").read_text())
    guard = "import sys\nsys.modules['torch'] = None\n"
    out = _run(guard + source, tmp_path)[0]
    assert "Gradient function for z = AddBackward0" in out
