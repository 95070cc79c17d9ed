"""``fusegrad.autograd.functional``: Jacobians, Hessians and their products on the eager
engine, with PyTorch's signatures and return structures.

A single Tensor input (output) gives a Tensor; a tuple gives a tuple, per output
then per input: ``jacobian(f, (x, y))[i][j]`` is d(output i)/d(input j) when
``f`` returns a tuple, of shape ``output_i.shape + input_j.shape``.

>>> import fusegrad as fg
>>> from fusegrad.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, fg.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])
"""

from __future__ import annotations

from ..eager import tensor_base as TB
from ..eager.creation import zeros
from ..eager.engine import grad as autograd_grad
from ..eager.functions import stack
from ..eager.grad_mode import enable_grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _tuple(x, arg: str, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(x, tuple | list)
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, TB.TensorBase):
            if is_tuple:
                raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of "
                                f"Tensors but the value at index {i} has type {type(t)}.")
            raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of "
                            f"Tensors but the given {arg} has type {type(t)}.")
    return is_tuple, xs


def _prepare(inputs, create_graph: bool) -> tuple:
    """Inputs that require grad: views keeping history under ``create_graph``, else fresh
    leaves (as PyTorch's ``_grad_preprocess``)."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(True) for x in inputs)


def _outputs(out, fn: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(out, tuple | list)
    outs = tuple(out) if is_tuple else (out,)
    for o in outs:
        if not isinstance(o, TB.TensorBase):
            raise TypeError(f"The outputs of the user-provided function given to {fn} must be "
                            "either a Tensor or a tuple of Tensors but the given outputs of the "
                            f"user-provided function has type {type(out)}.")
    return is_tuple, outs


def _post(xs, create_graph: bool) -> tuple:
    return tuple(x if create_graph else x.detach() for x in xs)


def _grads(outs, inputs, grad_outputs, create_graph, strict, fn, retain=True) -> tuple:
    """d(outs)/d(inputs) weighted by ``grad_outputs``; None (unused input) -> zeros."""
    pairs = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad]
    if not pairs:
        got = (None,) * len(inputs)
    else:
        got = autograd_grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                            retain_graph=retain or create_graph, create_graph=create_graph,
                            allow_unused=True)
    res = []
    for i, (x, g) in enumerate(zip(inputs, got)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode.")
            g = zeros(tuple(x.shape), dtype=x.dtype)
        res.append(g)
    return tuple(res)


def _check_v(v, outs, fn: str) -> tuple:
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        return (outs[0].new_ones(tuple(outs[0].shape)),)
    _, vs = _tuple(v, "v", fn)
    if len(vs) != len(outs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outs)} but got "
                           f"{len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, outs)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} "
                               f"but got {tuple(a.shape)}.")
    return vs


def _input_v(v, xs, fn: str) -> tuple:
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        return (xs[0].detach().new_ones(tuple(xs[0].shape)),)
    return _check_v(v, xs, fn)


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ J)``; ``v`` may be None when the output has one element."""
    is_in_tuple, xs = _tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func(*xs), "vjp")
        vs = _check_v(v, outs, "vjp")
        res = _grads(outs, xs, vs, create_graph, strict, "vjp", retain=False)
    outs, res = _post(outs, create_graph), _post(res, create_graph)
    return (outs if is_out_tuple else outs[0]), (res if is_in_tuple else res[0])


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), J v)`` by the double-backward trick (as PyTorch): the VJP with a
    dummy cotangent ``u`` is linear in ``u``, and its gradient along ``v`` w.r.t. ``u`` is
    ``J v``."""
    _, xs = _tuple(inputs, "inputs", "jvp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func(*xs), "jvp")
        vs = _input_v(v, xs, "jvp")
        us = tuple(o.detach().new_zeros(tuple(o.shape)).requires_grad_(True) for o in outs)
        g = _grads(outs, xs, us, True, strict, "jvp")
        live = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if live:
            res = autograd_grad([a for a, _ in live], list(us), [b for _, b in live],
                                create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(us)
        res = tuple(zeros(tuple(o.shape), dtype=o.dtype) if r is None else r
                    for o, r in zip(outs, res))
    outs, res = _post(outs, create_graph), _post(res, create_graph)
    return (outs if is_out_tuple else outs[0]), (res if is_out_tuple else res[0])


def _jacobian_rows(outs, xs, create_graph, strict) -> list[list]:
    """``jac[i][j]``: d(outs[i])/d(xs[j]), shaped ``outs[i].shape + xs[j].shape``."""
    jac = []
    for o in outs:
        flat = o.reshape(-1)
        rows = [[] for _ in xs]
        for k in range(flat.numel()):
            seed = flat.detach().new_zeros((flat.numel(),))
            seed[k] = 1
            g = _grads((flat,), xs, (seed,), create_graph, strict, "jacobian")
            for j, gj in enumerate(g):
                rows[j].append(gj)
        jac.append([stack(r, 0).reshape(tuple(o.shape) + tuple(x.shape)) if r else
                    zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                    for r, x in zip(rows, xs)])
    return jac


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: one backward per output element.

    ``vectorize`` is accepted (the rows are computed one by one either way);
    ``strategy="forward-mode"`` requires ``vectorize=True`` as in PyTorch and gives the
    same values.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         "Hint: If your function is a map, use forward-mode, otherwise "
                         "reverse-mode.")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("torch.autograd.functional.jacobian: `strategy=\"forward-"
                                  "mode\"` is only implemented for `vectorize=True`.")
    is_in_tuple, xs = _tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func(*xs), "jacobian")
        jac = _jacobian_rows(outs, xs, create_graph, strict)
    jac = [_post(row, create_graph) for row in jac]
    rows = [row if is_in_tuple else row[0] for row in jac]
    return tuple(rows) if is_out_tuple else rows[0]


def _scalar_output(func, fn: str):
    def checked(*xs):
        out = func(*xs)
        is_tuple, outs = _outputs(out, fn)
        if is_tuple or outs[0].numel() != 1:
            raise RuntimeError(f"The function given to {fn} should return a single Tensor "
                               "containing a single element.")
        return outs[0]
    return checked


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func``: the Jacobian of its gradient. A tuple of inputs
    gives a tuple of tuples, ``h[i][j]`` shaped ``inputs[i].shape + inputs[j].shape``."""
    is_in_tuple, xs = _tuple(inputs, "inputs", "hessian")
    f = _scalar_output(func, "hessian")

    def gradient(*ys):
        with enable_grad():
            out = f(*ys).reshape(())
            return _grads((out,), ys, (out.new_ones(()),), True, strict, "hessian")

    h = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                 strategy=outer_jacobian_strategy)
    return h if is_in_tuple else h[0][0]


def _second(func, inputs, v, create_graph, strict, fn):
    is_in_tuple, xs = _tuple(inputs, "inputs", fn)
    f = _scalar_output(func, fn)
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = f(*xs)
        vs = _input_v(v, xs, fn)
        g = _grads((out.reshape(()),), xs, (out.new_ones(()).reshape(()),), True, strict, fn)
        live = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if live:
            res = _grads([a for a, _ in live], xs, [b for _, b in live], create_graph, strict,
                         fn, retain=False)
        else:
            res = tuple(zeros(tuple(x.shape), dtype=x.dtype) for x in xs)
    out, res = _post((out,), create_graph)[0], _post(res, create_graph)
    return out, (res if is_in_tuple else res[0])


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), vᵀ H)`` for a scalar ``func``: the gradient of ``⟨∇f, v⟩``."""
    return _second(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``(func(inputs), H v)`` for a scalar ``func``. The Hessian of a twice continuously
    differentiable function is symmetric, so this is computed as ``vᵀ H`` (one double
    backward; PyTorch uses the double-backward trick, equal up to rounding)."""
    return _second(func, inputs, v, create_graph, strict, "hvp")
