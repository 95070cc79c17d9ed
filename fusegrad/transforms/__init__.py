"""The functional face: transforms of NumPy-style Python functions.

``reverse`` (grad, value_and_grad, vjp, elementwise_grad, custom_vjp, stop_gradient),
``jacobian`` (jacobian, and the batched Jacobian programs of jacfwd and hessian),
``forward`` (jvp, jacfwd, hvp, hessian), ``vectorize`` (vmap),
``jit_api`` (jit: static and keyword arguments, donation), ``control`` (cond,
while_loop, fori_loop, scan, checkpoint) and ``inspection`` (make_ir, stages, dump),
all built on ``plan`` (argument leaves, signatures, ``_Plan``: trace, apply passes,
run compiled or inlined into an enclosing trace). ``fusegrad/__init__.py`` re-exports
them; this package re-exports nothing, so each module name means the module.

May import ``config``, ``ir``, ``tracer``, ``passes``, ``codegen`` and ``runtime``;
never the eager Tensor or the surfaces above it, which register hooks here
(``plan.register_eager_tensor``, ``jit_api.register_route``).
"""
