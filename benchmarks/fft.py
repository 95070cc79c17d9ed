"""A 2-d real FFT round trip, ``irfft2(rfft2(x) * 0.5)``, compiled against NumPy.

``fg.jit`` runs both transforms natively (NumPy's own pocketfft loops called from the
compiled program: ``codegen/lean/fourier.py``), NumPy calls the same loops through its
ufuncs. The compiled result is checked to have NumPy's bits, then the two are timed in
interleaved rounds of one call each; the medians (and minima, the least disturbed by
other load) are printed with the ratio of the medians (compiled / NumPy)::

    taskset -c 1 python -m benchmarks.fft              # 301 rounds
    taskset -c 1 python -m benchmarks.fft --rounds 51 --size 512
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")


def numpy_round_trip(x):
    return np.fft.irfft2(np.fft.rfft2(x) * 0.5, s=x.shape)


def round_trip(x):
    import fusegrad.numpy as fnp

    return fnp.fft.irfft2(fnp.fft.rfft2(x) * 0.5, s=x.shape)


def main(argv=None) -> None:
    import fusegrad as fg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=301)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args(argv)
    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(0).standard_normal((args.size, args.size)).astype(dtype)
        compiled = fg.jit(round_trip)
        got, want = compiled(x), numpy_round_trip(x)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8),
                                                          want.view(np.uint8))
        times: dict[str, list[float]] = {"fusegrad": [], "numpy": []}
        for r in range(args.rounds):
            order = [("fusegrad", compiled), ("numpy", numpy_round_trip)][::1 - 2 * (r % 2)]
            for name, f in order:
                t0 = time.perf_counter()
                f(x)
                times[name].append(time.perf_counter() - t0)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{args.size}x{args.size} {np.dtype(dtype).name}: "
              + ", ".join(f"{k} {med[k] * 1e6:.0f} us (min {min(v) * 1e6:.0f})"
                          for k, v in times.items())
              + f"; ratio {med['fusegrad'] / med['numpy']:.3f}")


if __name__ == "__main__":
    main()
