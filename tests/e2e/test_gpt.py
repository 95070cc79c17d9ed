"""A small GPT trained with ``import fusegrad as torch`` gives PyTorch's losses.

Two layers, two heads, width 32, context 16, batch 8, AdamW and gradient clipping
(``benchmarks/gpt_model.py``), 20 steps from fixed weights on a fixed text; the
reference losses were recorded with PyTorch 2.13 (``data/record_gpt_torch.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fusegrad as torch
from fusegrad.cli import main
from tests.e2e import gpt_training

RECORDED = np.load(Path(__file__).with_name("data") / "gpt_losses.npy")


def test_eager_losses_match_pytorch():
    got = np.array(gpt_training.losses(torch), dtype=np.float32)
    np.testing.assert_allclose(got, RECORDED, rtol=1e-5)
    assert got[-1] < got[0] - 0.5  # it learns


@pytest.mark.compiled
def test_jit_losses_match_pytorch():
    got = np.array(gpt_training.losses(torch, jit=True), dtype=np.float32)
    np.testing.assert_allclose(got, RECORDED, rtol=1e-5)


def test_bench_gpt_quick(capsys):
    assert main(["bench", "gpt", "--quick", "--in-process", "--gpt=--no-torch"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| fusegrad")]
    assert len(rows) == 1
    step1, step2, median = (float(c) for c in rows[0][1:4])
    assert min(step1, step2, median) > 0
    assert rows[0][5].strip() == "- (14 steps)"  # no PyTorch run to compare with
