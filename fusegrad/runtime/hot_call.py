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
- The arena: a small one is kept (with the constants, as the tuple of trailing
  arguments) in a one-element list beside the closure and taken with ``list.pop``
  (atomic under the GIL), so a single-threaded caller takes no lock; a concurrent
  caller finding it taken uses the pool as before. Large arenas
  always go through the pool, whose byte limit then applies.
- Calls whose products are all small (``Executable.serial_blas``) run the entry
  inside ``blas_threads.serial()``, as the general call does.
- Results are fresh arrays, as from the general call: arena arrays are scratch and
  never results, so the next call cannot overwrite what this one returned.

Anything unusual takes ``call_unchecked``: the entry not compiled yet (or reloaded
after a damaged cache entry), ``FUSEGRAD_DEBUG_NANS``, an exception from the entry
(the general call re-runs and raises the precise error), inputs the fast entry flags
as rare (the general call runs the exact entry).

Numba's dispatcher types every argument (the arena's and the sizes table's too) to
pick the machine code: about 0.12 us per call here. Once compiled, the closure calls
the entry point of the overload for the usual arrays (C-contiguous, aligned,
writeable: ``flags.carray``) directly; an argument that is not such an array (a
strided view, a read-only array) goes through the dispatcher, which picks (or
compiles) the overload of its layout, as the general call would.
"""

from __future__ import annotations

import numpy as np

from .. import config
from . import blas_threads

#: arenas of at most this many bytes are kept beside the fast caller (outside the
#: pool's byte accounting); larger ones are taken from the pool on every call
HOT_ARENA_MAX = 1 << 16


def hot_call(exe, extra: tuple = ()):
    """A callable ``(args, first) -> sequence`` running ``exe`` on ``(*args, *extra)``
    (ndarrays of the right types) and returning its results from ``first`` on."""
    params = exe.fn.params
    nargs = len(params) - len(extra)
    scalar_args = tuple(i for i in range(nargs) if params[i].type.shape == ())
    array_args = tuple(i for i in range(nargs) if params[i].type.shape != ())
    consts = tuple(a[()] if np.ndim(a) == 0 else a for a in extra)
    out_types = exe.fn.out_types
    nout = len(out_types)
    arrays_from = next((i for i in range(nout, 0, -1) if out_types[i - 1].shape == ()),
                       0)  # the results from here on are arrays of one or more dimensions
    rare = exe.rare
    dims = exe.dims
    pool = exe.pool
    spare: list = []  # at most about one arena per concurrently running thread
    keep_spare = pool is not None and pool.arena_bytes <= HOT_ARENA_MAX
    slow = exe.call_unchecked
    serial = blas_threads.serial() if exe.serial_blas else None  # one BLAS thread
    #: what to call once the serial entry is compiled: the machine code's entry point
    #: for C-contiguous, aligned, writeable arrays (the arrays of ``np.empty``), else the
    #: dispatcher itself; None again when the Executable reloads its module
    state: list = [None]
    exe.hot_states.append(state)

    def resolve():
        import numba

        disp = exe.entry
        if not hasattr(disp, "overloads"):  # not a Numba dispatcher (a wrapper): call it
            return disp
        sample = [params[i].type.dtype.type(0) if i in scalar_args
                  else np.empty(params[i].type.shape, params[i].type.dtype)
                  for i in range(nargs)]
        arena = [np.empty(s.shape, s.dtype) for s in pool.plan.arena] if pool else []
        sig = tuple(numba.typeof(a) for a in (dims, *sample, *consts, *arena))
        cres = disp.overloads.get(sig)
        return disp if cres is None else cres.entry_point

    def general(args, first):
        out = slow((*args, *extra))[first:]
        if state[0] is None and exe.warm and not config.DEBUG_NANS:
            state[0] = resolve()
        return out

    scalar_outs = tuple((i, out_types[i].dtype) for i in range(nout)
                        if out_types[i].shape == ())

    def finish(out, first):
        """The results from ``first`` on, as ``call_unchecked`` returns them: 0-d results
        (Numba returns scalars) as 0-d arrays (a tuple slice when all are arrays)."""
        res = list(out[first:nout])
        for i, dtype in scalar_outs:
            if i >= first:
                res[i - first] = np.asarray(res[i - first], dtype=dtype)
        return res

    one_array = array_args[0] if len(array_args) == 1 else None
    ncons = len(consts)

    def call(args, first=0):
        callee = state[0]
        if callee is None or config.DEBUG_NANS:
            return general(args, first)  # not compiled (or reloaded) yet, or checking NaNs
        # Numba's own type of each array: the dispatcher decides unless C-contiguous
        if one_array is not None:
            if not args[one_array].flags.carray:
                callee = exe.entry
        else:
            for i in array_args:
                if not args[i].flags.carray:
                    callee = exe.entry
                    break
        conv = args
        if scalar_args:
            conv = list(args)
            for i in scalar_args:
                conv[i] = conv[i][()]
        if serial is not None:
            serial.__enter__()
        try:
            out = _run(callee, conv)
        finally:
            if serial is not None:
                serial.__exit__(None, None, None)
        if out is None:
            return general(args, first)
        if rare and out[-1]:
            return general(args, first)  # inputs the fast entry gets wrong: the exact one
        return out[first:nout] if first >= arrays_from else finish(out, first)

    def _run(callee, conv):
        """The entry's results, or None when the general call must run instead."""
        if pool is None:
            try:
                return callee(dims, *conv, *consts)
            except Exception:
                return None  # re-run: the interpreter raises the precise error
        else:
            try:
                tail = spare.pop()  # the constants and an arena
            except IndexError:
                tail = (*consts, *pool.take())
            try:
                out = callee(dims, *conv, *tail)
            except Exception:
                pool.give(list(tail[ncons:]))
                return None
            if keep_spare and not spare:
                spare.append(tail)
            else:
                pool.give(list(tail[ncons:]))
            return out

    return call
