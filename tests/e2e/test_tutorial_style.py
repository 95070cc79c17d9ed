"""A tutorial-style PyTorch script runs unchanged with ``import fusegrad as torch`` and
prints PyTorch's numbers (float32, 1e-5 relative)."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import fusegrad as fg

SCRIPT = pathlib.Path(__file__).with_name("tutorial_style_script.py")
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def _run(source: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[2]))
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def fusegrad_output():
    source = SCRIPT.read_text()
    assert source.count("\nimport torch\n") == 1
    return _run(source.replace("\nimport torch\n", "\nimport fusegrad as torch\n"))


def test_runs_and_learns(fusegrad_output):
    lines = fusegrad_output.splitlines()
    assert lines[0] == "Using cpu device"
    assert [ln for ln in lines if ln.startswith("epoch")] == [
        "epoch 1 lr 0.200000", "epoch 2 lr 0.200000", "epoch 3 lr 0.100000",
        "epoch 4 lr 0.100000"]
    losses = [float(NUMBER.findall(ln)[0]) for ln in lines if ln.startswith("accuracy")]
    assert losses[-1] < losses[0]
    assert "grad_fn: AddBackward0 MeanBackward0" in lines
    assert "requires_grad under no_grad: False" in lines and "detached: False" in lines


def test_prints_pytorchs_numbers(fusegrad_output):
    pytest.importorskip("torch")
    want = _run(SCRIPT.read_text())
    got_lines, want_lines = fusegrad_output.splitlines(), want.splitlines()
    assert len(got_lines) == len(want_lines)
    for g, w in zip(got_lines, want_lines):
        assert NUMBER.sub("#", g) == NUMBER.sub("#", w)  # the same text around the numbers
        np.testing.assert_allclose([float(v) for v in NUMBER.findall(g)],
                                   [float(v) for v in NUMBER.findall(w)], rtol=1e-5, atol=2e-7,
                                   err_msg=g)


def test_compiled_training_step_with_scheduler_compiles_once():
    """The same loop with ``fg.jit`` on the step: one trace for every batch and rate."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 4)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] + x[:, 2] > 0).astype(np.int64)
    loader = fg.utils.data.DataLoader(
        fg.utils.data.TensorDataset(fg.from_numpy(x), fg.from_numpy(y)), batch_size=16,
        shuffle=True, generator=fg.Generator().manual_seed(0))
    model = fg.nn.Sequential(fg.nn.Linear(4, 16), fg.nn.ReLU(), fg.nn.Linear(16, 2))
    loss_fn = fg.nn.CrossEntropyLoss()
    opt = fg.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    sched = fg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)

    @fg.jit
    def step(xb, yb):
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    losses = []
    for _ in range(6):
        losses += [step(xb, yb).item() for xb, yb in loader]
        sched.step()
    assert len(step._eager.cache) == 1 and len(losses) == 24
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
