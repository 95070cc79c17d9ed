"""The per-call fast path of a compiled Executable, for calls with a signature seen before.

``Executable.call_unchecked`` is general: it converts 0-d arguments, takes an arena
from the buffer pool (under a lock), checks compilation state, picks the parallel
entry, switches BLAS threads, checks for rare inputs and converts every result. For
the common call (``fg.grad(f)(x)`` with the same shapes again) most of that is known
once the first call has compiled the serial entry: ``hot_call`` builds a closure
that does only what varies per call.

- Which arguments are 0-d (passed to the entry as scalars) and which results are 0-d
  (returned as scalars, converted to 0-d arrays) follow from the Function's types.
- Constant trailing arguments (``extra``: the seed cotangent of a gradient) are
  converted once.
- The arena: a small one is kept in a one-element list beside the closure and taken
  with ``list.pop`` (atomic under the GIL), so a single-threaded caller takes no
  lock; a concurrent caller finding it taken uses the pool as before. Large arenas
  always go through the pool, whose byte limit then applies.
- Results are fresh arrays, as from the general call: arena arrays are scratch and
  never results, so the next call cannot overwrite what this one returned.

Anything unusual takes ``call_unchecked``: the entry not compiled yet (or reloaded
after a damaged cache entry), ``FUSEGRAD_DEBUG_NANS``, an exception from the entry
(the general call re-runs and raises the precise error), inputs the fast entry flags
as rare (the general call runs the exact entry). The entry is still called through
its Numba dispatcher, which costs about 0.15 us over its bare entry point but checks
each array's layout and writeability, which a (shape, dtype) key does not pin down.
"""

from __future__ import annotations

import numpy as np

from .. import config

#: arenas of at most this many bytes are kept beside the fast caller (outside the
#: pool's byte accounting); larger ones are taken from the pool on every call
HOT_ARENA_MAX = 1 << 16


def hot_call(exe, extra: tuple = ()):
    """A callable ``(args, first) -> sequence`` running ``exe`` on ``(*args, *extra)``
    (ndarrays of the right types) and returning its results from ``first`` on."""
    params = exe.fn.params
    nargs = len(params) - len(extra)
    scalar_args = tuple(i for i in range(nargs) if params[i].type.shape == ())
    consts = tuple(a[()] if np.ndim(a) == 0 else a for a in extra)
    out_dtypes = exe.out_dtypes
    nout = len(out_dtypes)
    rare = exe.rare
    dims = exe.dims
    pool = exe.pool
    spare: list = []  # at most about one arena per concurrently running thread
    keep_spare = pool is not None and pool.arena_bytes <= HOT_ARENA_MAX
    slow = exe.call_unchecked

    def general(args, first):
        return slow((*args, *extra))[first:]

    arrays_from = next((i for i in range(nout, 0, -1) if exe.fn.out_types[i - 1].shape == ()),
                       0)  # the results from here on are arrays of one or more dimensions

    def finish(out, first):
        """The results from ``first`` on, as ``call_unchecked`` returns them."""
        res = []  # (a tuple slice when all of them are arrays: no conversion)
        for i in range(first, nout):
            r = out[i]
            res.append(r if type(r) is np.ndarray else np.asarray(r, dtype=out_dtypes[i]))
        return res

    if pool is None:
        def call(args, first=0):
            if not exe.warm or config.DEBUG_NANS:
                return general(args, first)
            conv = args
            if scalar_args:
                conv = list(args)
                for i in scalar_args:
                    conv[i] = conv[i][()]
            try:
                out = exe.entry(dims, *conv, *consts)
            except Exception:
                return general(args, first)
            if rare and out[-1]:
                return general(args, first)
            return out[first:nout] if first >= arrays_from else finish(out, first)

        return call

    def call(args, first=0):  # the variant with an arena
        if not exe.warm or config.DEBUG_NANS:
            return general(args, first)
        conv = args
        if scalar_args:
            conv = list(args)
            for i in scalar_args:
                conv[i] = conv[i][()]
        try:
            arena = spare.pop()
        except IndexError:
            arena = pool.take()
        try:
            out = exe.entry(dims, *conv, *consts, *arena)
        except Exception:
            pool.give(arena)
            return general(args, first)
        if keep_spare and not spare:
            spare.append(arena)
        else:
            pool.give(arena)
        if rare and out[-1]:
            return general(args, first)
        return out[first:nout] if first >= arrays_from else finish(out, first)

    return call
