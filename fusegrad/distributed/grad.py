"""Data-parallel value and gradient of a loss summed or averaged over examples.

``value_and_grad(loss, params, *data)``: ``data`` are ``dask.array``s (NumPy arrays are
wrapped) whose axis 0 is the example axis, chunked alike along it. Each chunk becomes
one task computing ``loss(params, *chunk)`` and its gradient with compiled code on a
worker; the tasks' results are summed in a tree of ``split_every``-way additions. For
a mean, each chunk's value and gradient are weighted by its number of examples and the
total is divided by their sum, so unequal chunks give the exact full-data mean.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..ir import TensorType
from ..ir.errors import FusegradError
from ..tracer import trace_pytree
from ..tracer.pytree import tree_flatten, tree_unflatten
from ..transforms.plan import _leaf, vjp_pass, warn_effects
from .shipping import Shipped, executable_for, ship


class LossStructureError(FusegradError, ValueError):
    """The loss is not a sum or a mean over the examples, so it cannot be split by chunk."""


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cache_for(fn) -> dict:
    """The client-side cache of traces for ``fn`` (a throwaway dict if ``fn`` cannot
    be weakly referenced)."""
    try:
        return _CACHE.setdefault(fn, {})
    except TypeError:
        return {}


def as_dask(data, who: str) -> list:
    """``data`` as dask arrays chunked alike along axis 0 and not at all along the others."""
    import dask.array as da

    if not data:
        raise TypeError(f"{who}: pass the data arrays after params (example axis first)")
    data = [a if isinstance(a, da.Array) else np.asarray(a) for a in data]
    for i, a in enumerate(data):
        if a.ndim == 0:
            raise TypeError(f"{who}: data argument {i} is a scalar; every data array needs "
                            "an example axis (axis 0)")
        if isinstance(a, da.Array) and any(np.isnan(c) for c in a.chunks[0]):
            raise ValueError(f"{who}: data argument {i} has chunks of unknown size; call "
                             ".compute_chunk_sizes() on it first")
        if a.shape[0] != data[0].shape[0]:
            raise ValueError(f"{who}: data arguments 0 and {i} have {data[0].shape[0]} and "
                             f"{a.shape[0]} examples (axis 0); they must have the same number")
    first = next((a for a in data if isinstance(a, da.Array)), None)
    rows = first.chunks[0] if first is not None else (data[0].shape[0],)
    out = [a if isinstance(a, da.Array) else da.from_array(a, chunks=(rows, *a.shape[1:]))
           for a in data]
    return [a.rechunk({0: rows, **{ax: -1 for ax in range(1, a.ndim)}}) for a in out]


def param_leaves(params, who: str) -> tuple[list[np.ndarray], object]:
    leaves, treedef = tree_flatten(params)
    leaves = [_leaf(x) for x in leaves]
    for i, x in enumerate(leaves):
        if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{who}: parameter leaf {i} is {getattr(x, 'dtype', type(x))}; "
                            "parameters must be floating-point arrays")
    return leaves, treedef


def gradient_of(fn, params_tree, others, who: str) -> tuple[Shipped, tuple, np.dtype]:
    """Trace ``fn(params, *others)`` (``others``: arrays or TensorTypes), differentiate
    w.r.t. every leaf of ``params``: the shipped gradient Function (it returns the value,
    then the gradients), its closed-over arrays, and the loss dtype."""
    traced = trace_pytree(fn, (params_tree, *others), name=getattr(fn, "__name__", "loss"))
    warn_effects(who, fn, traced, jit=True)
    f = traced.function
    if traced.out_tree.num_leaves != 1 or f.out_types[0].shape != () or not f.out_types[0].is_float:
        raise LossStructureError(f"{who}: the loss must return one floating-point scalar, "
                                 f"got {traced.out_tree} of {list(map(str, f.out_types))}")
    if any(not isinstance(x, np.ndarray | np.generic) for x in traced.free):
        raise TypeError(f"{who}: the loss closes over a traced value; it cannot run inside "
                        "another fusegrad transform")
    n = len(tree_flatten(params_tree)[0])
    g = vjp_pass(f, list(range(n)), seeds=(0,), name=f"{f.name}_grad")
    return ship(g), tuple(np.asarray(x) for x in traced.free), f.out_types[0].dtype


# --- the loss's structure -------------------------------------------------------------


def _close(a: float, b: float, scale: float, dtype) -> bool:
    return abs(a - b) <= np.sqrt(np.finfo(dtype).eps) * max(scale, 1e-300)


def reduction_of(loss, params, data, reduction: str, who: str) -> str:
    """``"sum"`` or ``"mean"``: what ``loss`` does over the examples, checked on the first
    examples at ``params`` and at a perturbed point (``reduction`` = "auto" detects it)."""
    if reduction not in ("auto", "sum", "mean"):
        raise ValueError(f"{who}: reduction must be 'auto', 'sum' or 'mean', got {reduction!r}")
    import dask

    m = min(64, data[0].shape[0])
    if m < 2:  # one example: its sum is its mean
        return "mean" if reduction == "auto" else reduction
    rows = dask.compute(*[a[:m] for a in data])
    k = m // 2
    leaves, treedef = tree_flatten(params)
    rng = np.random.default_rng(0)
    moved = [np.asarray(x) + 0.1 * (1 + np.abs(x)) * rng.standard_normal(np.shape(x))
             for x in leaves]
    is_sum = is_mean = True
    for point in (params, tree_unflatten(treedef, [x.astype(np.asarray(y).dtype)
                                                   for x, y in zip(moved, leaves)])):
        full = float(loss(point, *rows))
        a = float(loss(point, *[r[:k] for r in rows]))
        b = float(loss(point, *[r[k:] for r in rows]))
        dtype = np.result_type(*[np.asarray(x).dtype for x in leaves], *[r.dtype for r in rows])
        dtype = dtype if np.issubdtype(dtype, np.floating) else np.float64
        scale = abs(full) + abs(a) + abs(b)
        is_sum &= _close(full, a + b, scale, dtype)
        is_mean &= _close(full, (k * a + (m - k) * b) / m, scale, dtype)
        detail = (f"on the first {m} examples the loss is {full:.6g}; on the first {k} it is "
                  f"{a:.6g} and on the other {m - k} {b:.6g}, whose sum is {a + b:.6g} and "
                  f"weighted mean {(k * a + (m - k) * b) / m:.6g}")
    found = "sum" if is_sum and not is_mean else "mean" if is_mean and not is_sum else None
    if reduction == "auto" and found is not None:
        return found
    if reduction != "auto" and (is_sum if reduction == "sum" else is_mean):
        return reduction
    if is_sum and is_mean:
        raise LossStructureError(
            f"{who}: cannot tell whether the loss is a sum or a mean over the examples "
            f"({detail}); pass reduction='sum' or reduction='mean'")
    claim = "" if reduction == "auto" else f" (reduction={reduction!r} was given)"
    raise LossStructureError(
        f"{who}: loss(params, *data) is not a {'sum or mean' if reduction == 'auto' else reduction}"
        f" over the examples (axis 0 of the data){claim}: {detail}. Only such a loss can be "
        "split into chunks. A loss that mixes examples (a product or maximum over them, a "
        "normalisation across the batch) cannot; a term that does not depend on the data (a "
        "regulariser) can be computed on the client and added to the value and gradient "
        "returned here.")


# --- the task graph -----------------------------------------------------------------


#: bytes of data one compiled call reads: a block this size stays in a core's L2 cache
#: between the passes a gradient makes over it (the forward product, then its transpose),
#: so memory is read once, not twice. Every gradient takes blocks of this size
BLOCK_BYTES = 3 << 19


def rows_per_call(data) -> int:
    """How many examples one compiled call on a worker takes (:data:`BLOCK_BYTES` of data,
    at least 256)."""
    row = sum(int(np.prod(a.shape[1:], dtype=np.int64)) * a.dtype.itemsize for a in data)
    return max(256, BLOCK_BYTES // max(row, 1))


def chunk_value_and_grad(shipped, mean: bool, leaves, frees, seed_dtype: str, block: int,
                         *arrays):
    """On a worker: one chunk's value and gradients (times its example count for a mean),
    computed ``block`` examples per compiled call and summed. ``shipped``/``frees``: the
    gradient Function (and its closed-over arrays) for a full block, then for the last,
    shorter one (None if the chunk divides evenly)."""
    seed = np.ones((), np.dtype(seed_dtype))
    n = arrays[0].shape[0]
    total = None
    for start in range(0, n, block):
        part = [np.ascontiguousarray(a[start:start + block]) for a in arrays]
        which = 0 if part[0].shape[0] == block else 1
        outs = executable_for(Shipped(*shipped[which]))(*leaves, *part, *frees[which], seed)
        w = part[0].shape[0] if mean else 1
        outs = [np.array(np.asarray(o) * w) for o in outs]  # 0-d arrays stay arrays
        if total is None:
            total = outs
        else:
            for t, o in zip(total, outs):
                t += o
    return total


#: shared task arguments (parameters, the shipped text, closed-over arrays) up to this
#: many bytes travel inside every chunk's task; larger ones become one task of their own
#: that the chunk tasks wait for (a scheduling round, a few ms, saved when small)
INLINE_BYTES = 1 << 20

#: bytes of partial results one addition of the reduction tree takes at most: its
#: fan-in, when ``split_every`` is not given, is as wide as this allows (up to 32), so
#: the small gradients of most models are summed in one level
REDUCE_BYTES = 64 << 20


def nbytes(obj) -> int:
    """Bytes of the arrays and strings in a nest of lists and tuples."""
    if isinstance(obj, list | tuple):
        return sum(nbytes(x) for x in obj)
    if isinstance(obj, str):
        return len(obj)
    return int(getattr(obj, "nbytes", 0))


def shared(obj):
    """``obj`` as an argument of many tasks: itself if small (:data:`INLINE_BYTES`),
    else one delayed object computed once."""
    import dask

    return obj if nbytes(obj) <= INLINE_BYTES else dask.delayed(obj, pure=True)


def part_bytes(leaves) -> int:
    """Bytes of one partial result ``[value, *gradients]`` for parameters ``leaves``."""
    return 16 + nbytes(leaves)


def fan_in(split_every: int | None, leaves) -> int:
    """``split_every``, or the widest fan-in (2..32) whose inputs fit in
    :data:`REDUCE_BYTES` for partial results shaped like ``leaves`` (and a value)."""
    if split_every is not None:
        return split_every
    return max(2, min(32, REDUCE_BYTES // part_bytes(leaves)))


def add_parts(*parts):
    """Element-wise sum of several chunks' ``[value, *gradients]`` lists."""
    total = [np.array(p, copy=True) for p in parts[0]]
    for part in parts[1:]:
        for t, p in zip(total, part):
            t += p
    return total


def graph(loss, params, data, mode: str, chunks=None, split_every: int | None = None,
          who: str = ""):
    """The top of a tree of ``split_every``-way additions (:func:`fan_in`) of the delayed
    ``[value, *gradients]`` of the chunks numbered ``chunks`` (all if None): at most
    ``split_every`` delayed sums, small enough (:data:`INLINE_BYTES` together) for the
    client to add (:func:`compute_total`); and the number of examples they hold."""
    import dask

    leaves, treedef = param_leaves(params, who)
    rows = data[0].chunks[0]
    chunks = range(len(rows)) if chunks is None else chunks
    blocks = [a.to_delayed().reshape(-1) for a in data]
    cache = cache_for(loss)
    leaves_d = shared(leaves)
    split_every = fan_in(split_every, leaves)
    block = rows_per_call(data)
    parts = []
    for i in chunks:
        size = min(block, rows[i])
        shipped, frees = [], []
        for r in (size, rows[i] % size):
            if r == 0:
                shipped.append(None)
                frees.append(())
                continue
            types = [TensorType((r, *a.shape[1:]), a.dtype) for a in data]
            key = ("chunk", treedef, tuple((x.shape, x.dtype) for x in leaves), tuple(types))
            if key not in cache:
                cache[key] = gradient_of(loss, tree_unflatten(treedef, leaves), types, who)
            text, free, dtype = cache[key]
            shipped.append(tuple(text))
            frees.append(free)
        parts.append(dask.delayed(chunk_value_and_grad, pure=True)(
            shared(shipped), mode == "mean", leaves_d, shared(frees), np.dtype(dtype).str, size,
            *[b[i] for b in blocks]))
    part = part_bytes(leaves)
    while len(parts) > split_every or (len(parts) > 1 and len(parts) * part > INLINE_BYTES):
        parts = [dask.delayed(add_parts, pure=True)(*parts[j:j + split_every])
                 for j in range(0, len(parts), split_every)]
    return parts, treedef, sum(rows[i] for i in chunks)


def compute_total(parts) -> list:
    """Compute the tree's top ``parts`` and add them here: the last level of the tree
    costs the client a gather, not another scheduling round on the workers."""
    import dask

    return add_parts(*dask.compute(*parts))


def finish(total, treedef, n: int, mode: str):
    value, *grads = total
    if mode == "mean":
        value, grads = value / n, [g / n for g in grads]
    return np.asarray(value), tree_unflatten(treedef, grads)


def value_and_grad(loss, params, *data, reduction: str = "auto",
                   split_every: int | None = None):
    """``(loss(params, *data), gradient w.r.t. params)`` computed chunk by chunk on Dask.

    ``loss(params, *data)`` must be a sum or a mean over the examples (axis 0 of every
    data array); ``reduction="auto"`` finds which on the first examples, and a loss that
    is neither raises :class:`LossStructureError`. ``data`` are ``dask.array``s chunked
    alike along axis 0 (NumPy arrays are chunked like the first dask array). The chunks'
    results are added ``split_every`` at a time (default: as many as 64 MiB of partial
    gradients allows, at most 32). Runs on the active Dask scheduler. Returns NumPy
    arrays: the value, and the gradient in the structure of ``params``.
    """
    who = "distributed.value_and_grad"
    if split_every is not None and split_every < 2:
        raise ValueError(f"{who}: split_every must be at least 2, got {split_every}")
    data = as_dask(data, who)
    mode = mode_for(loss, params, data, reduction, who)
    parts, treedef, n = graph(loss, params, data, mode, None, split_every, who)
    return finish(compute_total(parts), treedef, n, mode)


def mode_for(loss, params, data, reduction: str, who: str) -> str:
    """:func:`reduction_of`, remembered per loss, parameter structure and data types."""
    leaves, treedef = param_leaves(params, who)
    key = ("mode", reduction, treedef, tuple((x.shape, x.dtype) for x in leaves),
           tuple((a.shape[1:], a.dtype) for a in data))
    cache = cache_for(loss)
    if key not in cache:
        cache[key] = reduction_of(loss, params, data, reduction, who)
    return cache[key]
