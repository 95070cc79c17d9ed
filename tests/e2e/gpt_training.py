"""The training loop of ``test_gpt.py`` and ``data/record_gpt_torch.py``, written as a
PyTorch user writes it; ``torch`` is whichever library the caller passes (``import
fusegrad as torch`` in the test, PyTorch itself when recording)."""

from __future__ import annotations

from benchmarks import gpt_model

STEPS = 20


def losses(torch, steps: int = STEPS, jit: bool = False) -> list[float]:
    """The losses of ``steps`` training steps of the small GPT (fixed weights and text)."""
    model, opt = gpt_model.build(torch, seed=0)

    def step(x, y):
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        gpt_model.clip_grad_norm(torch, model.parameters(), 1.0)
        opt.step()
        return loss

    if jit:
        step = torch.jit(step)
    out = []
    for i in range(steps):
        x, y = gpt_model.batch(torch, i)
        out.append(step(x, y).item())
    return out
