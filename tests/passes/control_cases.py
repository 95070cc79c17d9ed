"""Op-table cases of the control-flow ops, for the shared rule and lowering tests.

``control_cases(Case, inputs, normal, const)`` returns the cases (each traces to
exactly its op, regions given as Functions); ``NO_VJP_OF`` names the ops whose
VJP raises (``while_loop`` is differentiable twice: its VJP's VJP has no VJP) and
``FIRST_ORDER_ONLY`` those differentiable once but not twice.
"""

from __future__ import annotations

import numpy as np

from fusegrad.ir import TensorType, bind
from fusegrad.passes.autodiff import vjp
from fusegrad.passes.simplify import dce
from fusegrad.tracer import trace

NO_VJP_OF = frozenset({"while_grad_vjp"})
FIRST_ORDER_ONLY = frozenset({"while_grad"})

F3 = TensorType((3,), np.float64)
I0 = TensorType((), np.int64)


def _true(x, y):
    return bind("mul", bind("sin", x), y), bind("reduce_sum", bind("mul", x, y), axes=(0,))


def _false(x, y):
    return bind("exp", bind("mul", x, 0.5)), bind("reduce_sum", bind("mul", y, y), axes=(0,))


def _while_regions():
    cond = trace(lambda x, i, k: bind("lt", i, np.int64(4)), F3, I0, F3)
    body = trace(lambda x, i, k: (bind("add", bind("mul", x, k), bind("sin", x)),
                                  bind("add", i, np.int64(1))), F3, I0, F3)
    return cond, body


def _step(c, x, k):
    return (bind("add", bind("mul", bind("sin", c), x), k),
            bind("reduce_sum", bind("mul", c, x), axes=(0,)))


def _cts_only(g, n_primal: int):
    return dce(g.replace(results=g.results[n_primal:]))


def control_cases(Case, inputs, normal, const):
    true_fn, false_fn = trace(_true, F3, F3), trace(_false, F3, F3)
    cond, body = _while_regions()
    adjoint = _cts_only(vjp(body, wrt=(0, 2), seeds=(0,)), 2)
    adjoint_vjp = _cts_only(vjp(adjoint, wrt=(0, 2, 3), seeds=(0, 1)), 2)
    body_vjp = _cts_only(vjp(body, wrt=(0, 2), seeds=(0,)), 2)
    step = trace(_step, F3, F3, F3)
    ckpt = trace(lambda x, y: (bind("mul", bind("sin", x), y), bind("exp", x)), F3, F3)
    return [
        Case("cond", inputs(const(True), normal(3), normal(3)), {}, "true",
             (true_fn, false_fn)),
        Case("cond", inputs(const(np.int64(0)), normal(3), normal(3)), {}, "int-false",
             (true_fn, false_fn)),
        Case("while_loop", inputs(normal(3), const(np.int64(0)), normal(3)),
             {"num_carry": 2}, "counter", (cond, body)),
        Case("while_grad", inputs(normal(3), const(np.int64(0)), normal(3), normal(3)),
             {"num_carry": 2}, "counter", (cond, body, adjoint)),
        Case("while_grad_vjp", inputs(normal(3), const(np.int64(0)), normal(3), normal(3),
                                      normal(3), normal(3)),
             {"num_carry": 2}, "counter", (cond, body, adjoint, adjoint_vjp, body_vjp)),
        Case("scan", inputs(normal(3), normal(4, 3), normal(3)),
             {"length": 4, "num_carry": 1, "num_xs": 1, "reverse": True}, "reverse",
             (step,)),
        Case("scan", inputs(normal(3), normal(4, 3), normal(3)),
             {"length": 4, "num_carry": 1, "num_xs": 1, "reverse": False}, "forward",
             (step,)),
        Case("checkpoint", inputs(normal(3), normal(3)), {}, "", (ckpt,)),
    ]


__all__ = ["FIRST_ORDER_ONLY", "NO_VJP_OF", "control_cases"]
