"""``torch.nn.DataParallel`` and ``torch.nn.parallel.DistributedDataParallel`` on one CPU process.

fusegrad computes on the CPU in one process, which is the case PyTorch handles
by running the wrapped module unchanged: ``DataParallel`` without GPUs calls
``module`` directly, and ``DistributedDataParallel`` in a world of one process
all-reduces each gradient with itself (an average over one replica). Both are
transparent wrappers: ``.module`` is the wrapped module (a child, so
``state_dict`` keys start with ``module.``, ``parameters()`` are the module's),
calling the wrapper calls the module, and ``train()``/``eval()``/``fg.jit``
see through it. Use ``fusegrad.distributed`` for data-parallel work over
several processes or machines.
"""

from __future__ import annotations

import contextlib

from .module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


class DataParallel(Module):
    """Runs ``module`` on the inputs (with no GPUs there is nothing to scatter to, as in
    PyTorch's ``DataParallel`` on a CPU-only machine); ``device_ids``, ``output_device``
    and ``dim`` are accepted and recorded."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        self.module = module
        self.device_ids = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """The functional form: ``module(*inputs, **module_kwargs)`` on the CPU."""
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DistributedDataParallel(Module):
    """``module`` in a one-process world: gradients are already the average over the
    (single) replica, so ``backward()`` fills the module's ``.grad`` exactly as without the
    wrapper. ``device_ids`` must be None (a CPU module), as PyTorch requires; the other
    arguments are accepted."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        if device_ids is not None or output_device is not None:
            raise ValueError("DistributedDataParallel device_ids and output_device arguments "
                             "only work with GPU modules; fusegrad's modules are on the CPU, "
                             f"so pass neither (got device_ids {device_ids}, output_device "
                             f"{output_device})")
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self.module = module
        self.device_ids = None
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Skip the gradient all-reduce inside the block (nothing to skip in one process:
        gradients accumulate in ``.grad`` as usual)."""
        yield

    def join(self, divide_by_initial_world_size: bool = True, enable: bool = True,
             throw_on_early_termination: bool = False):
        """Uneven inputs across processes cannot happen in one process: a no-op context."""
        return contextlib.nullcontext()

    def _set_static_graph(self) -> None:
        self.static_graph = True
