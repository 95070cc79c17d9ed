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

import numpy as np

from ..eager import tensor_base as TB
from ..eager.creation import zeros
from ..eager.engine import grad as autograd_grad
from ..eager.functions import stack
from ..eager.grad_mode import enable_grad
from .batched import NotTraceable, agrees_with_backward, batched_jvp, batched_vjp

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
    """``jac[i][j]``: d(outs[i])/d(xs[j]), shaped ``outs[i].shape + xs[j].shape``: one
    backward per output element through the one graph (kept with ``retain_graph``)."""
    jac = []
    for o in outs:
        flat = o.reshape(-1)
        m = flat.numel()
        rows = [[] for _ in xs]
        if m and not flat.requires_grad and strict:
            raise RuntimeError("The output of the user-provided function is independent "
                               "of input 0. This is not allowed in strict mode.")
        eye = np.eye(m, dtype=flat.detach().numpy().dtype) if m and flat.requires_grad else None
        for k in range(m):
            if eye is None:
                g = tuple(None for _ in xs)
            else:
                g = autograd_grad([flat], list(xs), [TB.make(eye[k])], retain_graph=True,
                                  create_graph=create_graph, allow_unused=True)
            for j, (x, gj) in enumerate(zip(xs, g)):
                if gj is None:
                    if strict:
                        raise RuntimeError(f"The output of the user-provided function is "
                                           f"independent of input {j}. This is not allowed "
                                           "in strict mode.")
                    gj = zeros(tuple(x.shape), dtype=x.dtype)
                rows[j].append(gj)
        shape = tuple(o.shape)
        jac.append([_stack_rows(r, shape, x, create_graph) for r, x in zip(rows, xs)])
    return jac


def _stack_rows(rows, out_shape, x, create_graph):
    """The rows as one ``out_shape + x.shape`` Tensor (without history, by NumPy, unless
    ``create_graph``)."""
    shape = out_shape + tuple(x.shape)
    if not rows:
        return zeros(shape, dtype=x.dtype)
    if create_graph or not all(TB.is_concrete(r._data) for r in rows):
        return stack(rows, 0).reshape(shape)
    return TB.make(np.stack([r._data for r in rows]).reshape(shape))


def _float(t) -> bool:
    return np.issubdtype(t._data.dtype, np.floating)


def _jacobian_batched(func, xs, outs, strategy: str) -> list[list] | None:
    """The Jacobian from one batched program (``autograd.batched``): every row of the
    identity as cotangents of the traced eager backward (reverse mode), or every column
    as tangents of the traced function (forward mode). None when it cannot be traced."""
    if not all(_float(t) and TB.is_concrete(t._data) for t in (*xs, *outs)) or not all(
            x.numel() for x in xs):
        return None  # integers, empty inputs, or inside another trace: the per-row path
    arrays = [x.detach().numpy() for x in xs]
    name = getattr(func, "__name__", "f")
    if name == "<lambda>":
        name = "f"
    try:
        if strategy == "reverse-mode":
            sizes = [o.numel() for o in outs]
            total = sum(sizes)
            if not total:
                return None
            eye = np.eye(total, dtype=np.result_type(*(o._data.dtype for o in outs)))
            cts, at = [], 0
            for o, m in zip(outs, sizes):
                cts.append(np.ascontiguousarray(eye[:, at:at + m]).astype(o._data.dtype)
                           .reshape((total, *o.shape)))
                at += m
            rows = batched_vjp(outs, xs, cts, name)
            jac, at = [], 0
            for o, m in zip(outs, sizes):
                jac.append([TB.make(np.ascontiguousarray(r[at:at + m]).reshape(
                    tuple(o.shape) + tuple(x.shape))) for r, x in zip(rows, xs)])
                at += m
            return jac
        sizes = [x.numel() for x in xs]
        total = sum(sizes)
        eye = np.eye(total)
        tans, at = [], 0
        for a, n in zip(arrays, sizes):
            tans.append(np.ascontiguousarray(eye[:, at:at + n]).astype(a.dtype)
                        .reshape((total, *a.shape)))
            at += n
        cols = batched_jvp(func, arrays, tans, name)
        jac = []
        for o, c in zip(outs, cols):
            c = np.asarray(c).reshape(total, -1)
            row, at = [], 0
            for x, n in zip(xs, sizes):
                row.append(TB.make(np.ascontiguousarray(c[at:at + n].T).reshape(
                    tuple(o.shape) + tuple(x.shape))))
                at += n
            jac.append(row)
        if not agrees_with_backward(outs, xs, [[t._data for t in row] for row in jac]):
            return None  # the eager code cut the graph (detach, no_grad) or is random
        return jac
    except NotTraceable:
        return None


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``.

    ``vectorize=False``: one backward per output element through one graph.
    ``vectorize=True``: the eager backward is traced once (with a cotangent argument)
    and batched over all the output elements (``strategy="forward-mode"``: the
    function is traced and forward mode batched over all the input elements), one
    batched program per call (``autograd.batched``). What cannot be traced (a
    backward that reads gradient values with ``.item()``, hooks on the graph, for
    forward mode also Python control flow on tensor values and custom ``Function`` s;
    a forward-mode Jacobian that disagrees with one eager backward on a random
    projection, as where the code calls ``detach`` or ``no_grad``)
    and ``create_graph=True`` (the result must be differentiable in the eager graph)
    use the per-row backward passes instead, with the same values.
    ``strategy="forward-mode"`` requires ``vectorize=True``, as in PyTorch;
    ``strict=True`` is refused with ``vectorize=True`` as there.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         "Hint: If your function is a map, use forward-mode, otherwise "
                         "reverse-mode.")
    if strategy == "forward-mode":
        if strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                               '`strategy="forward-mode"` are not supported together (yet). '
                               'Please either set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("torch.autograd.functional.jacobian: `strategy=\"forward-"
                                      "mode\"` is only implemented for `vectorize=True`.")
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported '
                                      'together (yet). Please either set `create_graph=False` '
                                      'or `strategy="reverse-mode"`.')
    if vectorize and strict:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")
    is_in_tuple, xs = _tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        is_out_tuple, outs = _outputs(func(*xs), "jacobian")
        jac = None
        if vectorize and not create_graph:
            jac = _jacobian_batched(func, xs, outs, strategy)
        if jac is None:
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
