"""Lowering of the ``fft`` op: a ``numba.objmode`` block calling ``rt.fft_call``
(``codegen.rt_fft``, which runs ``scipy.fft``). The block's declared result type
depends on the result's rank and dtype only, and the length ``last`` is read from the
sizes table ``d``, so sizes stay out of the text."""

from __future__ import annotations

from ..ir import Op


def fft_lines(w, op: Op, names) -> list[str]:
    out = op.results[0]
    t = out.type
    dims = ", ".join([":"] * (t.ndim - 1) + ["::1"])
    a = op.attrs
    call = (f"rt.fft_call({names[op.operands[0]]}, {a['kind']!r}, {tuple(a['axes'])!r}, "
            f"{w.number(int(a['last']))}, {a['norm']!r})")
    return [f"    with numba.objmode({names[out]}=\"{t.dtype.name}[{dims}]\"):",
            f"        {names[out]} = {call}"]
