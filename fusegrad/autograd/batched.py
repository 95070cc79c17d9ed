"""Batched Jacobian products of eager functions: the eager code traced into IR, then vmapped.

``jacobian(..., vectorize=True)`` and ``gradcheck``'s batched and forward-mode checks
need many vector-Jacobian (or Jacobian-vector) products of one function at one point.
Here the eager engine runs once on tracers (``eager.capture``). For reverse mode the
traced program is the eager backward of a graph already recorded (``autograd.grad``
with a traced cotangent; the saved tensors enter as constants), so hand-written
``Function.backward`` methods are part of it and the forward may use any Python
control flow, as in PyTorch's vmapped ``autograd.grad``. For forward mode it is the
function itself, traced and differentiated by the forward-mode pass. The batching pass
then maps the program over a batch of cotangents (tangents), and one call computes
every row (column).

The backward (function) is traced on every call (a trace costs about one eager
backward or forward), so the values it closes over are always current. The batched
program is cached by the traced program's text, interpreted with NumPy on its first
use and compiled from its ``COMPILE_AFTER``-th use on. A backward (function) that
cannot be traced (Python control flow on tensor values, ``.item()``, ``.numpy()``,
in-place writes to tensors it did not create, custom ``Function`` s under forward
mode) raises ``NotTraceable``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import config
from ..eager import capture
from ..eager import tensor_base as TB
from ..eager.custom_function import BackwardCFunction
from ..eager.engine import grad as autograd_grad
from ..eager.grad_mode import enable_grad
from ..ir.printer import print_function
from ..passes.vmap import batch
from ..runtime import run
from ..runtime.compiled import executable
from ..tracer import trace_pytree
from ..transforms.forward import jvp_pass

__all__ = ["NotTraceable", "agrees_with_backward", "batched_jvp", "batched_vjp", "jvp_columns"]

#: A cached batched program is compiled on this use (before: NumPy interpreter). The
#: interpreter is within 2-10x of the compiled program at n = 100 (both well under the
#: trace's cost), and compiling takes seconds: only a function used in a loop gains.
COMPILE_AFTER = 20
_CACHE_SIZE = 64
_cache: OrderedDict[str, list] = OrderedDict()  # text -> [Function, uses, executable | None
#                                                   (not yet) | False (not compilable)]
_lock = threading.Lock()


class NotTraceable(Exception):
    """The eager function cannot be turned into a traced program (the message says why)."""


def _nodes(outs):
    """Every node of the graphs of ``outs`` (leaves' ``AccumulateGrad`` included)."""
    seen: set[int] = set()
    todo = [o._grad_fn for o in outs if isinstance(o, TB.TensorBase) and o._grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        for edge in getattr(node, "_next", ()) or ():
            todo.append(edge[0] if isinstance(edge, tuple) else edge)


def custom_functions(outs) -> list[str]:
    """Names of the custom ``Function`` nodes in the graphs of ``outs``."""
    return [n.name() for n in _nodes(outs) if isinstance(n, BackwardCFunction)]


def _refuse_hooks(outs) -> None:
    """Hooks and ``retain_grad`` would see (and could keep) traced gradients."""
    for node in _nodes(outs):
        var = getattr(node, "variable", None)
        if (node._pre_hooks or node._post_hooks or node._tensor_hooks or node._retain
                or (var is not None and var._hooks)):
            raise NotTraceable(f"the graph has hooks (on {node.name()}); they run on every "
                               "gradient")


def _outputs(out) -> tuple:
    outs = tuple(out) if isinstance(out, tuple | list) else (out,)
    if not all(isinstance(o, TB.TensorBase) for o in outs):
        raise NotTraceable("the function returned something other than Tensors")
    return outs


def _check_written(cap) -> None:
    for t, before, _ in cap.written.values():
        if id(t) not in cap.created and TB.is_concrete(before):
            raise NotTraceable("the function writes in place into a tensor it did not create")


def _trace(body, args, name: str):
    try:
        traced = trace_pytree(body, tuple(args), name=name)
    except NotTraceable:
        raise
    except Exception as e:  # data-dependent control flow, .item(), unsupported ops, ...
        raise NotTraceable(f"{type(e).__name__}: {e}") from e
    if traced.effects:
        raise NotTraceable("the function has side effects the trace cannot repeat")
    return traced


def _backward_body(outs, xs):
    def body(*cts):
        with capture.capturing(tracing=True) as cap:
            pairs = [(o, TB.make(v)) for o, v in zip(outs, cts) if o.requires_grad]
            gs = (autograd_grad([o for o, _ in pairs], list(xs), [v for _, v in pairs],
                                retain_graph=True, allow_unused=True)
                  if pairs else (None,) * len(xs))
        _check_written(cap)
        return tuple(np.zeros(tuple(x.shape), x._data.dtype) if g is None else g._data
                     for x, g in zip(xs, gs))
    return body


def _forward_body(func, n: int, name: str):
    def body(*arrays):
        with capture.capturing(tracing=True) as cap, enable_grad():
            xs = tuple(TB.make(a, requires_grad=True) for a in arrays)
            outs = _outputs(func(*xs))
            names = custom_functions(outs)
            if names:
                raise NotTraceable(f"forward mode through the custom Function {names[0]} "
                                   "(fusegrad's autograd.Function has no jvp)")
        _check_written(cap)
        return tuple(o._data for o in outs)
    body.__name__ = name
    return body


def _execute(traced_fn, build, args) -> list:
    """Run the batched program ``build(traced_fn)``, cached by the text of ``traced_fn``
    and the batch shapes of ``args`` (so a function traced again to the same program is
    batched, and compiled, once)."""
    key = print_function(traced_fn) + repr([np.shape(a) for a in args])
    with _lock:
        entry = _cache.get(key)
        if entry is not None:
            _cache.move_to_end(key)
            entry[1] += 1
    if entry is None:
        try:
            fn = build(traced_fn)
        except Exception as e:  # an op without a batching or forward-mode rule, ...
            raise NotTraceable(f"{type(e).__name__}: {e}") from e
        entry = [fn, 1, None]
        with _lock:
            _cache[key] = entry
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    fn, uses, exe = entry
    if config.DISABLE_JIT or exe is False or (exe is None and uses < COMPILE_AFTER):
        return list(run(fn, *args))
    if exe is None:
        try:
            exe = entry[2] = executable(fn, "batched Jacobian products of an eager function")
        except Exception:  # not compilable: the interpreter from now on
            entry[2] = False
            return list(run(fn, *args))
    return list(exe(*args))


def batched_vjp(outs, xs, cts, name: str = "f") -> list[np.ndarray]:
    """``vᵀ J`` for every row ``v`` of the batched cotangents ``cts`` (one array per
    Tensor in ``outs``, batch axis first): the eager backward from ``outs`` (a graph
    already recorded, kept) to the Tensors ``xs``, traced with a cotangent argument and
    batched. One array per input, batch axis first."""
    size = int(cts[0].shape[0])
    _refuse_hooks(outs)
    traced = _trace(_backward_body(outs, xs), [c[0] for c in cts], f"{name}_backward")
    axes = (*(0,) * len(cts), *(None,) * len(traced.free))
    return _execute(traced.function,
                    lambda fn: batch(fn, axes, size, 0, name=f"{name}_backward_vmap"),
                    [*cts, *traced.free])


def batched_jvp(func, xs, tangents, name: str = "f") -> list[np.ndarray]:
    """``J u`` for every row ``u`` of the batched tangents (one array per input, batch axis
    first), by forward mode on the traced ``func``: one array per output, batch first."""
    n = len(xs)
    size = int(tangents[0].shape[0])
    traced = _trace(_forward_body(func, n, name), list(xs), name)
    n_free, n_out = len(traced.free), len(traced.function.results)

    def build(fn):
        # jvp params: (*xs, *free, *tangents); results: (*outs, *tangent outs)
        fwd = jvp_pass(fn, tuple(range(n)), name=f"{name}_jvp")
        return batch(fwd, (*(None,) * (n + n_free), *(0,) * n), size,
                     (*(None,) * n_out, *(0,) * n_out), name=f"{name}_jvp_vmap")

    return _execute(traced.function, build, [*xs, *traced.free, *tangents])[n_out:]


def jvp_columns(func, xs, tangents, name: str = "f") -> list[list[np.ndarray]]:
    """``J u`` for each tuple ``u`` in ``tangents`` (one array per input), one unbatched
    run of the traced forward-mode program each: per tangent, one array per output."""
    n = len(xs)
    traced = _trace(_forward_body(func, n, name), list(xs), name)
    fwd = jvp_pass(traced.function, tuple(range(n)), name=f"{name}_jvp")
    n_out = len(traced.function.results)
    return [list(run(fwd, *xs, *traced.free, *u))[n_out:] for u in tangents]


def agrees_with_backward(outs, xs, jac, seed: int = 0) -> bool:
    """Whether a Jacobian from the traced function (``jac[k][j]``: d outs[k] / d xs[j],
    arrays shaped ``out.shape + x.shape``) is the eager graph's: ``vᵀ (J u)`` against
    ``(vᵀ J) u`` by one eager backward, for random ``u`` and ``v``. The trace sees data
    flow only, so it differs where the eager code cut the graph (``detach``,
    ``no_grad``, ``.data``) or where running the function again changed it (random
    numbers); a random projection tells those apart from rounding almost surely."""
    rng = np.random.default_rng(seed)
    us = [rng.standard_normal(tuple(x.shape)) for x in xs]
    vs = [rng.standard_normal(tuple(o.shape)) for o in outs]
    lhs = scale = 0.0
    for v, row in zip(vs, jac):
        for u, j in zip(us, row):
            j = np.asarray(j, np.float64).reshape(v.size, u.size)
            lhs += float(v.reshape(-1) @ j @ u.reshape(-1))
            scale += float(np.abs(v).reshape(-1) @ np.abs(j) @ np.abs(u).reshape(-1))
    pairs = [(o, TB.make(v.astype(o._data.dtype))) for o, v in zip(outs, vs) if o.requires_grad]
    rhs = 0.0
    if pairs:
        grads = autograd_grad([o for o, _ in pairs], list(xs), [v for _, v in pairs],
                              retain_graph=True, allow_unused=True)
        for u, g in zip(us, grads):
            if g is not None:
                g = np.asarray(g.detach().numpy(), np.float64)
                rhs += float(g.reshape(-1) @ u.reshape(-1))
                scale += float(np.abs(g).reshape(-1) @ np.abs(u).reshape(-1))
    eps = max(np.finfo(o._data.dtype).eps for o in outs) if outs else 0.0
    return abs(lhs - rhs) <= 1e3 * eps * scale + 1e-300
