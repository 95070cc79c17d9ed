"""Record PyTorch's losses of ``tests/e2e/gpt_training.py`` into ``gpt_losses.npy`` (read
by ``tests/e2e/test_gpt.py``). Run from the repository root with PyTorch 2.13::

    python tests/e2e/data/record_gpt_torch.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.e2e import gpt_training

OUT = Path(__file__).with_name("gpt_losses.npy")


def main() -> None:
    torch.set_num_threads(1)
    losses = np.array(gpt_training.losses(torch), dtype=np.float32)
    np.save(OUT, losses)
    print(f"wrote {OUT}: {losses}")


if __name__ == "__main__":
    main()
