"""Forward mode through a custom ``Function``: its ``jvp(ctx, *tangents)`` staticmethod.

``Function.apply`` runs ``forward`` with tangent propagation suspended; when an
argument is dual, ``apply_jvp`` calls ``jvp`` with one tangent per argument (zeros
for a floating tensor without one, None for anything else, as PyTorch's
materialised tangents) and gives its results to the outputs as their tangents.
``ctx.save_for_forward`` tensors are ``ctx.saved_tensors`` inside ``jvp``.
"""

from __future__ import annotations

from . import dual
from . import tensor_base as TB


def apply_jvp(cls, ctx, args, outputs):
    tans = [dual.tangent(a) if isinstance(a, TB.TensorBase) else None for a in args]
    if all(t is None for t in tans):
        return outputs
    jvp = getattr(cls, "jvp", None)
    if jvp is None:
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")
    tans = [_zeros(a) if t is None and isinstance(a, TB.TensorBase)
            and a._data.dtype.kind in "fc" else t for a, t in zip(args, tans)]
    ctx._in_jvp = True
    try:
        with dual.suspended():
            out_tans = jvp(ctx, *tans)
    finally:
        ctx._in_jvp = False
    single = not isinstance(outputs, tuple)
    outs = (outputs,) if single else outputs
    out_tans = (out_tans,) if not isinstance(out_tans, tuple) else out_tans
    if len(out_tans) != len(outs):
        raise RuntimeError(f"jvp is expected to return as many tangents as forward has outputs "
                           f"({len(outs)}), got {len(out_tans)}")
    new = []
    for o, t in zip(outs, out_tans):
        if isinstance(o, TB.TensorBase) and any(o is a for a in args):
            o = o.view_as(o)  # an input returned as-is: its own object for its tangent
        if isinstance(o, TB.TensorBase) and t is not None and o._data.dtype.kind in "fc":
            if tuple(t.shape) != tuple(o.shape):
                raise RuntimeError(f"jvp returned a tangent of shape {list(t.shape)} for an "
                                   f"output of shape {list(o.shape)}")
            dual.set_tangent(o, dual.fit(t, o))
        new.append(o)
    return new[0] if single else tuple(new)


def _zeros(a):
    import numpy as np

    return TB.make(np.zeros_like(a._data))
