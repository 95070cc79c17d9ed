"""``fusegrad demo``: differentiate a built-in example and show every stage."""

from __future__ import annotations

import time

import numpy as np

from . import api
from . import numpy as fnp
from .nn import functional as F


def make_data(n: int = 200, seed: int = 0):
    """Two Gaussian blobs with labels 0/1, generated here (no download)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(-1.0, 1.0, (n // 2, 2)), rng.normal(1.0, 1.0, (n // 2, 2))])
    y = np.concatenate([np.zeros(n // 2), np.ones(n // 2)])
    return x, y


X, Y = make_data()


def loss(w, b):
    """Logistic-regression loss: mean binary cross-entropy, stable in logits."""
    z = X @ w + b
    return fnp.mean(F.softplus(z) - Y * z)


def _finite_difference(f, w, b, eps=1e-6):
    """Central differences of ``f`` w.r.t. every weight and the bias."""
    g = np.zeros_like(w)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = eps
        g[i] = (f(w + e, b) - f(w - e, b)) / (2 * eps)
    return g, (f(w, b + eps) - f(w, b - eps)) / (2 * eps)


def run_demo(steps: int = 100, lr: float = 0.5) -> int:
    w, b = np.zeros(2), 0.0
    print("fusegrad demo: logistic regression on 200 generated points\n")
    for stage in ("traced", "simplified", "fused"):
        api.dump(loss, w, b, stage=stage, grad=True)
    value_and_grad = api.value_and_grad(loss, argnums=(0, 1))
    (value, (gw, gb)) = value_and_grad(w, b)
    fd_w, fd_b = _finite_difference(lambda w, b: float(loss(w, b)), w, b)
    print(f"\nloss(w=0, b=0)      = {float(value):.6f}")
    print(f"d loss / d w        = {gw}")
    print(f"d loss / d b        = {float(gb):.6f}")
    err = max(np.max(np.abs(gw - fd_w)), abs(float(gb) - fd_b))
    print(f"max |grad - finite difference| = {err:.2e}")
    t0 = time.perf_counter()
    for _ in range(steps):
        value, (gw, gb) = value_and_grad(w, b)
        w, b = w - lr * gw, b - lr * gb
    secs = time.perf_counter() - t0
    acc = np.mean(((X @ w + b) > 0) == (Y > 0.5))
    print(f"\n{steps} gradient-descent steps in {secs:.2f} s: loss {float(value):.4f}, "
          f"accuracy {acc:.1%}, w = {w}, b = {float(b):.4f}")
    return 0
