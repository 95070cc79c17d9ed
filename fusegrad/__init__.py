"""fusegrad: differentiate NumPy-style Python functions into fused native kernels.

>>> import numpy as np, fusegrad as fg, fusegrad.numpy as fnp
>>> df = fg.grad(lambda x: fnp.sum(fnp.sin(x) * x))
>>> df(np.zeros(3))
array([0., 0., 0.])
"""

from . import (  # noqa: F401  (fills NumPy's protocol table)
    amp,
    array_api,
    autograd,
    masked,
    nn,
    numpy,
    optim,
    random,
    tree,
    utils,
)
from ._version import __version__ as __version__
from .amp import autocast, get_float32_matmul_precision, set_float32_matmul_precision
from .eager.dtypes import bfloat16
from .eager.tensor_api import *  # noqa: F403  (the eager Tensor: fg.tensor, fg.no_grad, ...)
from .eager.tensor_api import __all__ as _tensor_all
from .ir import Function, FusegradError, ShapeError, TensorType, TracerConversionError, TracerError
from .ir.stats import compile_stats
from .passes.autodiff import NotDifferentiableError
from .runtime.debug_nans import debug_nans
from .scipy import optimize as _scipy_optimize  # noqa: F401  (fg.scipy.minimize)
from .scipy import special as _scipy_special  # noqa: F401  (fills scipy.special's ufunc table)
from .serialization import SerializationError, load, save
from .transforms.control import ControlFlowError, checkpoint, cond, fori_loop, scan, while_loop
from .transforms.export import cfunc
from .transforms.forward import hessian, hvp, jacfwd, jvp
from .transforms.guards import RetraceWarning
from .transforms.inspection import dump, make_ir
from .transforms.jacobian import jacobian
from .transforms.jit_api import jit
from .transforms.plan import GradError, SideEffectWarning
from .transforms.reverse import (
    custom_vjp,
    elementwise_grad,
    grad,
    stop_gradient,
    value_and_grad,
    vjp,
)
from .transforms.vectorize import BatchingError, vmap

__all__ = [
    "SideEffectWarning",
    "RetraceWarning",
    "cfunc",
    "ControlFlowError",
    "checkpoint",
    "cond",
    "fori_loop",
    "scan",
    "while_loop",
    "Function",
    "FusegradError",
    "GradError",
    "NotDifferentiableError",
    "ShapeError",
    "TensorType",
    "TracerConversionError",
    "TracerError",
    "compile_stats",
    "custom_vjp",
    "debug_nans",
    "dump",
    "elementwise_grad",
    "grad",
    "hessian",
    "hvp",
    "jacfwd",
    "jacobian",
    "jit",
    "jvp",
    "make_ir",
    "stop_gradient",
    "tree",
    "value_and_grad",
    "vjp",
    "vmap",
    "BatchingError",
    "amp",
    "autocast",
    "autograd",
    "bfloat16",
    "get_float32_matmul_precision",
    "masked",
    "set_float32_matmul_precision",
    "nn",
    "optim",
    "utils",
    "SerializationError",
    "load",
    "save",
    *_tensor_all,
]
