"""A small GPT training program in the style of the widely copied ones: causal
self-attention (a ``tril`` mask with ``masked_fill`` + ``softmax(dim=-1)``, or
``scaled_dot_product_attention(is_causal=True)``), weight tying, AdamW with
decay/no-decay groups, gradient clipping, a ``DataParallel`` wrapper, then
top-k sampling with ``multinomial``. It runs eagerly and under ``fg.jit``."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import fusegrad as torch
import fusegrad.nn as nn
from fusegrad.nn import functional as F
from tests.helpers import assert_close

pytestmark = pytest.mark.usefixtures("default_float64")


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, flash):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.flash = n_head, n_embd, flash
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, flash):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, flash)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=11, block_size=6, n_embd=8, n_head=2, n_layer=1, flash=False):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, flash)
                             for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        groups = [{"params": [p for p in params.values() if p.dim() >= 2],
                   "weight_decay": weight_decay},
                  {"params": [p for p in params.values() if p.dim() < 2],
                   "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def logits_last(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(0, t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))[:, -1, :]

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, top_k):
        for _ in range(max_new_tokens):
            logits = self.logits_last(idx[:, -self.block_size:])
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


def _batches(n):
    data = torch.tensor([i % 11 for i in range(200)], dtype=torch.long)
    out = []
    for _ in range(n):
        ix = torch.randint(len(data) - 6, (4,))
        out.append((torch.stack([data[i:i + 6] for i in ix]),
                    torch.stack([data[i + 1:i + 7] for i in ix])))
    return out


def _step(model, opt, x, y):
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


@pytest.mark.parametrize("flash", [False, True])
def test_gpt_trains_eagerly_and_under_jit(flash):
    torch.manual_seed(1337)
    raw = GPT(flash=flash)
    model = nn.DataParallel(raw)
    twin = copy.deepcopy(model)
    opt = model.module.configure_optimizers(0.1, 1e-2, (0.9, 0.95))
    opt2 = twin.module.configure_optimizers(0.1, 1e-2, (0.9, 0.95))
    jstep = torch.jit(lambda x, y: _step(twin, opt2, x, y))
    losses = []
    for x, y in _batches(4):
        a, b = _step(model, opt, x, y), jstep(x, y)
        assert_close(b.numpy(), a.detach().numpy(), "exact64")
        losses.append(a.item())
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert name.startswith("module.")
        # Eager runs the fused NumPy nodes (layer norm, GELU, cross-entropy, norms), the jit
        # the IR formulas: their float64 roundings differ by a few ulp, and AdamW's division
        # by sqrt(v) turns that into ~1e-11 absolute on entries whose gradient nearly cancels.
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-10,
                                   atol=1e-10, err_msg=name)
    assert losses[-1] < losses[0]
    out = raw.generate(torch.zeros((1, 1), dtype=torch.long), 8, top_k=3)
    assert tuple(out.shape) == (1, 9) and out.dtype == torch.long
    assert ((out.numpy() >= 0) & (out.numpy() < 11)).all()


def test_masked_softmax_and_sdpa_models_agree():
    torch.manual_seed(0)
    a = GPT(flash=False)
    b = GPT(flash=True)
    b.load_state_dict(a.state_dict())
    x, y = _batches(1)[0]
    la, lb = a(x, y), b(x, y)
    assert_close(lb.detach().numpy(), la.detach().numpy(), "exact64")
    la.backward()
    lb.backward()
    for p, q in zip(a.parameters(), b.parameters()):
        assert_close(q.grad.numpy(), p.grad.numpy(), "exact64")
    assert np.isfinite(la.item())
