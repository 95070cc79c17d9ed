"""Many independent gradients (``map_grad``) and a data-parallel training loop (``fit``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..tracer.pytree import tree_flatten, tree_unflatten
from ..transforms.jit_api import jit
from ..transforms.plan import _leaf
from .grad import as_dask, cache_for, compute_total, finish, gradient_of, graph, mode_for, shared
from .shipping import Shipped, executable_for


def _block_grads(shipped, leaves, args, free, seed_dtype: str):
    """On a worker: value and gradients for each parameter set of one block."""
    exe = executable_for(Shipped(*shipped))
    seed = np.ones((), np.dtype(seed_dtype))
    n = leaves[0].shape[0]
    values, grads = [], [[] for _ in leaves]
    for b in range(n):
        value, *gs = exe(*[x[b] for x in leaves], *args, *free, seed)
        values.append(np.asarray(value))
        for acc, g in zip(grads, gs):
            acc.append(np.asarray(g))
    return np.stack(values), [np.stack(g) for g in grads]


def _default_blocks() -> int:
    try:
        from distributed import get_client

        return 2 * max(1, sum(get_client().nthreads().values()))
    except (ImportError, ValueError):
        return 4


def map_grad(f: Callable, params_batch, *args, return_value: bool = False,
             blocks: int | None = None):
    """Gradients of scalar ``f(params, *args)`` for every parameter set of ``params_batch``
    (a pytree whose leaves share a leading batch axis), spread over the Dask workers in
    ``blocks`` tasks (default: two per worker thread). ``args`` are shared by all.

    Returns the gradients in ``params_batch``'s structure, each with the batch axis first;
    ``return_value=True`` returns ``(values, gradients)``.
    """
    import dask

    who = "distributed.map_grad"
    leaves, treedef = tree_flatten(params_batch)
    leaves = [np.asarray(_leaf(x)) for x in leaves]
    if not leaves or any(x.ndim == 0 for x in leaves):
        raise TypeError(f"{who}: every leaf of params_batch needs a leading batch axis")
    n = leaves[0].shape[0]
    if any(x.shape[0] != n for x in leaves):
        raise ValueError(f"{who}: the leaves of params_batch have batch sizes "
                         f"{sorted({x.shape[0] for x in leaves})}; they must agree")
    args = tuple(np.asarray(_leaf(a)) for a in args)
    item = tree_unflatten(treedef, [x[0] for x in leaves])
    cache = cache_for(f)
    key = ("map", treedef, tuple((x.shape[1:], x.dtype) for x in leaves),
           tuple((a.shape, a.dtype) for a in args))
    if key not in cache:
        cache[key] = gradient_of(f, item, args, who)
    shipped, free, dtype = cache[key]
    count = max(1, min(n, blocks or _default_blocks()))
    edges = np.linspace(0, n, count + 1).astype(int)
    shipped_d, args_d, free_d = shared(tuple(shipped)), shared(args), shared(free)
    tasks = [dask.delayed(_block_grads, pure=True)(
        shipped_d, [x[a:b] for x in leaves], args_d, free_d, np.dtype(dtype).str)
        for a, b in itertools.pairwise(edges) if b > a]
    done = dask.compute(*tasks)
    values = np.concatenate([v for v, _ in done])
    grads = tree_unflatten(treedef, [np.concatenate([g[i] for _, g in done])
                                     for i in range(len(leaves))])
    return (values, grads) if return_value else grads


class FitResult(NamedTuple):
    """What :func:`fit` returns: the final parameters and optimizer state, and the loss
    of every step (measured before that step's update)."""

    params: Any
    state: Any
    losses: list


def fit(loss: Callable, params, data, *, optimizer, epochs: int = 1,
        chunks_per_step: int | None = None, reduction: str = "auto",
        callback: Callable | None = None, persist: bool = True,
        split_every: int | None = None) -> FitResult:
    """Train ``params`` on Dask data: each step computes the data-parallel value and
    gradient (:func:`value_and_grad`) and applies ``optimizer`` (a functional optimizer
    from ``fg.optim``: ``fg.optim.adam(1e-2)``...) on the client, compiled once.

    ``data`` is a tuple of dask arrays (example axis first). Each epoch takes one step
    over all the data, or, with ``chunks_per_step=k``, one step per group of ``k``
    consecutive chunks (mini-batches of whole chunks). ``persist=True`` keeps the data in
    the workers' memory between steps. Only parameters travel to the workers and only
    gradients come back. ``callback(step, loss, params)`` runs after each step.
    """
    import dask

    who = "distributed.fit"
    if not isinstance(data, tuple | list):
        data = (data,)
    data = as_dask(tuple(data), who)
    if persist:
        data = list(dask.persist(*data))
    if chunks_per_step is not None and chunks_per_step < 1:
        raise ValueError(f"{who}: chunks_per_step must be at least 1, got {chunks_per_step}")
    mode = mode_for(loss, params, data, reduction, who)
    nchunks = len(data[0].chunks[0])
    step_size = nchunks if chunks_per_step is None else chunks_per_step
    groups = [range(i, min(i + step_size, nchunks)) for i in range(0, nchunks, step_size)]
    update = jit(optimizer.update)
    state = optimizer.init(params)
    losses, step = [], 0
    for _ in range(epochs):
        for group in groups:
            parts, treedef, n = graph(loss, params, data, mode, group, split_every, who)
            value, grads = finish(compute_total(parts), treedef, n, mode)
            params, state = update(grads, state, params)
            losses.append(float(value))
            if callback is not None:
                callback(step, float(value), params)
            step += 1
    return FitResult(params, state, losses)
