"""Train an MLP classifier on two interleaved spirals, the functional way.

Parameters are a dict of arrays, the optimizer is ``fg.optim.adam`` (pure ``init`` /
``update`` functions), and one whole epoch (shuffle, every minibatch step with its
forward pass, dropout, backward pass and Adam update) is ONE ``fg.jit`` call: an
``fg.scan`` over the stacked minibatches. Dropout keys come from ``fg.random``.

    python examples/mlp_training.py            # 300 epochs
    python examples/mlp_training.py --small    # a quick run
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp


def spirals(n: int, seed: int = 0):
    """Two interleaved spirals: points (n, 2), one-hot labels (n, 2)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    t = np.sqrt(rng.uniform(0.02, 1.0, n)) * 3 * np.pi
    r = t / (3 * np.pi)
    x = np.stack([r * np.cos(t + np.pi * labels), r * np.sin(t + np.pi * labels)], axis=1)
    x += rng.normal(scale=0.04, size=x.shape)
    return x, np.eye(2)[labels]


def init_params(sizes, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [
        {"w": rng.normal(size=(m, n)) * np.sqrt(2.0 / m), "b": np.zeros(n)}
        for m, n in itertools.pairwise(sizes)
    ]


def logits(params, x, key=None, rate=0.1):
    """The MLP; with a ``key``, dropout after each hidden layer (training mode)."""
    h = x
    for i, layer in enumerate(params[:-1]):
        h = fnp.tanh(h @ layer["w"] + layer["b"])
        if key is not None:
            h = fg.random.dropout(fg.random.fold_in(key, i), h, rate)
    return h @ params[-1]["w"] + params[-1]["b"]


def cross_entropy(z, onehot):
    m = fnp.max(z, axis=1, keepdims=True)
    lse = m + fnp.log(fnp.sum(fnp.exp(z - m), axis=1, keepdims=True))
    return -fnp.mean(fnp.sum(onehot * (z - lse), axis=1))


def loss_fn(params, x, y, key):
    return cross_entropy(logits(params, x, key), y)


opt = fg.optim.adam(0.01)


def train_step(carry, batch):
    params, state, key = carry
    x, y = batch
    key, sub = fg.random.split(key)
    loss, grads = fg.value_and_grad(loss_fn)(params, x, y, sub)
    params, state = opt.update(grads, state, params)
    return (params, state, key), loss


@fg.jit
def epoch(params, state, key, xs, ys):
    """Every minibatch of one epoch: ``xs`` is (batches, batch size, 2)."""
    (params, state, key), losses = fg.scan(train_step, (params, state, key), (xs, ys))
    return params, state, key, fnp.mean(losses)


@fg.jit
def accuracy(params, x, y):
    pred = fnp.argmax(logits(params, x), axis=1)
    return fnp.mean((pred == fnp.argmax(y, axis=1)) * 1.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="a quick run (fewer epochs)")
    args = ap.parse_args(argv)
    epochs, n, batch = (40, 512, 64) if args.small else (300, 2048, 128)

    x, y = spirals(n)
    params = init_params((2, 64, 64, 2))
    state = opt.init(params)
    key = fg.random.key(0)
    order_rng = np.random.default_rng(2)
    t0 = time.perf_counter()
    for e in range(epochs):
        perm = order_rng.permutation(n)
        xs = x[perm].reshape(n // batch, batch, 2)
        ys = y[perm].reshape(n // batch, batch, 2)
        params, state, key, loss = epoch(params, state, key, xs, ys)
        if e == 0 or (e + 1) % max(epochs // 10, 1) == 0:
            print(f"epoch {e + 1:4d}  loss {float(loss):.4f}")
    dt = time.perf_counter() - t0
    print(f"train accuracy {float(accuracy(params, x, y)):.3f}  "
          f"({epochs} epochs in {dt:.2f} s, first includes compiling)")


if __name__ == "__main__":
    main()
