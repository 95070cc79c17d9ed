"""Conv forward + backward, one thread: compiled ``fg.grad``, eager ``nn.Conv``, PyTorch.

Run pinned: ``unset OPENBLAS_CORETYPE; NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1 taskset -c 1 python -m benchmarks.conv``. The implementations
run interleaved (round-robin) and the medians are reported with the ratio to PyTorch.

One run on a loaded 2-core machine (medians, ratio to PyTorch 2.13 one thread), before
and after the column-layout and NumPy-algorithm changes of ``rt_conv`` / ``conv_impl``
(``rt_conv`` was the convolution of a code generator since removed; compiled code now
runs ``ir.conv_ops.conv_impl`` between its native segments):

==========================  ===============  ===============
shape                       jit(grad)        eager
==========================  ===============  ===============
2d 32x3x32x32, 16 3x3       1.28x -> 0.83x   2.78x -> 1.07x
2d 32x16x16x16, 32 3x3 p1   2.62x -> 1.53x   3.19x -> 1.96x
1d 32x8x128, 16 k5          1.18x -> 0.71x   1.71x -> 1.23x
==========================  ===============  ===============
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

SHAPES = [  # (name, x shape, weight shape, padding)
    ("2d 32x3x32x32 k16x3x3", (32, 3, 32, 32), (16, 3, 3, 3), 0),
    ("2d 32x16x16x16 k32x3x3 p1", (32, 16, 16, 16), (32, 16, 3, 3), 1),
    ("1d 32x8x128 k16x5", (32, 8, 128), (16, 8, 5), 0),
]


def _impls(xs, ws, pad):
    import fusegrad as fg
    import fusegrad.nn.functional as F
    import fusegrad.numpy as fnp

    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    conv = F.conv1d if len(xs) == 3 else F.conv2d

    def loss(x, w):
        return fnp.sum(fnp.sin(conv(x, w, padding=pad)))

    g = fg.jit(fg.grad(loss, argnums=(0, 1)))
    impls = {"fusegrad jit(grad)": lambda: g(x, w)}

    from fusegrad import nn
    mod = (nn.Conv1d if len(xs) == 3 else nn.Conv2d)(xs[1], ws[0], ws[2], padding=pad,
                                                       bias=False)
    from fusegrad import tensor as fe_tensor
    mod.weight.data = fe_tensor(w.copy())

    def eager():
        xt = fe_tensor(x, requires_grad=True)
        y = mod(xt).sin().sum()
        y.backward()
        return xt.grad
    impls["fusegrad eager"] = eager
    try:
        import torch
    except ImportError:  # pragma: no cover
        return impls
    torch.set_num_threads(1)
    tconv = torch.nn.functional.conv1d if len(xs) == 3 else torch.nn.functional.conv2d
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)

    def torch_step():
        tx.grad = tw.grad = None
        tconv(tx, tw, padding=pad).sin().sum().backward()
        return tx.grad
    impls["torch"] = torch_step
    return impls


def run(reps: int = 30, budget: float = 15.0):
    for name, xs, ws, pad in SHAPES:
        impls = _impls(xs, ws, pad)
        for f in impls.values():  # warm up (compiles)
            f()
            f()
        times = {k: [] for k in impls}
        t_end = time.perf_counter() + budget
        for _ in range(reps):
            for k, f in impls.items():
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
            if time.perf_counter() > t_end:
                break
        med = {k: statistics.median(v) for k, v in times.items()}
        ref = med.get("torch")
        print(name)
        for k, m in med.items():
            ratio = f"  {m / ref:5.2f}x torch" if ref else ""
            print(f"  {k:22s} {m * 1e3:8.3f} ms{ratio}")
        sys.stdout.flush()


if __name__ == "__main__":
    run()
