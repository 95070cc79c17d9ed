"""A PyTorch-style training loop, eager and then compiled with ``fg.jit``.

The same step (``zero_grad``, forward, loss, ``backward``, ``step``) on two
identical MLPs: once eagerly, once under ``fg.jit``. Prints the median time
per step of each and the largest difference between their losses and
parameters (float64: they agree to rounding).

    python examples/pytorch_style.py            # 784-256-256-10, batch 128, 60 steps
    python examples/pytorch_style.py --small    # a quick run
    python examples/pytorch_style.py --sizes 64-128-128-10 --batch 32
"""

from __future__ import annotations

import argparse
import copy
import itertools
import statistics
import time

import numpy as np

import fusegrad as fg
from fusegrad import nn


def make_step(model, opt, loss_fn):
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def timed(step, batches):
    """Losses and per-step seconds of ``step`` over ``batches``."""
    losses, times = [], []
    for x, y in batches:
        t0 = time.perf_counter()
        loss = step(x, y)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return np.array(losses), times


def compare(name: str, make_opt, sizes, batch: int, steps: int, rng) -> None:
    fg.manual_seed(0)
    layers = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.Tanh()]
    eager_model = nn.Sequential(*layers[:-1])
    jit_model = copy.deepcopy(eager_model)
    loss_fn = nn.CrossEntropyLoss()
    eager_step = make_step(eager_model, make_opt(eager_model.parameters()), loss_fn)
    jit_step = fg.jit(make_step(jit_model, make_opt(jit_model.parameters()), loss_fn))
    teacher = rng.normal(size=(sizes[0], sizes[-1]))  # labels a linear teacher assigns
    xs = [rng.normal(size=(batch, sizes[0])) for _ in range(steps)]
    batches = [(fg.tensor(x), fg.tensor(np.argmax(x @ teacher, axis=1))) for x in xs]
    eager_losses, eager_times = timed(eager_step, batches)
    jit_losses, jit_times = timed(jit_step, batches)
    # the first jitted call runs eagerly (optimizer state is created lazily), the second
    # traces and compiles: the median is over the steps after them
    eager_med = statistics.median(eager_times[2:]) * 1e3
    jit_med = statistics.median(jit_times[2:]) * 1e3
    loss_diff = float(np.max(np.abs(jit_losses - eager_losses)))
    param_diff = max(float(np.max(np.abs(a.detach().numpy() - b.detach().numpy())))
                     for a, b in zip(eager_model.parameters(), jit_model.parameters()))
    print(f"{name:>13}: eager {eager_med:8.3f} ms/step   fg.jit {jit_med:8.3f} ms/step   "
          f"speed-up {eager_med / jit_med:5.2f}x   (first compiled call "
          f"{jit_times[1]:.2f} s)")
    print(f"{'':>13}  first loss {jit_losses[0]:.6f} -> final loss {jit_losses[-1]:.6f}; "
          f"max |loss diff| {loss_diff:.1e}, "
          f"max |param diff| {param_diff:.1e}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a small model and few steps")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--sizes", default=None, help="layer widths, e.g. 64-128-10")
    parser.add_argument("--batch", type=int, default=None)
    args = parser.parse_args(argv)
    sizes = (16, 32, 4) if args.small else (784, 256, 256, 10)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split("-"))
    batch = args.batch or (16 if args.small else 128)
    steps = args.steps or (30 if args.small else 60)
    fg.set_default_dtype(fg.float64)
    rng = np.random.default_rng(0)
    print(f"MLP {'-'.join(map(str, sizes))}, batch {batch}, {steps} steps, float64")
    compare("SGD momentum", lambda p: fg.optim.SGD(p, lr=0.05, momentum=0.9), sizes, batch,
            steps, rng)
    compare("Adam", lambda p: fg.optim.Adam(p, lr=1e-2), sizes, batch, steps, rng)


if __name__ == "__main__":
    main()
