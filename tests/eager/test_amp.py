"""``fusegrad.amp`` and the CUDA switches training scripts set: what PyTorch does
without CUDA (pass-through scaler, autocast changing no dtype), and ``bfloat16`` as
a name no Tensor can hold."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import fusegrad as torch
from tests.helpers import assert_close


def test_training_loop_with_a_disabled_scaler_is_the_plain_loop():
    torch.manual_seed(0)
    a = torch.nn.Linear(3, 1)
    b = torch.nn.Linear(3, 1)
    b.load_state_dict(a.state_dict())
    oa, ob = torch.optim.AdamW(a.parameters(), lr=0.1), torch.optim.AdamW(b.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    x = torch.randn(4, 3)
    for _ in range(3):
        with torch.amp.autocast(device_type="cpu", dtype=torch.bfloat16):
            la = a(x).pow(2).mean()
        assert la.dtype == torch.float32
        scaler.scale(la).backward()
        scaler.unscale_(oa)
        scaler.step(oa)
        scaler.update()
        oa.zero_grad(set_to_none=True)
        b(x).pow(2).mean().backward()
        ob.step()
        ob.zero_grad(set_to_none=True)
    assert_close(a.weight.detach().numpy(), b.weight.detach().numpy(), "f32")
    assert scaler.get_scale() == 1.0 and not scaler.is_enabled()


def test_enabled_cuda_scaler_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = torch.amp.GradScaler("cuda")
    assert not s.is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.amp.GradScaler("cpu")


def test_switches_and_bfloat16():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    assert not (torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    torch.set_float32_matmul_precision("high")
    assert torch.get_float32_matmul_precision() == "high"
    torch.set_float32_matmul_precision("highest")
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    assert table["bfloat16"] is torch.bfloat16 and torch.bfloat16 != torch.float32
    assert torch.bfloat16.is_floating_point and repr(torch.bfloat16) == "fusegrad.bfloat16"
    assert pickle.loads(pickle.dumps(torch.bfloat16)) is torch.bfloat16
    with pytest.raises(TypeError, match="cannot hold bfloat16"):
        torch.zeros(2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="cannot hold bfloat16"):
        torch.ones(2).to(torch.bfloat16)

    @torch.autocast("cpu")
    def f(t):
        return t * 2

    assert f(torch.ones(2)).numpy().tolist() == [2.0, 2.0]
    assert np.dtype(torch.float32) == np.float32
