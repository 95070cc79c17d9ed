"""``CompiledFunctionBackward``: a compiled function as one node of an eager graph.

When ``fg.jit`` is called with Tensors that require grad (or on a module whose
parameters do), its result Tensors get one node, ``CompiledFunctionBackward``,
whose backward runs the compiled VJP of the traced function. The VJP Function
recomputes the forward from the saved inputs (no residuals are kept between
the two calls), so memory is the inputs only and the backward costs one forward
plus the adjoint, both compiled and fused.

``create_graph=True`` runs the same VJP Function through the eager engine
(``evaluate`` on Tensors binds every op), which records a differentiable graph:
higher derivatives are correct but run at interpreter speed. Saved inputs are
checked against their version counters as any eager node's are, and a second
backward without ``retain_graph=True`` fails as in PyTorch.
"""

from __future__ import annotations

from ..ir import evaluate
from . import tensor_base as TB
from .custom_function import Function
from .grad_mode import is_grad_enabled


class CompiledFunction(Function):
    """``apply(runner, *inputs)``: the outputs of ``runner.forward`` as Tensors.

    ``runner`` provides ``forward(arrays) -> arrays``, ``vjp_function``, ``free``
    (closed-over arrays after the inputs), ``wrt`` (input indices with a gradient),
    ``seeds`` (output indices that carry a cotangent) and ``vjp(arrays) -> arrays``.
    """

    @staticmethod
    def forward(ctx, runner, *inputs):
        ctx.runner = runner
        ctx.save_for_backward(*inputs)
        outs = runner.forward([x._data for x in inputs])
        tensors = tuple(TB.make(o) for o in outs)
        seeds = set(runner.seeds)
        ctx.mark_non_differentiable(*(t for i, t in enumerate(tensors) if i not in seeds))
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        runner = ctx.runner
        inputs = ctx.saved_tensors
        cts = [grads[i] for i in runner.seeds]
        n_out = runner.num_outputs
        if is_grad_enabled():  # create_graph=True: record the VJP's ops eagerly
            res = evaluate(runner.vjp_function, *inputs, *runner.free, *cts)[n_out:]
        else:
            res = [TB.make(r) for r in runner.vjp([x._data for x in inputs],
                                                  [g._data for g in cts])[n_out:]]
        out: list = [None] * (1 + len(inputs))
        for k, i in enumerate(runner.wrt):
            out[1 + i] = res[k]
        return tuple(out)
