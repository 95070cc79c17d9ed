"""The autograd engine: ``backward`` and ``grad`` over recorded ``grad_fn`` nodes.

The walk is iterative and deterministic: count each reachable node's incoming
edges, then run ready nodes latest-created first (PyTorch's order, with
``AccumulateGrad`` first of all), summing gradients that meet at a node. No
recursion, so a chain of 100,000 operations backpropagates like a short one.

Without ``create_graph`` gradients flow as raw data (NumPy arrays or tracers)
through the VJP rules; with it they are Tensors and grad mode stays on, so
the backward is itself recorded and can be differentiated again.
"""

from __future__ import annotations

import heapq
import itertools
import warnings
from collections.abc import Sequence

import numpy as np

from ..ir import ops
from ..ir.bind import aval, handler_for
from . import anomaly, callbacks, fast
from . import tensor_base as TB
from .anomaly import MODE as _anomaly
from .fast import _fp, _fp_ignore
from .grad_mode import _mode
from .node import AccumulateGrad, accumulate_grad, edge_of, retain, run_tensor_hooks
from .recorded import OpNode

_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak."
)


def _tensors(x, what: str) -> tuple:
    if isinstance(x, TB.TensorBase):
        return (x,)
    if type(x) is tuple and all(isinstance(t, TB.TensorBase) for t in x):
        return x
    if isinstance(x, Sequence) and all(isinstance(t, TB.TensorBase) for t in x):
        return tuple(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _ones(t):
    data = t._data
    ty = aval(data)
    one = np.ones((), ty.dtype)
    if type(data) is np.ndarray and handler_for((data,)) is None:
        # what the op computes, without the dispatch
        return one if not ty.shape else np.broadcast_to(one, ty.shape)
    return ops.broadcast_to(one, shape=ty.shape)


#: One-element arrays of ones by (shape, dtype): the implicit root gradient is a copy.
_ONES: dict = {}


def _root_grads(outputs, grad_outputs, create_graph: bool) -> list:
    """One gradient per output: implicit ones for one-element outputs, else the given ones."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, TB.TensorBase):
        grad_outputs = (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs; "
                           "give one per output (None for a one-element output)")
    grads = []
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        data = out._cell.value
        if (g is None and not create_graph and out._rg and type(data) is np.ndarray
                and data.size == 1 and handler_for(()) is None):
            grads.append(np.ones(data.shape, data.dtype))  # what _ones computes, faster
            continue
        if not out._rg:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have "
                               "a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs "
                                   f"(output {i} has shape {list(out.shape)}); reduce it "
                                   "(e.g. .sum()) or pass a gradient of that shape")
            data = _ones(out)
            grads.append(TB.make(data) if create_graph else data)
            continue
        if not isinstance(g, TB.TensorBase):
            g = TB.make(np.asarray(g, dtype=out._data.dtype))
        if tuple(g.shape) != tuple(out.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} "
                               f"and output[{i}] has a shape of {out.shape}.")
        if g.dtype != out.dtype:
            g = g.to(out.dtype)
        grads.append(g if create_graph else g._data)
    return grads


def _discover(roots, with_users: bool):
    """Incoming-edge counts of every node reachable from ``roots``, and (if asked) each
    node's users."""
    deps: dict = {}
    users: dict = {}
    stack = list(roots)
    seen = set(stack)
    while stack:
        n = stack.pop()
        for m, _ in n._next:
            if m is None:
                continue
            if m in deps:
                deps[m] += 1
            else:
                deps[m] = 1
            if with_users:
                users.setdefault(m, []).append(n)
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return deps, users


def _needed(users: dict, targets) -> set:
    """The nodes from which some target node is reachable (only they need to run)."""
    needed = set(targets)
    stack = list(targets)
    while stack:
        for u in users.get(stack.pop(), ()):
            if u not in needed:
                needed.add(u)
                stack.append(u)
    return needed


def _add(buf: dict, nr: int, g) -> None:
    old = buf.get(nr)
    if old is None:
        buf[nr] = g
    elif (type(old) is np.ndarray and type(g) is np.ndarray and old.dtype == g.dtype
          and handler_for(()) is None):
        buf[nr] = np.add(old, g)  # what ops.add computes, without the dispatch
    else:
        buf[nr] = ops.add(old, g)


def _as_tensor(g):
    return g if isinstance(g, TB.TensorBase) else TB.make(g)


def execute(roots, root_grads, *, create_graph: bool, retain_graph: bool,
            capture=None, accumulate: bool = True) -> list:
    """Run backward from ``roots`` (edges) seeded with ``root_grads``.

    ``capture``: edges whose incoming gradients are returned (then only nodes
    leading to them run, and no ``AccumulateGrad`` runs unless ``accumulate``).
    """
    unwrap = (lambda t: t) if create_graph else (lambda t: t._data)
    root_nodes = []
    buffers: dict = {}
    for (node, nr), g in zip(roots, root_grads):
        if node not in buffers:
            buffers[node] = {}
            root_nodes.append(node)
        _add(buffers[node], nr, g)
    deps, users = _discover(root_nodes, capture is not None)
    needed = None if capture is None else _needed(users, [n for n, _ in capture if n])
    captured = {}
    order = itertools.count()
    heap = [(-n._seq, next(order), n) for n in root_nodes if deps.get(n, 0) == 0]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    prev = _mode.grad
    _mode.grad = create_graph
    token = _fp.set(_fp_ignore)  # inf and nan flow as in PyTorch, without warnings
    node = None
    # a node that became ready while no other was: it runs next without the heap
    nxt = pop(heap)[2] if heap else None
    queued = callbacks.begin()
    try:
        while nxt is not None:
            node = nxt
            buf = buffers.pop(node, None)
            if buf is None:
                buf = {}
            is_acc = type(node) is AccumulateGrad or isinstance(node, AccumulateGrad)
            if (node._tensor_hooks or node._retain) if not is_acc else node.variable._hooks:
                _pre(node, buf, create_graph, unwrap)
            if capture is not None:
                for i, (cn, cnr) in enumerate(capture):
                    if cn is node and buf.get(cnr) is not None:
                        captured[i] = buf[cnr]
            runs = needed is None or node in needed
            if runs:
                runs = False
                for g in buf.values():
                    if g is not None:
                        runs = True
                        break
            if not runs or (is_acc and not accumulate):
                outs = ()
            elif node._pre_hooks or node._post_hooks:
                outs = _run(node, buf, create_graph, unwrap)
            elif is_acc:
                g = buf.get(0)
                if g is not None:
                    accumulate_grad(node.variable, g, create_graph)
                outs = ()
            elif len(buf) == 1 and 0 in buf and _SINGLE[type(node)]:
                outs = node.apply([buf[0]], create_graph)
            else:
                outs = _run(node, buf, create_graph, unwrap)
            if outs and _anomaly.enabled:
                anomaly.check_backward(node, outs)
            if not retain_graph:
                node.release()
            nouts = len(outs)
            ready = None
            for i, (m, nr) in enumerate(node._next):
                if m is None:
                    continue
                g = outs[i] if i < nouts else None
                if g is not None:
                    b = buffers.get(m)
                    if b is None:
                        buffers[m] = {nr: g}
                    else:
                        _add(b, nr, g)
                d = deps[m] - 1
                deps[m] = d
                if d == 0:
                    if ready is None and not heap:
                        ready = m
                    else:
                        if ready is not None:
                            push(heap, (-ready._seq, next(order), ready))
                            ready = None
                        push(heap, (-m._seq, next(order), m))
            if ready is not None:
                nxt = ready
            else:
                nxt = pop(heap)[2] if heap else None
        if queued:
            callbacks.run(queued)
    except Exception as e:
        if _anomaly.enabled and node is not None:
            anomaly.annotate(node, e)
        raise
    finally:
        callbacks.end()
        _fp.reset(token)
        _mode.grad = prev
    return [captured.get(i) for i in range(len(capture or ()))]


def _data_of(t):
    return t._data


def _execute_one(edge, g, retain_graph: bool) -> None:
    """``execute([edge], [g], create_graph=False, retain_graph=retain_graph)``: the same
    walk in the same order, for one root and no captured edges, with less bookkeeping."""
    node, nr = edge
    # incoming-edge counts (_discover; one root is never reached again, so a node is
    # new exactly when it has no count yet)
    deps: dict = {}
    stack = [node]
    while stack:
        for m, _ in stack.pop()._next:
            if m is None:
                continue
            if m in deps:
                deps[m] += 1
            else:
                deps[m] = 1
                stack.append(m)
    buffers: dict = {}
    heap: list = []
    order = itertools.count()
    pop, push = heapq.heappop, heapq.heappush
    buf = {nr: g}
    prev = _mode.grad
    _mode.grad = False
    token = _fp.set(_fp_ignore)
    queued = callbacks.begin()
    try:
        while True:
            if type(node) is AccumulateGrad or isinstance(node, AccumulateGrad):
                if node.variable._hooks:
                    _pre(node, buf, False, _data_of)
                g = buf.get(0)
                if g is not None or any(v is not None for v in buf.values()):
                    if node._pre_hooks or node._post_hooks:
                        outs = _run(node, buf, False, _data_of)
                        if outs and _anomaly.enabled:
                            anomaly.check_backward(node, outs)
                    elif g is not None:
                        accumulate_grad(node.variable, g, False)
                nxt_edges = node._next
                outs = ()
            else:
                if node._tensor_hooks or node._retain:
                    _pre(node, buf, False, _data_of)
                if len(buf) == 1 and 0 in buf and not (node._pre_hooks or node._post_hooks):
                    g = buf[0]
                    if g is None:
                        outs = ()
                    elif _SINGLE[type(node)]:
                        outs = node.apply([g], False)
                    else:
                        outs = _run(node, buf, False, _data_of)
                elif any(v is not None for v in buf.values()):
                    outs = _run(node, buf, False, _data_of)
                else:
                    outs = ()
                if outs and _anomaly.enabled:
                    anomaly.check_backward(node, outs)
                if not retain_graph:
                    node.release()
                nxt_edges = node._next
            nouts = len(outs)
            ready = None
            for i, (m, mnr) in enumerate(nxt_edges):
                if m is None:
                    continue
                g = outs[i] if i < nouts else None
                if g is not None:
                    b = buffers.get(m)
                    if b is None:
                        buffers[m] = {mnr: g}
                    else:
                        _add(b, mnr, g)
                d = deps[m] - 1
                deps[m] = d
                if d == 0:
                    if ready is None and not heap:
                        ready = m
                    else:
                        if ready is not None:
                            push(heap, (-ready._seq, next(order), ready))
                            ready = None
                        push(heap, (-m._seq, next(order), m))
            if ready is not None:
                node = ready
            elif heap:
                node = pop(heap)[2]
            else:
                break
            buf = buffers.pop(node, None)
            if buf is None:
                buf = {}
        if queued:
            callbacks.run(queued)
    except Exception as e:
        if _anomaly.enabled and node is not None:
            anomaly.annotate(node, e)
        raise
    finally:
        callbacks.end()
        _fp.reset(token)
        _mode.grad = prev


def _pre(node, buf: dict, create_graph: bool, unwrap) -> None:
    """Tensor hooks and retain_grad, on the gradients flowing into ``node``'s outputs."""
    if isinstance(node, AccumulateGrad):
        if node.variable._hooks and buf.get(0) is not None:
            buf[0] = run_tensor_hooks(node.variable._hooks, buf[0], _as_tensor, unwrap)
        return
    if node._tensor_hooks:
        for nr, hooks in node._tensor_hooks.items():
            if buf.get(nr) is not None:
                buf[nr] = run_tensor_hooks(hooks, buf[nr], _as_tensor, unwrap)
    if node._retain:
        for nr in list(node._retain):
            retain(node, nr, buf.get(nr), create_graph)


class _SingleOutput(dict):
    """Node classes whose backward, when only output 0 has a gradient, is
    ``apply([buf[0]])`` (one output, or an ``OpNode``, which skips missing gradients)."""

    def __missing__(self, cls) -> bool:
        ok = issubclass(cls, OpNode) or getattr(cls, "_one_output", False)
        self[cls] = ok
        return ok


_SINGLE = _SingleOutput()


def _run(node, buf: dict, create_graph: bool, unwrap) -> list:
    n = max(buf) + 1 if buf else 0
    grads = [buf.get(i) for i in range(max(n, getattr(node, "num_outputs", n)))]
    if node._pre_hooks:
        for fn in list(node._pre_hooks.values()):
            res = fn(tuple(None if g is None else _as_tensor(g) for g in grads))
            if res is not None:
                grads = [None if g is None else unwrap(g) for g in res]
    outs = node.apply(grads, create_graph)
    if node._post_hooks:
        for fn in list(node._post_hooks.values()):
            res = fn(tuple(None if g is None else _as_tensor(g) for g in outs),
                     tuple(None if g is None else _as_tensor(g) for g in grads))
            if res is not None:
                outs = [None if g is None else unwrap(g) for g in res]
    return outs


# --- public entry points --------------------------------------------------------------


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate d(tensors)/d(leaves), weighted by ``grad_tensors``, into the leaves' ``.grad``.

    ``inputs`` restricts accumulation to those tensors (leaves or not).
    ``retain_graph`` defaults to ``create_graph``.
    """
    if (grad_tensors is None and grad_variables is None and inputs is None and not create_graph
            and type(tensors) is tuple and len(tensors) == 1):
        t = tensors[0]
        if isinstance(t, TB.TensorBase) and t._rg:
            data = t._cell.value
            if type(data) is np.ndarray and data.size == 1 and fast.plain():
                # the implicit gradient of a one-element output (what _root_grads makes)
                one = _ONES.get((data.shape, data.dtype))
                if one is None:
                    one = _ONES[data.shape, data.dtype] = np.ones(data.shape, data.dtype)
                _execute_one(edge_of(t), one.copy(), bool(retain_graph))
                return
    tensors = _tensors(tensors, "tensors")
    if grad_tensors is None:
        grad_tensors = grad_variables
    retain_graph = create_graph if retain_graph is None else retain_graph
    grads = _root_grads(tensors, grad_tensors, create_graph)
    roots = [edge_of(t) for t in tensors]
    if create_graph:
        warnings.warn(_CREATE_GRAPH_WARNING, UserWarning, stacklevel=3)
    if inputs is None:
        execute(roots, grads, create_graph=create_graph, retain_graph=retain_graph)
        return
    inputs = _tensors(inputs, "inputs")
    if not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    edges = [_input_edge(t) for t in inputs]
    got = execute(roots, grads, create_graph=create_graph, retain_graph=retain_graph,
                  capture=edges, accumulate=False)
    for t, g in zip(inputs, got):
        if g is not None:
            accumulate_grad(t, g, create_graph)


def _input_edge(t):
    if not t._rg:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return edge_of(t)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False) -> tuple:
    """The gradients of ``outputs`` w.r.t. ``inputs`` as a tuple; ``.grad`` is not touched.

    With ``create_graph=True`` the results have history (differentiate them
    again for higher derivatives).
    """
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported by fusegrad; "
                                  "loop over the grad_outputs instead")
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True")
    retain_graph = create_graph if retain_graph is None else retain_graph
    grads = _root_grads(outputs, grad_outputs, create_graph)
    edges = [_input_edge(t) for t in inputs]
    got = execute([edge_of(t) for t in outputs], grads, create_graph=create_graph,
                  retain_graph=retain_graph, capture=edges, accumulate=False)
    result = []
    for t, g in zip(inputs, got):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            result.append(t.new_zeros(t.shape) if materialize_grads else None)
        else:
            result.append(_as_tensor(g))
    return tuple(result)
