"""Forward-mode checks: JVP against finite differences, and JVP against VJP.

Tolerances are ``tests.helpers``' (one policy for the suite).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fusegrad.ir import Function, evaluate
from fusegrad.ir.verifier import verify
from fusegrad.passes.autodiff import jvp, vjp
from tests.helpers import (
    FD_STEP,
    as_function,
    assert_close,
    float_params,
    normal_like,
    pair,
    random_cotangents,
)


def random_tangents(fn: Function, wrt: Sequence[int], args, rng) -> list[np.ndarray]:
    """One tangent per ``wrt`` input, scaled so that max|u| <= 1 (finite differences
    stay within ``2 * step`` of the point, as ``check_grads`` assumes)."""
    u = [normal_like(rng, np.shape(args[i]), np.complex128) if np.iscomplexobj(args[i])
         else rng.standard_normal(np.shape(args[i])) for i in wrt]
    size = max([1.0, *(np.abs(d).max(initial=0.0) for d in u)])
    return [d / size for d in u]


def check_jvp(
    fn: Function | Callable,
    args: Sequence[np.ndarray],
    *,
    wrt: Sequence[int] | None = None,
    order: int = 1,
    seed: int = 0,
    step: float = FD_STEP,
) -> None:
    """Check ``jvp(fn, wrt)`` against central finite differences, to ``order``.

    Every tangent result ``J u`` (random ``u``) must equal the 4-point central
    difference of the corresponding result along ``u`` (tolerance ``"fd"``);
    the primal results must equal ``fn``'s; the JVP Function must verify. For
    ``order=2`` the same check runs on ``jvp(fn, wrt)`` as a function of the
    primal inputs, its tangent inputs held fixed: that checks
    ``jvp(jvp(fn, wrt), wrt)``.
    """
    fn = as_function(fn, args)
    args = [np.asarray(a) for a in args]
    wrt = float_params(fn) if wrt is None else tuple(wrt)
    rng = np.random.default_rng(seed)
    u = random_tangents(fn, wrt, args, rng)
    j = jvp(fn, wrt)
    verify(j)
    res = evaluate(j, *args, *u)
    n = len(fn.results)
    where = f"\nin the JVP of:\n{fn}"
    for k, (r, o) in enumerate(zip(res[:n], evaluate(fn, *args))):
        assert_close(r, o, "exact64", f"primal result {k} of the JVP Function{where}")
    h = step * max([1.0, *(np.abs(args[i]).max(initial=0.0) for i in wrt)])

    def along(t: float) -> tuple:
        moved = list(args)
        for i, d in zip(wrt, u):
            moved[i] = args[i] + t * d
        return evaluate(fn, *moved)

    plus, minus, plus2, minus2 = along(h), along(-h), along(2 * h), along(-2 * h)
    for k, t in enumerate(fn.out_types):
        got = np.asarray(res[n + k])
        assert (got.shape, got.dtype) == (t.shape, t.dtype), f"tangent {k}: {got.dtype}{got.shape}"
        if not t.is_inexact:
            continue
        numeric = (8 * (plus[k] - minus[k]) - (plus2[k] - minus2[k])) / (12 * h)
        assert_close(got, numeric, "fd", f"tangent of result {k} vs finite differences{where}")
    if order > 1:
        check_jvp(j, [*args, *u], wrt=wrt, order=order - 1, seed=seed + 1, step=step)


def check_jvp_vjp_agree(fn: Function | Callable, args: Sequence[np.ndarray], *,
                        wrt: Sequence[int] | None = None, seed: int = 0) -> None:
    """``<J u, v>`` from the JVP equals ``<u, J^T v>`` from the VJP (both exact)."""
    fn = as_function(fn, args)
    args = [np.asarray(a) for a in args]
    wrt = float_params(fn) if wrt is None else tuple(wrt)
    rng = np.random.default_rng(seed)
    u = random_tangents(fn, wrt, args, rng)
    v = random_cotangents(fn, rng)
    n = len(fn.results)
    ju = evaluate(jvp(fn, wrt), *args, *u)[n:]
    jtv = evaluate(vjp(fn, wrt), *args, *v)[n:]
    forward = sum(pair(w, t) for w, t in zip(v, ju) if np.issubdtype(w.dtype, np.inexact))
    reverse = sum(pair(d, c) for d, c in zip(u, jtv))
    assert_close(forward, reverse, "exact64", f"<J u, v> (JVP) vs <u, J^T v> (VJP) of:\n{fn}")
