"""The functional API in one namespace: grad, value_and_grad, vjp, jacobian, jit, ...

The code lives by concern in ``plan`` (argument leaves, signatures, ``_Plan``:
what every transform runs on), ``transforms`` (reverse mode: grad, vjp,
jacobian, elementwise_grad, stop_gradient, custom_vjp), ``jit_api`` (``jit``,
static arguments, keyword arguments, donation) and ``inspection`` (make_ir,
stages, dump). Forward mode (jvp, jacfwd, hvp, hessian) lives in ``forward``,
``vmap`` in ``vmap``. This module re-exports them, so ``fusegrad.api.grad`` and
``from fusegrad.api import ...`` keep working.
"""

from __future__ import annotations

from .inspection import STAGES, dump, make_ir, stages
from .jit_api import (
    _dynamic_signature,
    _keywords_last,
    _refuse_grad_tensors,
    _split_static,
    _static_indices,
    jit,
)
from .plan import (
    GradError,
    _argnums_tuple,
    _concrete,
    _diff_leaves,
    _leaf,
    _ones_like,
    _Plan,
    _reason,
    _signature,
    _structure_grads,
    call,
    vjp_pass,
)
from .transforms import (
    _stack,
    custom_vjp,
    elementwise_grad,
    grad,
    jacobian,
    stop_gradient,
    value_and_grad,
    vjp,
)

__all__ = [
    "STAGES",
    "GradError",
    "_Plan",
    "_argnums_tuple",
    "_concrete",
    "_diff_leaves",
    "_dynamic_signature",
    "_keywords_last",
    "_leaf",
    "_ones_like",
    "_reason",
    "_refuse_grad_tensors",
    "_signature",
    "_split_static",
    "_stack",
    "_static_indices",
    "_structure_grads",
    "call",
    "custom_vjp",
    "dump",
    "elementwise_grad",
    "grad",
    "jacobian",
    "jit",
    "make_ir",
    "stages",
    "stop_gradient",
    "value_and_grad",
    "vjp",
    "vjp_pass",
]
