"""Every runnable example (``examples/*.py`` with a ``__main__`` block) runs with
``--small``, exits 0 and reports a decreasing loss.

An example reports its loss by printing ``loss <number>`` (e.g. ``loss 0.4123`` or
``loss: 1.2e-03``) at least twice; the last reported loss must be below the first.
Files without a ``__main__`` block (such as ``examples/f.py``, a function for
``fusegrad dump``) are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.py")
    if re.search(r"^if __name__ == [\"']__main__[\"']:", p.read_text(), re.M)
)
LOSS = re.compile(r"\bloss\b\W{0,3}([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.I)


def reported_losses(text: str) -> list[float]:
    return [float(m.group(1)) for m in LOSS.finditer(text)]


def test_loss_pattern():
    out = "epoch 1  loss 0.70\nstep 2 loss: 3.0e-02\ntrain loss=1e-3, acc 0.9\nlosses 5"
    assert reported_losses(out) == [0.70, 0.03, 0.001]


def test_examples_are_found():
    names = {p.name for p in EXAMPLES}
    assert {"mlp_training.py", "pinn.py", "numba_newton.py", "scipy_fit.py"} <= names
    assert "f.py" not in names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_small_and_reduces_the_loss(path, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FUSEGRAD_CACHE_DIR": str(tmp_path / "cache"),
           "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(path), "--small"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    losses = reported_losses(proc.stdout)
    assert len(losses) >= 2, f"{path.name} reports no loss values:\n{proc.stdout}"
    assert losses[-1] < losses[0], f"{path.name}: the loss did not decrease:\n{proc.stdout}"
