"""fusegrad: differentiate NumPy-style Python functions into fused native kernels.

>>> import numpy as np, fusegrad as fg, fusegrad.numpy as fnp
>>> df = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
>>> df(np.zeros(3))
array([0., 0., 0.])

Every public name is imported on first use (PEP 562), so ``import fusegrad`` and a first
``fg.grad`` load neither the eager Tensor, ``nn``, ``optim`` nor the other surfaces a
gradient does not need (``tests/test_import_cost.py``).
"""

import importlib as _importlib

from . import numpy  # noqa: F401  (registers NumPy's protocol table: np.sin(x) on traced arrays)
from ._version import __version__ as __version__

#: public name -> the module (relative to this package) that defines it
_EXPORTS = {
    "autocast": "amp",
    "get_float32_matmul_precision": "amp",
    "set_float32_matmul_precision": "amp",
    "bfloat16": "eager.dtypes",
    "Function": "ir",
    "FusegradError": "ir",
    "ShapeError": "ir",
    "TensorType": "ir",
    "TracerConversionError": "ir",
    "TracerError": "ir",
    "compile_stats": "ir.stats",
    "NotDifferentiableError": "passes.autodiff",
    "debug_nans": "runtime.debug_nans",
    "SerializationError": "serialization",
    "load": "serialization",
    "save": "serialization",
    "ControlFlowError": "transforms.control",
    "checkpoint": "transforms.control",
    "cond": "transforms.control",
    "fori_loop": "transforms.control",
    "scan": "transforms.control",
    "while_loop": "transforms.control",
    "cfunc": "transforms.export",
    "hessian": "transforms.forward",
    "hvp": "transforms.forward",
    "jacfwd": "transforms.forward",
    "jvp": "transforms.forward",
    "RetraceWarning": "transforms.guards",
    "dump": "transforms.inspection",
    "make_ir": "transforms.inspection",
    "jacobian": "transforms.jacobian",
    "jit": "transforms.jit_api",
    "GradError": "transforms.plan",
    "SideEffectWarning": "transforms.plan",
    "custom_vjp": "transforms.reverse",
    "elementwise_grad": "transforms.reverse",
    "grad": "transforms.reverse",
    "stop_gradient": "transforms.reverse",
    "value_and_grad": "transforms.reverse",
    "vjp": "transforms.reverse",
    "BatchingError": "transforms.vectorize",
    "vmap": "transforms.vectorize",
}

#: subpackages and modules that are attributes of ``fusegrad`` (imported on first use)
_SUBMODULES = (
    "amp", "array_api", "autograd", "masked", "nn", "numpy", "optim", "random", "tree", "utils",
    "codegen", "config", "eager", "ir", "passes", "runtime", "scipy", "serialization", "tracer",
    "transforms", "_forksafe", "_version",
)  # fmt: skip

#: other names for submodules
_ALIASES = {"_scipy_optimize": "scipy.optimize", "_scipy_special": "scipy.special"}

#: the eager Tensor's names (``fg.tensor``, ``fg.no_grad``, ``fg.float32``, ...) come from here
_TENSOR_API = "eager.tensor_api"

_ALL = [
    "SideEffectWarning", "RetraceWarning", "cfunc", "ControlFlowError", "checkpoint", "cond",
    "fori_loop", "scan", "while_loop", "Function", "FusegradError", "GradError",
    "NotDifferentiableError", "ShapeError", "TensorType", "TracerConversionError",
    "TracerError", "compile_stats", "custom_vjp", "debug_nans", "dump", "elementwise_grad",
    "grad", "hessian", "hvp", "jacfwd", "jacobian", "jit", "jvp", "make_ir", "stop_gradient",
    "tree", "value_and_grad", "vjp", "vmap", "BatchingError", "amp", "autocast", "autograd",
    "bfloat16", "get_float32_matmul_precision", "masked", "set_float32_matmul_precision",
    "nn", "optim", "utils", "SerializationError", "load", "save",
]  # fmt: skip


def _module(relative: str):
    return _importlib.import_module(f"{__name__}.{relative}")


def _register_on_first_use() -> None:
    """``x.__array_namespace__()`` of a traced array (SciPy's functions dispatch through
    it) imports ``array_api``, and a ``scipy.special`` ufunc on one imports its table
    (``scipy.special``), on first use: a gradient needs neither."""
    from .ir import array
    from .tracer import array_api

    array_api.register_namespace(lambda: _module("array_api"))
    array.defer("scipy.special", lambda: _module("scipy.special"))


_register_on_first_use()


def _tensor_api():
    _module("amp")  # which completes the Tensor API's ``cuda`` and ``backends`` (``cuda.amp``)
    return _module(_TENSOR_API)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return _module(name)  # importing it makes it an attribute: no second call
    if name in _ALIASES:
        value = _module(_ALIASES[name])
    elif name in _EXPORTS:
        value = getattr(_module(_EXPORTS[name]), name)
    elif name in ("__all__", "_tensor_all"):
        tensor_all = _tensor_api().__all__
        value = [*_ALL, *tensor_all] if name == "__all__" else tensor_all
    elif not name.startswith("_") and name in _tensor_api().__all__:  # (probes stay cheap)
        value = getattr(_tensor_api(), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    names = {*globals(), *_EXPORTS, *_SUBMODULES, *_ALIASES, *_tensor_api().__all__}
    return sorted(names | {"__all__", "_tensor_all"})
