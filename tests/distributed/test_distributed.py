"""``fusegrad.distributed`` on a real ``LocalCluster`` of two worker processes.

Gradients must equal the single-process gradient to 1e-12 (float64) with equal and
unequal chunks, for sums and means; workers compile each shipped function once and
never trace; a worker killed mid-computation is replaced and the result is still
right; a loss that is not a sum or mean over examples is refused with a clear error.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import fusegrad as fg  # noqa: E402
import fusegrad.numpy as fnp  # noqa: E402
from fusegrad import distributed as fd  # noqa: E402

pytestmark = pytest.mark.compiled


def mean_loss(w, X, y):
    z = X @ w["w"] + w["b"]
    return fnp.mean(fnp.logaddexp(0, -y * z))


def sum_loss(w, X, y):
    z = X @ w["w"] + w["b"]
    return fnp.sum(fnp.logaddexp(0, -y * z))


def _data(n=2000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sign(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n))
    params = {"w": 0.1 * rng.standard_normal(d), "b": np.array(0.05)}
    return X, y, params


@pytest.fixture(scope="module", params=["spawn", "fork"])
def client(request):
    with dask.config.set({"distributed.worker.multiprocessing-method": request.param}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=40)
        c = distributed.Client(cluster)
    c.wait_for_workers(2, timeout=120)  # a worker that cannot start fails here, not hangs
    yield c
    c.close()
    cluster.close()


def _assert_tree_close(a, b, rtol=1e-12):
    for k in b:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=1e-14)


@pytest.mark.parametrize("loss", [mean_loss, sum_loss])
@pytest.mark.parametrize("chunks", [500, (700, 300, 650, 1, 349)])
def test_gradient_equals_single_process(client, loss, chunks):
    X, y, params = _data()
    Xd, yd = da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks)
    value, grads = fd.value_and_grad(loss, params, Xd, yd)
    v0, g0 = fg.value_and_grad(loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)
    assert set(client.has_what()) and all(client.nthreads().values())


def test_numpy_data_follows_the_dask_chunks(client):
    X, y, params = _data(n=900)
    value, grads = fd.value_and_grad(mean_loss, params, da.from_array(X, chunks=(250, -1)), y)
    v0, g0 = fg.value_and_grad(mean_loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)


def test_workers_compile_once_and_never_trace(client):
    X, y, params = _data(n=1200, seed=3)
    Xd, yd = da.from_array(X, chunks=(300, -1)), da.from_array(y, chunks=300)

    def loss(w, X, y):  # a function no other test ships
        return fnp.mean((X @ w["w"] + w["b"] - y) ** 2)

    client.run(fg.compile_stats, True)  # forked workers start with the parent's counters
    fd.value_and_grad(loss, params, Xd, yd)
    before = fd.compile_stats(client)
    fd.value_and_grad(loss, {k: v + 1 for k, v in params.items()}, Xd, yd)
    after = fd.compile_stats(client)
    assert after == before  # the second call: no trace, no compile, on any worker
    assert all(s["traces"].get("loss", 0) == 0 for s in after.values())
    assert sum(s["compiles"].get("loss_grad", 0) for s in after.values()) <= 2


def test_fit_second_step_compiles_nothing(client):
    X, y, params = _data(n=1600, seed=1)
    Xd, yd = da.from_array(X, chunks=(400, -1)), da.from_array(y, chunks=400)
    stats = []
    result = fd.fit(mean_loss, params, (Xd, yd), optimizer=fg.optim.adam(0.05), epochs=3,
                    callback=lambda step, value, p: stats.append(fd.compile_stats(client)))
    assert stats[1] == stats[0] and stats[2] == stats[1]
    assert result.losses[-1] < result.losses[0]
    # the same steps on one process, with the same optimizer
    opt = fg.optim.adam(0.05)
    p, state = params, opt.init(params)
    for want in result.losses:
        v, g = fg.value_and_grad(mean_loss)(p, X, y)
        np.testing.assert_allclose(v, want, rtol=1e-12)
        p, state = opt.update(g, state, p)
    _assert_tree_close(result.params, p, rtol=1e-10)


def test_fit_minibatches_of_chunks(client):
    X, y, params = _data(n=1000, seed=2)
    Xd, yd = da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250)
    result = fd.fit(mean_loss, params, (Xd, yd), optimizer=fg.optim.sgd(0.5), epochs=2,
                    chunks_per_step=2)
    assert len(result.losses) == 4
    p = params
    for step in range(4):
        part = slice(500 * (step % 2), 500 * (step % 2) + 500)
        v, g = fg.value_and_grad(mean_loss)(p, X[part], y[part])
        np.testing.assert_allclose(v, result.losses[step], rtol=1e-12)
        p = {k: p[k] - 0.5 * g[k] for k in p}
    _assert_tree_close(result.params, p, rtol=1e-10)


def test_map_grad(client):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 3))
    batch = {"w": rng.standard_normal((9, 3)), "s": rng.uniform(0.5, 2, 9)}

    def f(p, X):
        return fnp.sum(fnp.tanh(X @ p["w"]) * p["s"] ** 2)

    values, grads = fd.map_grad(f, batch, X, return_value=True)
    g1 = fg.value_and_grad(f)
    for i in range(9):
        v, g = g1({"w": batch["w"][i], "s": batch["s"][i]}, X)
        np.testing.assert_allclose(values[i], v, rtol=1e-12)
        np.testing.assert_allclose(grads["w"][i], g["w"], rtol=1e-12)
        np.testing.assert_allclose(grads["s"][i], g["s"], rtol=1e-12)


def _die_once(block, marker):
    """Kill the worker process computing the first block it sees, once per marker file
    (dask calls this on an empty block to infer metadata: that one passes)."""
    if block.size == 0:
        return block
    try:
        fd_ = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return block
    os.close(fd_)
    os._exit(1)


def test_killed_worker_is_replaced_and_the_result_is_right(client, tmp_path):
    X, y, params = _data(n=1200, seed=5)
    Xd = da.from_array(X, chunks=(200, -1)).map_blocks(_die_once, str(tmp_path / "died"),
                                                       dtype=X.dtype)
    yd = da.from_array(y, chunks=200)
    value, grads = fd.value_and_grad(mean_loss, params, Xd, yd)
    assert (tmp_path / "died").exists()  # a worker did die mid-computation
    v0, g0 = fg.value_and_grad(mean_loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)
    client.wait_for_workers(2, timeout=60)


def test_loss_that_is_not_a_sum_over_examples_is_refused(client):
    X, y, params = _data(n=400)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)

    def batch_max(w, X, y):
        return fnp.max(X @ w["w"]) + w["b"]

    with pytest.raises(fd.LossStructureError, match="not a sum or mean over the examples"):
        fd.value_and_grad(batch_max, params, Xd, yd)

    def sum_and_regulariser(w, X, y):
        return sum_loss(w, X, y) + 0.1 * fnp.sum(w["w"] ** 2)

    with pytest.raises(fd.LossStructureError, match="regulariser"):
        fd.value_and_grad(sum_and_regulariser, params, Xd, yd)

    def mean_and_regulariser(w, X, y):  # the mean of (example loss + R): splittable
        return mean_loss(w, X, y) + 0.1 * fnp.sum(w["w"] ** 2)

    value, grads = fd.value_and_grad(mean_and_regulariser, params, Xd, yd)
    v0, g0 = fg.value_and_grad(mean_and_regulariser)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)
    with pytest.raises(fd.LossStructureError, match="reduction='sum' was given"):
        fd.value_and_grad(mean_loss, params, Xd, yd, reduction="sum")


def test_without_a_cluster_the_threaded_scheduler_runs_it():
    X, y, params = _data(n=500)
    with dask.config.set(scheduler="threads"):
        value, grads = fd.value_and_grad(sum_loss, params, da.from_array(X, chunks=(120, -1)),
                                         da.from_array(y, chunks=120))
    v0, g0 = fg.value_and_grad(sum_loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)


def test_bad_data_is_refused():
    X, y, params = _data(n=100)
    with pytest.raises(ValueError, match="same number"):
        fd.value_and_grad(mean_loss, params, da.from_array(X, chunks=(50, -1)), y[:90])
    with pytest.raises(TypeError, match="example axis"):
        fd.value_and_grad(mean_loss, params, da.from_array(X, chunks=(50, -1)), np.float64(1))


@pytest.mark.parametrize("loss", [mean_loss, sum_loss])
def test_chunks_larger_than_a_cache_block_are_summed_block_by_block(client, loss, monkeypatch):
    from fusegrad.distributed import grad as dgrad

    monkeypatch.setattr(dgrad, "BLOCK_BYTES", 1)  # 256 examples per compiled call
    X, y, params = _data(n=1500, seed=6)
    Xd, yd = da.from_array(X, chunks=((700, 300, 500), -1)), da.from_array(y, chunks=700)
    value, grads = fd.value_and_grad(loss, params, Xd, yd)
    v0, g0 = fg.value_and_grad(loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)


@pytest.mark.parametrize("split_every, inline", [(None, True), (2, True), (3, False)])
def test_reduction_tree_shapes_and_shared_arguments(client, split_every, inline, monkeypatch):
    """Any tree (one level summed by the client, or several on the workers) and shared
    arguments inside each task or as a task of their own give the same gradient; small
    shared arguments make no task of their own."""
    from fusegrad.distributed import grad as dgrad

    if not inline:
        monkeypatch.setattr(dgrad, "INLINE_BYTES", 0)
    X, y, params = _data(n=2100, seed=8)
    Xd, yd = da.from_array(X, chunks=(50, -1)), da.from_array(y, chunks=50)  # 42 chunks
    data = dgrad.as_dask([Xd, yd], "test")
    parts, _, n = dgrad.graph(mean_loss, params, data, "mean", None, split_every, "test")
    width = split_every or 32
    assert n == 2100 and 1 <= len(parts) <= width
    keys = [k for p in parts for k in dict(p.__dask_graph__())]
    own = [k for k in keys if str(k if isinstance(k, str) else k[0]).startswith(("list", "tuple"))]
    assert (own == []) == inline
    value, grads = fd.value_and_grad(mean_loss, params, Xd, yd, split_every=split_every)
    v0, g0 = fg.value_and_grad(mean_loss)(params, X, y)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    _assert_tree_close(grads, g0)


def test_fan_in_follows_the_gradient_size():
    from fusegrad.distributed import grad as dgrad

    assert dgrad.fan_in(5, [np.zeros(10)]) == 5
    assert dgrad.fan_in(None, [np.zeros(10)]) == 32
    assert dgrad.fan_in(None, [np.zeros((2 << 20) - 2)]) == 4  # 16 MiB with the value
    assert dgrad.fan_in(None, [np.zeros(2 << 20)]) == 3
    assert dgrad.fan_in(None, [np.zeros(32 << 20)]) == 2
