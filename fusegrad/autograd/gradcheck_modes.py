"""``gradcheck``'s checks beyond the backward Jacobian: forward mode, batched gradients
(reverse and forward) and undefined output gradients, with PyTorch's meanings.

fusegrad's eager engine has no forward-mode AD of its own (no ``forward_ad`` dual
tensors): forward-mode derivatives come from tracing the function into IR and running
the forward-mode pass on it (``autograd.batched``). Batched gradients are the traced
eager backward (or forward-mode program) mapped over a batch by the batching pass, as
PyTorch vmaps ``autograd.grad``; they must match one backward (JVP) per batch row.
"""

from __future__ import annotations

import numpy as np

from ..eager import tensor_base as TB
from ..eager.custom_function import Function
from ..eager.engine import grad as autograd_grad
from .batched import NotTraceable, agrees_with_backward, batched_jvp, batched_vjp, jvp_columns

__all__ = ["CheckFailed", "check_backward_mul_by_grad_output", "check_batched_forward_grad",
           "check_batched_grad", "check_forward_ad", "check_undefined_grad"]

_BATCHED_HINT = (
    "gradcheck failed while testing batched gradient computation: the backward was traced "
    "with a cotangent argument and mapped over a batch of cotangents (as vmap of "
    "autograd.grad), which needs a backward written with tensor operations only (no "
    ".item(), .numpy(), Python branches on gradient values or in-place writes to other "
    "tensors). Call gradcheck with check_batched_grad=False to skip this test.")
_BATCHED_FWD_HINT = (
    "gradcheck failed while testing batched gradient computation with forward-mode AD: "
    "the function's forward-mode program was mapped over a batch of tangents. Call "
    "gradcheck with check_batched_forward_grad=False to skip this test.")
_FORWARD_HINT = (
    "fusegrad computes forward-mode derivatives by tracing the function (its eager engine "
    "has no dual tensors), so the function must be traceable and use no custom "
    "autograd.Function. Call gradcheck with check_forward_ad=False to skip this test.")


class CheckFailed(Exception):
    """A failed check: the caller turns it into ``GradcheckError`` (or returns False)."""


def _substitute(func, tupled, diff_pos, float_outputs):
    """``func`` as a function of the differentiable inputs only, returning its float
    outputs."""
    def g(*d):
        args = list(tupled)
        for p, v in zip(diff_pos, d):
            args[p] = v
        return tuple(float_outputs(func(*args)))
    g.__name__ = getattr(func, "__name__", "f").replace("<lambda>", "f")
    return g


def _arrays(xs) -> list[np.ndarray]:
    return [x.detach().numpy() for x in xs]


def _batch_msg(out_idx: int, in_idx: int, got, expected, hint: str) -> str:
    return (f"For output {out_idx} and input {in_idx}:\n\n{hint}\n\nGot:\n{got!r}\n\n"
            f"Expected:\n{expected!r}")


def forward_jacobian(func, tupled, diff, diff_pos, float_outputs):
    """``jac[k][i]``: d(output k)/d(diff input i) by forward mode, an (input.numel,
    output.numel) array (one JVP per input element); and the eager outputs."""
    g = _substitute(func, tupled, diff_pos, float_outputs)
    xs = _arrays(diff)
    try:
        per_input = []
        for i, a in enumerate(xs):
            tangents = []
            for j in range(a.size):
                u = [np.zeros_like(b) for b in xs]
                u[i].reshape(-1)[j] = 1
                tangents.append(u)
            per_input.append(jvp_columns(g, xs, tangents, g.__name__) if tangents else [])
    except NotTraceable as e:
        raise CheckFailed(f"While computing forward-mode derivatives, got: {e}\n\n"
                          f"{_FORWARD_HINT}") from None
    eager_outs = float_outputs(func(*tupled))
    jac = []
    for k, o in enumerate(eager_outs):
        jac.append([np.array([np.asarray(c[k], np.float64).reshape(-1) for c in cols])
                    .reshape(x.size, o.numel()) for x, cols in zip(xs, per_input)])
    return jac, eager_outs


def check_forward_ad(func, tupled, diff, diff_pos, float_outputs, numerical, atol, rtol,
                     fmt) -> None:
    """Forward-mode Jacobians against the numerical ones (``numerical[i][k]``)."""
    jac, eager_outs = forward_jacobian(func, tupled, diff, diff_pos, float_outputs)
    for i, pos in enumerate(diff_pos):
        for k, n in enumerate(numerical[i]):
            a = jac[k][i]
            if not np.all(np.abs(a - n) <= atol + rtol * np.abs(n)):
                raise CheckFailed(f"Jacobian computed with forward mode mismatch for output "
                                  f"{k} with respect to input {pos},\nnumerical:{fmt(n)}\n"
                                  f"analytical:{fmt(a)}\n")
    shaped = [[j.T.reshape(tuple(o.shape) + x.shape) for j, x in zip(row, _arrays(diff))]
              for row, o in zip(jac, eager_outs)]
    if not agrees_with_backward(eager_outs, diff, shaped):
        raise CheckFailed("The forward-mode derivatives of the traced function differ from "
                          "the eager graph's: the function cuts the graph (detach, no_grad, "
                          "the .data attribute) or draws random numbers, which tracing does "
                          f"not see.\n\n{_FORWARD_HINT}")


def check_batched_forward_grad(func, tupled, diff, diff_pos, float_outputs) -> None:
    """Per differentiable input: the forward-mode program mapped over two random tangents
    must equal two separate JVPs."""
    g = _substitute(func, tupled, diff_pos, float_outputs)
    xs = _arrays(diff)
    rng = np.random.default_rng(0)
    for i, a in enumerate(xs):
        rows = [rng.standard_normal(a.shape).astype(a.dtype) for _ in range(2)]
        tangents = [[r if j == i else np.zeros_like(b) for j, b in enumerate(xs)]
                    for r in rows]
        try:
            expected = jvp_columns(g, xs, tangents, g.__name__)
            got = batched_jvp(g, xs, [np.stack([t[j] for t in tangents])
                                      for j in range(len(xs))], g.__name__)
        except NotTraceable as e:
            raise CheckFailed(f"While computing batched gradients, got: {e}\n\n"
                              f"{_BATCHED_FWD_HINT}") from None
        for k, res in enumerate(got):
            exp = np.stack([np.asarray(e[k]) for e in expected])
            if not np.allclose(res, exp, rtol=1e-5, atol=1e-8):
                raise CheckFailed(_batch_msg(diff_pos[i], diff_pos[i], res, exp,
                                             _BATCHED_FWD_HINT))


def check_batched_grad(outputs, diff) -> None:
    """Per output: the eager backward mapped over two random cotangents must equal two
    separate backward passes."""
    rng = np.random.default_rng(0)
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        dt = out._data.dtype
        vs = [rng.standard_normal(tuple(out.shape)).astype(dt) for _ in range(2)]
        expected = []
        for v in vs:
            gs = autograd_grad(out, diff, TB.make(v), retain_graph=True, allow_unused=True)
            expected.append([np.zeros(tuple(x.shape), x._data.dtype) if gi is None
                             else gi.detach().numpy() for x, gi in zip(diff, gs)])
        try:
            got = batched_vjp((out,), diff, [np.stack(vs)])
        except NotTraceable as e:
            raise CheckFailed(f"While computing batched gradients, got: {e}\n\n"
                              f"{_BATCHED_HINT}") from None
        for i, res in enumerate(got):
            exp = np.stack([e[i] for e in expected])
            if not np.allclose(res, exp, rtol=1e-5, atol=1e-8):
                raise CheckFailed(_batch_msg(k, i, res, exp, _BATCHED_HINT))


def check_backward_mul_by_grad_output(outputs, diff) -> None:
    """Backward with zero output gradients must give zero (or no) input gradients: a
    backward is linear in the gradient it receives (PyTorch runs this check with every
    backward check)."""
    outs = [o for o in outputs if o.requires_grad]
    if not outs:
        return
    grads = autograd_grad(outs, diff, [TB.make(np.zeros(tuple(o.shape), o._data.dtype))
                                       for o in outs], allow_unused=True)
    for gi in grads:
        if gi is not None and np.any(gi.detach().numpy() != 0):
            raise CheckFailed("backward not multiplied by grad_output")


class _UndefinedGrad(Function):
    """Identity whose backward gives no gradient: the node before it sees an undefined
    (None) gradient for that output, as behind PyTorch's ``UndefinedGrad``."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return None


_UNDEFINED_HINT = ('Please look at "Notes about undefined output gradients" in PyTorch\'s '
                   '"tools/autograd/derivatives.yaml"; a custom Function that calls '
                   "ctx.set_materialize_grads(False) receives None for those gradients.")


def check_undefined_grad(func, tupled, diff, float_outputs) -> None:
    """Backward with every output gradient undefined (then, with several outputs, one at a
    time) must run and give only undefined or zero input gradients."""
    def check(outs) -> None:
        try:
            grads = autograd_grad(outs, diff, [TB.make(np.zeros(tuple(o.shape), o._data.dtype))
                                              for o in outs], allow_unused=True)
        except Exception as e:
            raise CheckFailed("Expected backward function to handle undefined output grads. "
                              f"{_UNDEFINED_HINT}\nThe backward raised {type(e).__name__}: "
                              f"{e}") from None
        for gi in grads:
            if gi is not None and np.any(gi.detach().numpy() != 0):
                raise CheckFailed("Expected all input grads to be undefined or zero when all "
                                  f"output grads are undefined or zero. {_UNDEFINED_HINT}")

    def differentiable(out):
        return [o for o in float_outputs(out) if o.requires_grad]

    outs = differentiable(func(*tupled))
    if not outs:
        return
    check([_UndefinedGrad.apply(o) for o in outs])
    if len(outs) > 1:
        for idx in range(len(outs)):
            fresh = differentiable(func(*tupled))
            check([_UndefinedGrad.apply(o) if j == idx else o for j, o in enumerate(fresh)])
