"""Shared by the bit-compatibility tests and ``data/record_torch.py``: fixed gradients,
the optimizer settings compared, and one loop that runs either library.

The gradients come from the raw output of NumPy's PCG64 bit generator (stable across
NumPy versions, unlike its distributions), so recorded PyTorch values stay valid.

PyTorch's CPU float32 ``sqrt`` (Intel MKL's vector math) is not correctly rounded: about
0.6% of inputs whose exact root lies just above a rounding midpoint come out one ulp
low. fusegrad's ``sqrt`` is correctly rounded, so the references run PyTorch with
``Tensor.sqrt``/``sqrt_`` computed in float64 and rounded to float32 (correctly rounded),
``correct_sqrt``; everything else is PyTorch's own code.
"""

from __future__ import annotations

import contextlib

import numpy as np

SHAPES = ((7, 5), (37,), (24, 40))

#: name -> (optimizer class, keyword arguments)
CONFIGS = {
    "sgd": ("SGD", dict(lr=0.05)),
    "sgd-momentum": ("SGD", dict(lr=0.05, momentum=0.9)),
    "sgd-dampening-wd": ("SGD", dict(lr=0.03, momentum=0.8, dampening=0.3, weight_decay=1e-2)),
    "sgd-nesterov-max": ("SGD", dict(lr=0.02, momentum=0.9, nesterov=True, maximize=True,
                                     weight_decay=3e-3)),
    "adam": ("Adam", dict(lr=1e-2)),
    "adam-amsgrad-wd": ("Adam", dict(lr=3e-3, betas=(0.8, 0.99), weight_decay=1e-2,
                                     amsgrad=True)),
    "adam-max-eps": ("Adam", dict(lr=1e-3, eps=1e-6, maximize=True)),
    "adamw": ("AdamW", dict(lr=1e-2)),
    "adamw-amsgrad": ("AdamW", dict(lr=3e-3, weight_decay=0.1, amsgrad=True)),
    "rmsprop": ("RMSprop", dict(lr=1e-2)),
    "rmsprop-centered-momentum": ("RMSprop", dict(lr=1e-3, alpha=0.9, momentum=0.5,
                                                  centered=True)),
    "rmsprop-wd-max": ("RMSprop", dict(lr=3e-3, alpha=0.95, weight_decay=1e-2, maximize=True)),
    "adagrad": ("Adagrad", dict(lr=1e-1)),
    "adagrad-decay-init": ("Adagrad", dict(lr=5e-2, lr_decay=1e-2, initial_accumulator_value=0.1,
                                           weight_decay=1e-3)),
}

#: the recorded runs: name -> (config, steps)
RECORDED = {
    "rmsprop-centered-momentum": 2000,
    "sgd-nesterov-max": 200,
    "adam-amsgrad-wd": 200,
    "adamw": 200,
    "adagrad-decay-init": 200,
}


def _uniform(bits: np.random.PCG64, shape) -> np.ndarray:
    """float32 values in [-1, 1) from the raw 64-bit outputs (24 bits each)."""
    raw = bits.random_raw(int(np.prod(shape)))
    return ((raw >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-23)
            - np.float32(1)).reshape(shape)


def initial_params(seed: int = 0) -> list[np.ndarray]:
    bits = np.random.PCG64(seed)
    return [_uniform(bits, s) for s in SHAPES]


def gradients(steps: int, seed: int = 1):
    """For each step, one float32 gradient per parameter (a generator: 2000 steps)."""
    bits = np.random.PCG64(seed)
    scales = (np.float32(1.0), np.float32(0.01), np.float32(3.0))
    for _ in range(steps):
        yield [_uniform(bits, s) * k for s, k in zip(SHAPES, scales)]


def run(lib, config: str, steps: int) -> list[np.ndarray]:
    """``steps`` updates of the ``config`` optimizer of ``lib`` (torch or fusegrad) on
    :func:`initial_params`; the final float32 parameters."""
    cls_name, kwargs = CONFIGS[config]
    if lib.__name__ == "torch":
        kwargs = dict(kwargs, foreach=False)
    params = [lib.tensor(a, requires_grad=True) for a in initial_params()]
    opt = getattr(lib.optim, cls_name)(params, **kwargs)
    for grads in gradients(steps):
        for p, g in zip(params, grads):
            p.grad = lib.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in params]


@contextlib.contextmanager
def correct_sqrt(torch):
    """PyTorch with a correctly rounded float32 ``Tensor.sqrt`` / ``sqrt_``."""
    cls = torch.Tensor
    saved = cls.sqrt, cls.sqrt_

    def sqrt(t):
        return saved[0](t.double()).to(t.dtype) if t.dtype == torch.float32 else saved[0](t)

    def sqrt_(t):
        return t.copy_(sqrt(t))

    cls.sqrt, cls.sqrt_ = sqrt, sqrt_
    try:
        yield
    finally:
        cls.sqrt, cls.sqrt_ = saved
