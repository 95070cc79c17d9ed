"""fusegrad's optimizers give the same float32 bits as PyTorch's single-tensor ones.

With PyTorch installed, every setting in ``torch_compat.CONFIGS`` runs 50 steps in both
libraries; without it, the runs in ``torch_compat.RECORDED`` (2,000 RMSprop steps,
200 of SGD, Adam, AdamW, Adagrad) are checked against values PyTorch 2.13 recorded
(``data/record_torch.py``). Both compare with a correctly rounded PyTorch ``sqrt``
(``torch_compat.correct_sqrt`` says why).
"""

from __future__ import annotations

import fractions
from pathlib import Path

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.optim._fused import fma32
from tests.optim import torch_compat as C

DATA = Path(__file__).with_name("data") / "torch_optim.npz"


def _bits_equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype == np.float32
        differ = int(np.sum(a.view(np.int32) != b.view(np.int32)))
        assert differ == 0, (f"parameter {i}: {differ} of {a.size} values differ, largest "
                             f"by {np.max(np.abs(a - b)):.3g}")


@pytest.mark.parametrize("config", sorted(C.CONFIGS))
def test_50_steps_match_torch(config):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    with C.correct_sqrt(torch):
        want = C.run(torch, config, 50)
    _bits_equal(C.run(fg, config, 50), want)


@pytest.mark.parametrize("config", sorted(C.RECORDED))
def test_recorded_torch_runs(config):
    data = np.load(DATA)
    want = [data[f"{config}/{i}"] for i in range(len(C.SHAPES))]
    _bits_equal(C.run(fg, config, C.RECORDED[config]), want)


def test_sqrt_is_correctly_rounded():
    """fusegrad's float32 sqrt, and the patched PyTorch one the references use."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    x = np.linspace(0.1, 3.0, 100_000, dtype=np.float32)
    exact = np.sqrt(x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(fg.tensor(x).sqrt().numpy(), exact)
    with C.correct_sqrt(torch):
        assert np.array_equal(torch.tensor(x).sqrt().numpy(), exact)


def _nearest(r: np.float32, exact: fractions.Fraction) -> bool:
    """``r`` is ``exact`` rounded to float32, ties to even."""
    err = abs(fractions.Fraction(float(r)) - exact)
    for side in (np.float32(np.inf), np.float32(-np.inf)):
        n = np.nextafter(r, side)
        other = abs(fractions.Fraction(float(n)) - exact)
        if other < err or (other == err and int(n.view(np.int32)) % 2 == 0):
            return False
    return True


def test_fma32_rounds_once():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(3000).astype(np.float32) * s for s in (1, 1e-3, 1))
    # a * b lands just below half an ulp of c: float64 rounds the sum to the midpoint
    # and float32 would round it again, to the even neighbour (1 + 2**-22, not c)
    one = np.float32(1 + 2.0**-23)
    a = np.append(a, np.float32(1 + 2.0**-23))
    b = np.append(b, np.float32(2.0**-24 * (1 - 2.0**-23)))
    c = np.append(c, one)
    r = fma32(a, b, c)
    assert r[-1] == one
    for x, y, z, got in zip(a, b, c, r):
        exact = fractions.Fraction(float(x)) * fractions.Fraction(float(y)) + \
            fractions.Fraction(float(z))
        assert _nearest(got, exact), (x, y, z, got)


@pytest.mark.compiled
@pytest.mark.parametrize("config", [
    "adamw", "rmsprop-centered-momentum",
    # 15-20 s of compiling each
    pytest.param("sgd-nesterov-max", marks=pytest.mark.slow),
    pytest.param("adagrad-decay-init", marks=pytest.mark.slow)])
def test_jit_step_keeps_the_bits(config):
    """The optimizer step compiled by ``fg.jit`` (gradients from ``backward``) gives the
    bits of the eager step."""
    steps = 12
    cls_name, kwargs = C.CONFIGS[config]
    params = [fg.tensor(a, requires_grad=True) for a in C.initial_params()]
    opt = getattr(fg.optim, cls_name)(params, **kwargs)

    @fg.jit
    def step(*grads):
        opt.zero_grad()
        sum((p * g).sum() for p, g in zip(params, grads)).backward()
        opt.step()

    for grads in C.gradients(steps):
        step(*[fg.tensor(g) for g in grads])
    _bits_equal([p.detach().numpy() for p in params], C.run(fg, config, steps))
