"""Record PyTorch's parameters after the runs in ``torch_compat.RECORDED`` into
``torch_optim.npz`` (read by ``tests/optim/test_torch_bitwise.py``, which then needs no
PyTorch). Run from the repository root with PyTorch 2.13 installed::

    python tests/optim/data/record_torch.py

PyTorch's single-tensor optimizers (``foreach=False``), one thread, with a correctly
rounded float32 ``sqrt`` (see ``torch_compat``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.optim import torch_compat as C

OUT = Path(__file__).with_name("torch_optim.npz")


def main() -> None:
    torch.set_num_threads(1)
    arrays = {"torch_version": np.array(torch.__version__)}
    with C.correct_sqrt(torch):
        for name, steps in C.RECORDED.items():
            for i, p in enumerate(C.run(torch, name, steps)):
                arrays[f"{name}/{i}"] = p
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
