"""``fusegrad.scipy.integrate.odeint``: an adaptive ODE solve with gradients by the
adjoint method.

The forward solve is an explicit Runge-Kutta 5(4) pair (Dormand and Prince, 1980) with
adaptive steps, written with ``fg.scan`` over the output times and ``fg.while_loop``
over the steps between them, so it traces into one Function and compiles like any other.
Its gradient is not obtained by differentiating the solver's arithmetic: a custom VJP
integrates the adjoint system backwards in time (Pontryagin; Chen et al., 2018)::

    dy/dt = f(y, t, p)            (recomputed backwards from each output)
    da/dt = -a^T df/dy            (a = dL/dy(t); jumps by dL/dy_i at each output time)
    dL/dp = integral of a^T df/dp dt

with the same solver, so gradients cost one more solve, whatever the number of steps,
and the memory does not grow with the steps. The backward solve is itself an
``odeint`` call, so second derivatives use the adjoint method again.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from .. import numpy as fnp
from ..tracer.core import Tracer
from ..transforms.control import scan, while_loop
from ..transforms.jit_api import jit
from ..transforms.reverse import custom_vjp, vjp

__all__ = ["odeint"]

# The Dormand-Prince 5(4) tableau: nodes, stage weights, 5th-order weights (the 7th
# stage is evaluated at the 5th-order solution, so it is the next step's first), and
# the weights of the error estimate (5th- minus 4th-order).
_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0)
_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
)
_B = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84)
_E = (71 / 57600, 0.0, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40)


def _combine(y, h, ws, ks):
    acc = None
    for w, k in zip(ws, ks):
        if w != 0.0:
            acc = w * k if acc is None else acc + w * k
    return y if acc is None else y + h * acc


def _rk_step(f, y, t, h, k1, args):
    """One Dormand-Prince step: the 5th-order solution, its derivative, the error."""
    ks = [k1]
    for c, a in zip(_C[1:], _A[1:]):
        ks.append(f(_combine(y, h, a, ks), t + c * h, *args))
    y5 = _combine(y, h, _B, ks)
    k7 = f(y5, t + h, *args)
    err = h * sum(e * k for e, k in zip(_E, [*ks, k7]) if e != 0.0)
    return y5, k7, err


def _rms(x):
    return fnp.sqrt(fnp.mean(x * x))


def _first_step(f, y0, t0, f0, args, rtol, atol):
    """An initial step size from the size of y and of its first two derivatives."""
    scale = atol + fnp.abs(y0) * rtol
    d0, d1 = _rms(y0 / scale), _rms(f0 / scale)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = fnp.where(small, 1e-6, 0.01 * d0 / fnp.where(small, 1.0, d1))
    f1 = f(y0 + h0 * f0, t0 + h0, *args)
    d2 = _rms((f1 - f0) / scale) / h0
    big = fnp.maximum(d1, d2)
    h1 = fnp.where(big <= 1e-15, fnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / fnp.maximum(big, 1e-15)) ** 0.2)
    return fnp.minimum(100 * h0, h1)


def _solve(f, y0, ts, args, rtol, atol, mxstep, hmax):
    """``y`` at every time of increasing ``ts`` (``y0`` at ``ts[0]``): a (len(ts), n)
    array. An interval that needs more than ``mxstep`` steps gives NaN from there on."""
    t0 = ts[0]
    f0 = f(y0, t0, *args)
    h0 = fnp.minimum(_first_step(f, y0, t0, f0, args, rtol, atol), hmax)

    def interval(carry, t_next):
        y, t, h, k1 = carry

        def more(s):
            _, t, _, _, n = s
            return (t < t_next) & (n < mxstep)

        def step(s):
            y, t, h, k1, n = s
            last = h >= t_next - t
            used = fnp.where(last, t_next - t, h)
            y5, k7, err = _rk_step(f, y, t, used, k1, args)
            tol = atol + rtol * fnp.maximum(fnp.abs(y), fnp.abs(y5))
            ratio = _rms(err / tol)
            ok = ratio <= 1.0
            grow = fnp.clip(0.9 * fnp.maximum(ratio, 1e-10) ** -0.2, 0.2, 10.0)
            y = fnp.where(ok, y5, y)
            k1 = fnp.where(ok, k7, k1)
            t = fnp.where(ok, fnp.where(last, t_next, t + used), t)
            return y, t, fnp.minimum(used * grow, hmax), k1, n + 1

        y, t, h, k1, _ = while_loop(more, step, (y, t, h, k1, np.int64(0)))
        y = fnp.where(t >= t_next, y, np.nan)  # out of steps: say so, never a wrong number
        return (y, t, h, k1), y

    _, ys = scan(interval, (y0, t0, h0, f0), ts[1:])
    return fnp.concatenate([fnp.reshape(y0, (1, -1)), ys], axis=0)


def _flat_args(args):
    return [fnp.reshape(a, (-1,)) for a in args]


def _unflat_args(flat, args):
    out, i = [], 0
    for a in args:
        n = int(np.prod(fnp.shape(a)))
        out.append(fnp.reshape(flat[i:i + n], fnp.shape(a)))
        i += n
    return out


def _make(f, rtol, atol, mxstep, hmax, depth: int = 1):
    """``solve(y0, ts, *args)`` on flat ``y0`` with the adjoint-method VJP.

    The backward solve is itself made with ``depth - 1`` (a VJP's regions are traced when
    the function is called, so the chain must end): at depth 0 the backward solve is
    the plain solver, whose derivative is that of its arithmetic.
    """

    @custom_vjp
    def solve(y0, ts, *args):
        return _solve(f, y0, ts, args, rtol, atol, mxstep, hmax)

    def fwd(y0, ts, *args):
        ys = _solve(f, y0, ts, args, rtol, atol, mxstep, hmax)
        return ys, (ys, ts, args)

    def bwd(res, g):
        ys, ts, args = res
        n = fnp.shape(ys)[1]

        def aug(s, minus_t, *args):
            """The adjoint system in reversed time s = -t: [y, a, p_bar]."""
            y, a = s[:n], s[n:2 * n]
            fy, back = vjp(lambda y, *p: f(y, -minus_t, *p), y, *args)
            a_y, *a_p = back(a)
            return fnp.concatenate([-fy, a_y, *_flat_args(a_p)])

        if depth > 0:
            adjoint = _make(aug, rtol, atol, mxstep, hmax, depth - 1)
        else:
            def adjoint(s0, ss, *p):
                return _solve(aug, s0, ss, p, rtol, atol, mxstep, hmax)
        p0 = fnp.concatenate([fnp.zeros((0,)), *[0.0 * x for x in _flat_args(args)]])

        def back_one(carry, x):
            a, p_bar = carry
            y_i, t_i, t_prev, g_i = x
            a = a + g_i
            t_bar = fnp.sum(f(y_i, t_i, *args) * g_i)
            s = adjoint(fnp.concatenate([y_i, a, p_bar]), fnp.stack([-t_i, -t_prev]), *args)
            return (s[1, n:2 * n], s[1, 2 * n:]), t_bar

        xs = (ys[1:][::-1], ts[1:][::-1], ts[:-1][::-1], g[1:][::-1])
        (a, p_bar), t_bars = scan(back_one, (0.0 * g[0], p0), xs)
        t0_bar = -fnp.sum(a * f(ys[0], ts[0], *args))
        ts_bar = fnp.concatenate([fnp.reshape(t0_bar, (1,)), t_bars[::-1]])
        return (a + g[0], ts_bar, *_unflat_args(p_bar, args))

    solve.defvjp(fwd, bwd)
    return solve


_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def odeint(func, y0, t, args=(), rtol: float = 1.49012e-8, atol: float = 1.49012e-8,
           mxstep: int = 10_000, hmax: float = math.inf, tfirst: bool = False):
    """Integrate ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``; ``y`` at every time
    of ``t`` (increasing), shape ``(len(t), *y0.shape)``: ``scipy.integrate.odeint``'s
    call, differentiable w.r.t. ``y0``, ``t`` and every array of ``args``.

    ``rtol``/``atol`` bound each step's local error (an RMS norm); ``mxstep`` bounds the
    steps between two output times (past it, the results are NaN, not a silently wrong
    number); ``hmax`` bounds the step; ``tfirst=True`` calls ``func(t, y, *args)``.
    Arrays that ``func`` closes over get no gradient: pass them in ``args``.
    The adjoint method recomputes ``y`` backwards in time, which is accurate for the
    non-stiff problems an explicit method is for.
    """
    y0 = fnp.asarray(y0)
    y0 = y0.astype(np.float64) if not np.issubdtype(y0.dtype, np.floating) else y0
    t = fnp.asarray(t)
    t = t.astype(y0.dtype) if not np.issubdtype(t.dtype, np.floating) else t
    if fnp.ndim(t) != 1 or fnp.shape(t)[0] < 1:
        raise ValueError(f"odeint: t must be a 1-D array of output times, got shape "
                         f"{fnp.shape(t)}")
    args = tuple(fnp.asarray(a) for a in (args if isinstance(args, tuple) else (args,)))
    args = tuple(a.astype(y0.dtype) if not np.issubdtype(a.dtype, np.floating) else a
                 for a in args)
    shape = fnp.shape(y0)

    def flat(y, s, *p):
        y = fnp.reshape(y, shape)
        out = func(s, y, *p) if tfirst else func(y, s, *p)
        out = fnp.asarray(out)
        if fnp.shape(out) != shape:
            raise ValueError(f"odeint: func returned shape {fnp.shape(out)} for y of shape "
                             f"{shape}; they must match")
        return fnp.reshape(out.astype(y0.dtype), (-1,))

    operands = (fnp.reshape(y0, (-1,)), t, *args)
    if any(isinstance(x, Tracer) for x in operands):
        ys = _make(flat, rtol, atol, mxstep, hmax)(*operands)
    else:  # concrete: compile the solve once per function, settings and shapes
        key = (shape, y0.dtype, rtol, atol, mxstep, hmax, tfirst)
        try:
            per = _COMPILED.setdefault(func, {})
        except TypeError:
            per = {}
        if key not in per:
            per[key] = jit(lambda y, s, *p: _solve(flat, y, s, p, rtol, atol, mxstep, hmax))
        ys = per[key](*operands)
    return fnp.reshape(ys, (fnp.shape(t)[0], *shape))
