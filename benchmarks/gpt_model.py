"""A small GPT (decoder-only transformer) written once in PyTorch's API, so that the
same code builds a model with ``torch`` or with ``fusegrad`` as the module:

    import fusegrad as torch            # or: import torch
    model, opt = gpt_model.build(torch, seed=0)
    x, y = gpt_model.batch(torch, 0)
    loss = gpt_model.train_step(torch, model, opt, x, y)

Pre-norm blocks of causal self-attention and a GELU MLP (as GPT-2), a character
vocabulary, AdamW and gradient clipping. The initial weights come from NumPy (a fixed
seed) and are loaded into either library, so both start from the same bits; the
training text is a fixed string.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # 65 characters

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\nResolved. "
    "resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief enemy to the "
    "people.\n\nAll:\nWe know't, we know't.\n\nFirst Citizen:\nLet us kill him, and we'll have "
    "corn at our own price.\nIs't a verdict?\n\nAll:\nNo more talking on't; let it be done: "
    "away, away!\n\nSecond Citizen:\nOne word, good citizens.\n"
)


@dataclass(frozen=True)
class Config:
    vocab: int = len(VOCAB)
    context: int = 16
    layers: int = 2
    heads: int = 2
    width: int = 32
    batch: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.1
    clip: float = 1.0


def model_classes(torch):
    """The model's modules, built on ``torch.nn`` of the given library."""
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, cfg: Config):
            super().__init__()
            self.heads = cfg.heads
            self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
            self.proj = nn.Linear(cfg.width, cfg.width)
            mask = np.tril(np.ones((cfg.context, cfg.context), dtype=bool))
            self.register_buffer("mask", torch.from_numpy(~mask))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            hs = C // self.heads
            q = q.view(B, T, self.heads, hs).transpose(1, 2)
            k = k.view(B, T, self.heads, hs).transpose(1, 2)
            v = v.view(B, T, self.heads, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self, cfg: Config):
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.width)
            self.attn = CausalSelfAttention(cfg)
            self.ln2 = nn.LayerNorm(cfg.width)
            self.fc = nn.Linear(cfg.width, 4 * cfg.width)
            self.gelu = nn.GELU()
            self.out = nn.Linear(4 * cfg.width, cfg.width)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.out(self.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, cfg: Config):
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab, cfg.width)
            self.pos = nn.Embedding(cfg.context, cfg.width)
            self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.layers)])
            self.ln_f = nn.LayerNorm(cfg.width)
            self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
            self.register_buffer("positions", torch.arange(cfg.context))

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(self.positions[:T])
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT


def initial_weights(model, seed: int) -> dict[str, np.ndarray]:
    """float32 weights for every parameter of ``model`` (GPT-2's scheme: normal(0, 0.02)
    matrices and embeddings, zero biases, unit LayerNorm gains), from ``seed``."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        if name.endswith("bias"):
            w = np.zeros(shape)
        elif ".ln" in name or name.startswith("ln"):
            w = np.ones(shape)
        else:
            w = rng.normal(0.0, 0.02, shape)
        out[name] = w.astype(np.float32)
    return out


def build(torch, seed: int = 0, cfg: Config = Config()):
    """The model (weights from ``seed``) and its AdamW optimizer (single-tensor)."""
    model = model_classes(torch)(cfg)
    weights = initial_weights(model, seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name]))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                            foreach=False)
    return model, opt


def encoded() -> np.ndarray:
    return np.array([VOCAB.index(c) for c in TEXT], dtype=np.int64)


def batch(torch, step: int, cfg: Config = Config()):
    """Inputs and next-character targets, ``(batch, context)`` int64 tensors, for ``step``
    (windows of the text at offsets drawn from a seed)."""
    data = encoded()
    starts = np.random.default_rng(1000 + step).integers(0, len(data) - cfg.context - 1,
                                                         cfg.batch)
    x = np.stack([data[s:s + cfg.context] for s in starts])
    y = np.stack([data[s + 1:s + cfg.context + 1] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)


def clip_grad_norm(torch, parameters, max_norm: float):
    """Scale the gradients so their global 2-norm is at most ``max_norm`` (as
    ``torch.nn.utils.clip_grad_norm_``: the norm of the per-tensor norms, a coefficient
    ``max_norm / (norm + 1e-6)`` clamped to 1); returns the norm. No ``.item()``, so it
    compiles inside ``fg.jit``."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.stack([g.norm() for g in grads]).norm()
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef)
    return total


def train_step(torch, model, opt, x, y, cfg: Config = Config()):
    """One step: forward, backward, clipping, AdamW; returns the loss (a 0-d tensor)."""
    opt.zero_grad()
    loss = model(x, y)
    loss.backward()
    clip_grad_norm(torch, model.parameters(), cfg.clip)
    opt.step()
    return loss
