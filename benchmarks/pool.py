"""Max and average pooling, forward + backward, float32 (32, 16, 32, 32), one thread.

For each pooling (max / avg, kernel 2 stride 2 and kernel 3 stride 2) three
implementations compute the input gradient of ``sum(pool(x) * g)``: fusegrad's eager
Tensor (``F.max_pool2d(x).backward(g)``), ``fg.jit(fg.grad(...))``, and PyTorch's eager
autograd. Each result is checked against PyTorch's first, then the three are timed in
interleaved rounds of one call each (the order rotates); the medians (and minima, the
least disturbed by other load) are printed with the ratio of the medians to PyTorch::

    taskset -c 1 python -m benchmarks.pool              # 41 rounds
    taskset -c 1 python -m benchmarks.pool --rounds 11
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

SHAPE = (32, 16, 32, 32)
CONFIGS = [("max", 2, 2), ("max", 3, 2), ("avg", 2, 2), ("avg", 3, 2)]


def _impls(kind, k, s, x, g):
    import torch

    import fusegrad as fg
    import fusegrad.numpy as fnp
    from fusegrad.nn import functional as F

    torch.set_num_threads(1)
    fpool = getattr(F, f"{kind}_pool2d")
    tpool = getattr(torch.nn.functional, f"{kind}_pool2d")

    def eager():
        xt = fg.tensor(x, requires_grad=True)
        fpool(xt, k, s).backward(fg.tensor(g))
        return xt.grad.numpy()

    jitted = fg.jit(fg.grad(lambda a: fnp.sum(fpool(a, k, s) * g)))

    tg = torch.tensor(g)

    def torch_eager():
        xt = torch.tensor(x, requires_grad=True)
        tpool(xt, k, s).backward(tg)
        return xt.grad.numpy()

    return {"fusegrad eager": eager, "fusegrad jit": lambda: np.asarray(jitted(x)),
            "torch eager": torch_eager}


def _once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=41)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    for kind, k, s in CONFIGS:
        g = rng.standard_normal((SHAPE[0], SHAPE[1], *((n - k) // s + 1 for n in SHAPE[2:]))
                                ).astype(np.float32)
        impls = _impls(kind, k, s, x, g)
        ref = impls["torch eager"]()
        for name, fn in impls.items():
            np.testing.assert_allclose(fn(), ref, rtol=1e-5, atol=1e-6, err_msg=name)
        names = list(impls)
        times = {n: [] for n in names}
        for r in range(args.rounds):  # one call each per round, the order rotating
            for n in names[r % len(names):] + names[:r % len(names)]:
                times[n].append(_once(impls[n]))
        med = {n: statistics.median(v) for n, v in times.items()}
        low = {n: min(v) for n, v in times.items()}
        line = ", ".join(f"{n} {med[n] * 1e3:.2f} ms (min {low[n] * 1e3:.2f}; "
                         f"{med[n] / med['torch eager']:.2f}x torch)" for n in names)
        print(f"{kind}_pool2d k={k} s={s}: {line}", flush=True)


if __name__ == "__main__":
    main()
