"""``gradcheck`` / ``gradgradcheck``: compare autograd's gradients with finite differences.

As PyTorch's: the analytical Jacobian (one backward per output element, or a
random projection with ``fast_mode=True``) must match central differences
``(f(x + eps) - f(x - eps)) / (2 eps)`` within ``atol + rtol * |numerical|``.
A mismatch raises ``GradcheckError`` (a ``RuntimeError``) showing both Jacobians,
or returns False with ``raise_exception=False``.

>>> import fusegrad as fg
>>> x = fg.tensor([0.5, 1.5], dtype=fg.float64, requires_grad=True)
>>> fg.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
True
"""

from __future__ import annotations

import warnings

import numpy as np

from ..eager import tensor_base as TB
from ..eager.creation import tensor
from ..eager.engine import grad as autograd_grad
from ..eager.grad_mode import no_grad
from . import gradcheck_modes as modes

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """The analytical and numerical gradients differ (or a gradient is malformed)."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, tuple | list) else (x,)


def _float_outputs(out) -> list:
    return [o for o in _as_tuple(out) if isinstance(o, TB.TensorBase) and o.is_floating_point()]


def _numerical(func, inputs, x, eps: float) -> list[np.ndarray]:
    """d(each output)/d(x) by central differences: one (x.numel, out.numel) array each."""
    data = x.detach().numpy()
    flat = data.reshape(-1)
    cols = []
    for j in range(flat.size):
        orig = flat[j].item()
        flat[j] = orig + eps
        plus = [o.detach().numpy().astype(np.float64).reshape(-1)
                for o in _float_outputs(func(*inputs))]
        flat[j] = orig - eps
        minus = [o.detach().numpy().astype(np.float64).reshape(-1)
                 for o in _float_outputs(func(*inputs))]
        flat[j] = orig
        cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
    n_out = len(_float_outputs(func(*inputs)))
    return [np.array([c[k] for c in cols]).reshape(flat.size, -1) for k in range(n_out)]


def _analytical(outputs, diff_inputs, check_dtypes: bool) -> list[list[np.ndarray]]:
    """``jac[k][i]``: d(output k)/d(input i) as an (input.numel, output.numel) array."""
    jac = []
    for out in outputs:
        per_in = [np.zeros((x.numel(), out.numel())) for x in diff_inputs]
        if out.requires_grad:
            for j in range(out.numel()):
                seed = np.zeros(out.numel(), dtype=out.detach().numpy().dtype)
                seed[j] = 1
                grads = autograd_grad(out, diff_inputs, tensor(seed.reshape(out.shape)),
                                      retain_graph=True, allow_unused=True)
                for i, (x, g) in enumerate(zip(diff_inputs, grads)):
                    if g is None:
                        continue
                    if tuple(g.shape) != tuple(x.shape):
                        raise GradcheckError("Gradient has incorrect size")
                    if check_dtypes and g.dtype != x.dtype:
                        raise GradcheckError("Gradient has dtype mismatch")
                    per_in[i][:, j] = g.detach().numpy().reshape(-1)
        jac.append(per_in)
    return jac


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _mismatch(a: np.ndarray, n: np.ndarray, atol: float, rtol: float) -> bool:
    return not np.all(np.abs(a - n) <= atol + rtol * np.abs(n))


def _fmt(j: np.ndarray) -> str:
    return repr(tensor(j))


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """True if autograd's gradients of ``func`` at ``inputs`` (those Tensors with
    ``requires_grad``) match finite differences; else raise ``GradcheckError`` (or return
    False when ``raise_exception=False``).

    Inputs should be float64: others warn, as in PyTorch. ``nondet_tol`` bounds the
    difference between two backward passes (0: they must agree exactly).
    ``fast_mode`` compares the projections ``vᵀ J u`` for random ``u``, ``v`` instead of
    whole Jacobians (of the backward; the forward-mode check always uses whole ones).

    ``check_forward_ad``: the Jacobian by forward mode (the function traced, then
    differentiated by the forward-mode pass: the eager engine has no dual tensors) must
    match finite differences; ``check_batched_forward_grad``: that forward-mode program
    mapped over a batch of tangents must match one JVP per tangent; ``check_batched_grad``:
    the eager backward, traced and mapped over a batch of cotangents, must match one
    backward per cotangent; ``check_undefined_grad``: backward with undefined (None)
    output gradients must run and give undefined or zero input gradients
    (``autograd.gradcheck_modes``). As in PyTorch, every backward check also runs the
    backward with zero output gradients, which must give zero input gradients.
    ``check_backward_ad=False`` skips every check that uses the backward.
    """
    tupled = _as_tuple(inputs)
    diff = [x for x in tupled if isinstance(x, TB.TensorBase) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    for i, x in enumerate(tupled):
        if isinstance(x, TB.TensorBase) and x.requires_grad and x.dtype.itemsize < 8:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex. ", UserWarning,
                          stacklevel=2)
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to "
                             "be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires "
                             "check_forward_ad to be True")
    diff_pos = [i for i, x in enumerate(tupled)
                if isinstance(x, TB.TensorBase) and x.requires_grad]
    if check_backward_ad and not _backward(func, tupled, diff, eps, atol, rtol,
                                           raise_exception, nondet_tol, check_grad_dtypes,
                                           fast_mode):
        return False
    try:
        if check_forward_ad:
            numerical = [_numerical(func, tupled, x, eps) for x in diff]
            modes.check_forward_ad(func, tupled, diff, diff_pos, _float_outputs, numerical,
                                   atol, rtol, _fmt)
        if check_batched_forward_grad:
            modes.check_batched_forward_grad(func, tupled, diff, diff_pos, _float_outputs)
        if check_backward_ad:
            if check_batched_grad:
                modes.check_batched_grad(_float_outputs(func(*tupled)), diff)
            modes.check_backward_mul_by_grad_output(_float_outputs(func(*tupled)), diff)
            if check_undefined_grad:
                modes.check_undefined_grad(func, tupled, diff, _float_outputs)
    except modes.CheckFailed as e:
        return _fail(str(e), raise_exception)
    return True


def _backward(func, tupled, diff, eps, atol, rtol, raise_exception, nondet_tol,
              check_grad_dtypes, fast_mode) -> bool:
    """The backward Jacobians (or their random projections) against finite differences."""
    outputs = _float_outputs(func(*tupled))
    if fast_mode:
        return _fast(func, tupled, diff, outputs, eps, atol, rtol, raise_exception)
    ana = _analytical(outputs, diff, check_grad_dtypes)
    again = _analytical(_float_outputs(func(*tupled)), diff, False)
    for k in range(len(outputs)):
        for i in range(len(diff)):
            if np.any(np.abs(ana[k][i] - again[k][i]) > nondet_tol):
                return _fail(f"Backward is not reentrant, i.e., running backward with same "
                             f"input and grad_output multiple times gives different values, "
                             f"although analytical gradient matches numerical gradient. The "
                             f"tolerance for nondeterminism was {nondet_tol}.", raise_exception)
    pos = {id(x): n for n, x in enumerate(tupled)}
    for i, x in enumerate(diff):
        num = _numerical(func, tupled, x, eps)
        for k, n in enumerate(num):
            if _mismatch(ana[k][i], n, atol, rtol):
                return _fail(f"Jacobian mismatch for output {k} with respect to input "
                             f"{pos[id(x)]},\nnumerical:{_fmt(n)}\nanalytical:{_fmt(ana[k][i])}\n",
                             raise_exception)
    return True


def _fast(func, tupled, diff, outputs, eps, atol, rtol, raise_exception) -> bool:
    """``vᵀ J u`` per (output, input): directional differences against one backward."""
    rng = np.random.default_rng(0)
    pos = {id(x): n for n, x in enumerate(tupled)}
    for k, out in enumerate(outputs):
        v = rng.standard_normal(out.numel())
        grads = ((None,) * len(diff) if not out.requires_grad else autograd_grad(
            out, diff, tensor(v.reshape(out.shape), dtype=out.dtype), retain_graph=True,
            allow_unused=True))
        for x, g in zip(diff, grads):
            u = rng.standard_normal(x.numel())
            ana = 0.0 if g is None else float(g.detach().numpy().reshape(-1) @ u)
            data = x.detach().numpy().reshape(-1)
            orig = data.copy()
            data += eps * u
            plus = _float_outputs(func(*tupled))[k].detach().numpy().reshape(-1)
            data[:] = orig - eps * u
            minus = _float_outputs(func(*tupled))[k].detach().numpy().reshape(-1)
            data[:] = orig
            num = float(v @ ((plus.astype(np.float64) - minus) / (2 * eps)))
            if abs(ana - num) > atol + rtol * abs(num):
                return _fail(f"Jacobian mismatch for output {k} with respect to input "
                             f"{pos[id(x)]},\nnumerical:{num!r}\nanalytical:{ana!r}\n\n"
                             "The tolerance was computed on vᵀ J u for random u and v "
                             "(fast_mode=True); rerun with fast_mode=False for the full "
                             "Jacobians.", raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """``gradcheck`` of the gradients themselves: the backward of ``func`` (with random
    ``grad_outputs`` when none are given, themselves checked as inputs) is differentiated
    again and compared with finite differences of the first backward: in reverse mode
    (``check_rev_over_rev``) and in forward mode (``check_fwd_over_rev``, the traced
    first backward differentiated by the forward-mode pass)."""
    tupled = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(tupled)
                if isinstance(x, TB.TensorBase) and x.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        with no_grad():
            outs = _float_outputs(func(*tupled))
        grad_outputs = tuple(tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype)
                             .requires_grad_(True) for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(tupled)

    def first_backward(*args):
        xs, gos = args[:n], args[n:]
        outs = _float_outputs(func(*xs))
        grads = autograd_grad(outs, [xs[i] for i in diff_idx], list(gos), create_graph=True,
                              allow_unused=True)
        return tuple(g for g in grads if g is not None)

    if not (check_rev_over_rev or check_fwd_over_rev):
        return True
    return gradcheck(first_backward, (*tupled, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad and check_rev_over_rev,
                     check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, fast_mode=fast_mode)
