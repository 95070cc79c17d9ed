"""``fg.autograd.functional.jacobian`` at n = 100, vectorize False/True, against PyTorch.

The function maps R^n to R^n (a matrix product, tanh, sin, a square): the Jacobian is
n backward passes through one graph with ``vectorize=False`` and one batched program
(the traced eager backward mapped over the identity's rows) with ``vectorize=True``,
compiled (after the warm-up) or run by the NumPy interpreter ("interp").
PyTorch's ``torch.autograd.functional.jacobian`` is timed the same ways when installed.
The implementations run interleaved in one process; medians and ratios are printed::

    unset OPENBLAS_CORETYPE
    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        taskset -c 1 python -m benchmarks.autograd_jacobian --n 100 --rounds 15
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _time(fn, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import fusegrad as fg
    from fusegrad.autograd import batched
    from fusegrad.autograd.functional import jacobian

    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((args.n, args.n)) / np.sqrt(args.n)
    x_np = rng.standard_normal(args.n)
    w, x = fg.tensor(w_np), fg.tensor(x_np)

    def f(v):
        return (w @ v).tanh() * v.sin() + v ** 2

    def f_interp(v):  # the same function under another name: its own cached program
        return f(v)

    batched.COMPILE_AFTER = 2  # compiled from the warm-up call on
    cases = {"fg eager": lambda: jacobian(f, x),
             "fg vectorize": lambda: jacobian(f, x, vectorize=True),
             "fg vectorize interp": lambda: jacobian(f_interp, x, vectorize=True),
             "fg forward-mode": lambda: jacobian(f, x, vectorize=True, strategy="forward-mode"),
             "fg fwd-mode interp": lambda: jacobian(f_interp, x, vectorize=True,
                                                    strategy="forward-mode")}
    ref = cases["fg eager"]().numpy()
    try:
        import torch
        from torch.autograd.functional import jacobian as tjac

        torch.set_num_threads(1)
        tw, tx = torch.tensor(w_np), torch.tensor(x_np)

        def tf(v):
            return (tw @ v).tanh() * v.sin() + v ** 2

        cases["torch eager"] = lambda: tjac(tf, tx)
        cases["torch vectorize"] = lambda: tjac(tf, tx, vectorize=True)
        assert np.allclose(tjac(tf, tx).numpy(), ref)
    except ImportError:
        pass
    for name, fn in cases.items():
        got = fn()
        got = got.numpy() if hasattr(got, "numpy") else got
        assert np.allclose(got, ref, rtol=1e-10, atol=1e-12), name
        fn()  # warm (the batched program compiles on its second use)
    for key, entry in batched._cache.items():
        if "@f_interp" in key:
            entry[2] = False  # kept on the NumPy interpreter
    times: dict[str, list] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            times[name].append(_time(fn, args.reps))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("torch vectorize")
    for k, v in med.items():
        extra = f"  ({v / base:.2f}x torch vectorize)" if base else ""
        print(f"{k:18s} {v * 1e3:8.3f} ms{extra}")


if __name__ == "__main__":
    main()
