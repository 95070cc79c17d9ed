"""``fusegrad demo``: train an MLP classifier on two interleaved spirals.

The whole training step (forward, backward and Adam update) is one function
compiled by ``fg.jit``; the demo prints the final loss and accuracy, the time per
step of that compiled step against the same step run by the eager engine
(``fg.nn`` + ``fg.optim.Adam``), and writes a PNG of the loss curve and the
decision boundary when matplotlib is installed (``pip install fusegrad[plot]``).
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time

import numpy as np

from . import nn, optim
from . import numpy as fnp
from .eager import tensor_api as T
from .nn import functional as F
from .transforms import jit_api, reverse

HIDDEN = (2, 64, 64, 2)
LEARNING_RATE = 1e-2
EAGER_TIMING_STEPS = 30


def spirals(n: int = 1000, turns: float = 1.5, noise: float = 0.06, seed: int = 0):
    """Two interleaved spirals: ``x`` float32 (n, 2) in about [-1, 1]^2, labels int64 (n,).

    Class ``k`` lies on ``r = t / (2 pi turns)``, angle ``t + k pi``, with Gaussian noise
    of standard deviation ``noise``; ``t`` is drawn so the points are evenly spread
    along each arm.
    """
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    t = np.sqrt(rng.uniform(0.02, 1.0, n)) * (2 * np.pi * turns)
    r = t / (2 * np.pi * turns)
    angle = t + np.pi * labels
    x = np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1)
    x = x + rng.normal(0.0, noise, x.shape)
    return x.astype(np.float32), labels.astype(np.int64)


def init_mlp(sizes=HIDDEN, seed: int = 0) -> list:
    """``[(W, b), ...]`` float32, W uniform on +-sqrt(6 / (fan_in + fan_out)), b = 0."""
    rng = np.random.default_rng(seed + 1)
    params = []
    for n_in, n_out in itertools.pairwise(sizes):
        bound = np.sqrt(6.0 / (n_in + n_out))
        w = rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32)
        params.append((w, np.zeros(n_out, np.float32)))
    return params


def forward(params, x):
    """Logits of the MLP: ReLU hidden layers, linear output."""
    for w, b in params[:-1]:
        x = F.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, onehot):
    """Mean cross-entropy of the logits against one-hot targets."""
    return -fnp.mean(fnp.sum(onehot * F.log_softmax(forward(params, x), axis=1), axis=1))


def make_step(opt):
    """The compiled training step: ``(params, state, x, onehot) -> (params, state, loss)``."""

    def step(params, state, x, onehot):
        loss, grads = reverse.value_and_grad(loss_fn)(params, x, onehot)
        params, state = opt.update(grads, state, params)
        return params, state, loss

    return jit_api.jit(step)


class EagerTrainer:
    """The same model and optimizer with the eager engine: ``fg.nn`` + ``fg.optim.Adam``."""

    def __init__(self, params):
        layers = []
        for i, (w, b) in enumerate(params):
            lin = nn.Linear(*w.shape, dtype=T.float32)
            with T.no_grad():
                lin.weight.copy_(T.tensor(w.T.copy()))
                lin.bias.copy_(T.tensor(b))
            layers.append(lin)
            if i < len(params) - 1:
                layers.append(nn.ReLU())
        self.model = nn.Sequential(*layers)
        self.opt = optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
        self.loss = nn.CrossEntropyLoss()

    def step(self, x, labels) -> float:
        self.opt.zero_grad()
        loss = self.loss(self.model(T.from_numpy(x)), T.from_numpy(labels))
        loss.backward()
        self.opt.step()
        return loss.item()

    def params(self) -> list:
        lins = [m for m in self.model if isinstance(m, nn.Linear)]
        return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
                for m in lins]


class Progress:
    """A text progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, total: int, width: int = 30, stream=None):
        self.total, self.width = total, width
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = max(1, total // (100 if self.tty else 10))

    def update(self, done: int, loss: float) -> None:
        if done % self.every and done != self.total:
            return
        filled = self.width * done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = f"training [{bar}] {done}/{self.total}  loss {loss:.4f}"
        end = "\n" if done == self.total or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line + end)
        self.stream.flush()


def accuracy(params, x, labels) -> float:
    logits = np.asarray(forward(params, x))
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def default_plot_path() -> str:
    """``fusegrad-demo.png`` in the current directory, or in the temp dir if unwritable."""
    here = os.getcwd()
    folder = here if os.access(here, os.W_OK) else tempfile.gettempdir()
    return os.path.join(folder, "fusegrad-demo.png")


def _check_out(out: str) -> None:
    """Fail before training, not after it, if the plot cannot be written to ``out``."""
    folder = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise ValueError(f"--out {out}: that is a directory; give a file name such as "
                         f"{os.path.join(out, 'fusegrad-demo.png')}")
    if not os.path.isdir(folder):
        raise ValueError(f"--out {out}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out {out}: the directory {folder} is not writable")


def plot(path: str, losses, params, x, labels) -> str | None:
    """Loss curve and decision boundary as a PNG; None if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax_loss, ax_data) = plt.subplots(1, 2, figsize=(11, 4.8))
    ax_loss.plot(np.arange(1, len(losses) + 1), losses, lw=0.8)
    ax_loss.set(xlabel="step", ylabel="cross-entropy (minibatch)", yscale="log",
                title="training loss")
    lim = float(np.abs(x).max()) * 1.1
    g = np.linspace(-lim, lim, 300, dtype=np.float32)
    gx, gy = np.meshgrid(g, g)
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    logits = np.asarray(forward(params, grid))
    p1 = np.exp(logits[:, 1] - np.logaddexp(logits[:, 0], logits[:, 1])).reshape(gx.shape)
    ax_data.contourf(gx, gy, p1, levels=20, cmap="RdBu_r", alpha=0.6)
    ax_data.contour(gx, gy, p1, levels=[0.5], colors="k", linewidths=1)
    ax_data.scatter(x[:, 0], x[:, 1], c=labels, cmap="RdBu_r", s=6, edgecolors="none")
    ax_data.set(title="decision boundary", aspect="equal")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _batches(n: int, batch_size: int, steps: int, seed: int):
    rng = np.random.default_rng(seed + 2)
    return rng.integers(0, n, (steps, min(batch_size, n)))


def _eager_ms(params, x, labels, idx) -> float:
    trainer = EagerTrainer(params)
    trainer.step(x[idx[0]], labels[idx[0]])  # the first step allocates the optimizer state
    t0 = time.perf_counter()
    for i in idx[1:]:
        trainer.step(x[i], labels[i])
    return 1e3 * (time.perf_counter() - t0) / (len(idx) - 1)


def run_demo(steps: int = 1000, batch_size: int = 128, seed: int = 0, jit: bool = True,
             out: str | None = None) -> int:
    if steps < 1 or batch_size < 1:
        raise ValueError(f"--steps and --batch-size must be at least 1, got {steps}, "
                         f"{batch_size}")
    if out is not None:
        _check_out(out)
    x, labels = spirals(seed=seed)
    onehot = np.eye(2, dtype=np.float32)[labels]
    params = init_mlp(seed=seed)
    batches = _batches(len(x), batch_size, steps, seed)
    print(f"fusegrad demo: MLP {'-'.join(map(str, HIDDEN))} (ReLU) on {len(x)} points of two "
          f"interleaved spirals; Adam lr {LEARNING_RATE}, {steps} steps of {batches.shape[1]}"
          f" ({'compiled with fg.jit' if jit else 'eager fg.nn + fg.optim, --no-jit'})",
          flush=True)
    progress, losses = Progress(steps), []
    t_start = time.perf_counter()
    if jit:
        opt = optim.adam(LEARNING_RATE)
        step, state = make_step(opt), opt.init(params)
        trained = params
        for k, i in enumerate(batches):
            if k == 1:
                t_first = time.perf_counter()
            trained, state, loss = step(trained, state, x[i], onehot[i])
            losses.append(float(loss))
            progress.update(k + 1, losses[-1])
        compile_s = (t_first if steps > 1 else time.perf_counter()) - t_start
        compiled_ms = 1e3 * (time.perf_counter() - t_first) / (steps - 1) if steps > 1 else None
    else:
        trainer = EagerTrainer(params)
        for k, i in enumerate(batches):
            losses.append(trainer.step(x[i], labels[i]))
            progress.update(k + 1, losses[-1])
        trained, compiled_ms = trainer.params(), None
    train_s = time.perf_counter() - t_start
    full_loss = float(loss_fn(trained, x, onehot))
    print(f"final loss {full_loss:.4f} (all points; first minibatch {losses[0]:.4f}), "
          f"accuracy {accuracy(trained, x, labels):.1%}, trained in {train_s:.1f} s")
    eager_ms = _eager_ms(params, x, labels, batches[: min(EAGER_TIMING_STEPS, steps + 1)]) \
        if steps > 1 else None
    if compiled_ms is not None:
        print(f"time per step: compiled {compiled_ms:.3f} ms (first call, tracing and "
              f"compiling: {compile_s:.2f} s)")
    if eager_ms is not None:
        line = f"time per step: eager {eager_ms:.3f} ms"
        if compiled_ms:
            line += f" ({eager_ms / compiled_ms:.1f}x the compiled step)"
        print(line)
    path = plot(out or default_plot_path(), losses, trained, x, labels)
    if path is None:
        print("plot skipped: matplotlib is not installed (pip install \"fusegrad[plot]\")")
    else:
        print(f"plot of the loss curve and decision boundary written to {os.path.abspath(path)}")
    return 0
