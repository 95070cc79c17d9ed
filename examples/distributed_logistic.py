"""Logistic regression on data spread over a Dask cluster.

The data (examples along axis 0) live on the workers as chunks of a ``dask.array``;
each step, every worker computes its chunks' loss and gradient with fusegrad's compiled
code, Dask sums them in a tree, and the client applies Adam. Only the parameters go
out and only the gradients come back.

    python examples/distributed_logistic.py            # 2 worker processes, 2e6 examples
    python examples/distributed_logistic.py --small    # a quick run

Needs ``pip install "fusegrad[distributed]"``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import distributed as fd


def loss(params, X, y):
    """Mean logistic loss of labels ``y`` in {-1, 1}: a mean over examples."""
    z = X @ params["w"] + params["b"]
    return fnp.mean(fnp.logaddexp(0.0, -y * z))


def main(argv=None) -> None:
    import dask.array as da
    from distributed import Client, LocalCluster

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="a quick run")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    n, d, chunks, epochs = (20_000, 20, 4, 15) if a.small else (2_000_000, 50, 16, 40)

    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        rs = da.random.RandomState(0)
        X = rs.standard_normal((n, d), chunks=(n // chunks, d))
        w_true = np.linspace(-2, 2, d)
        y = da.sign(X @ w_true + 0.5 * rs.standard_normal(n, chunks=n // chunks))
        params = {"w": np.zeros(d), "b": np.zeros(())}

        def report(step, value, p):
            if step % 5 == 0:
                print(f"step {step:3d}  loss {value:.5f}")

        t0 = time.perf_counter()
        result = fd.fit(loss, params, (X, y), optimizer=fg.optim.adam(0.1), epochs=epochs,
                        callback=report)
        secs = time.perf_counter() - t0
        print(f"final loss {result.losses[-1]:.5f} after {len(result.losses)} steps "
              f"({secs / len(result.losses) * 1e3:.1f} ms per step, first step compiles)")
        cos = result.params["w"] @ w_true / np.linalg.norm(result.params["w"]) / np.linalg.norm(
            w_true)
        print(f"cosine(w, w_true) = {cos:.4f}")
        compiles = {w: sum(s["compiles"].values()) for w, s in
                    fd.compile_stats(client).items()}
        print(f"compiles per worker: {sorted(compiles.values())}")


if __name__ == "__main__":
    main()
