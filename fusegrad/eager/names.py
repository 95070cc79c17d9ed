"""The names of autograd nodes, as PyTorch names them: one table per op.

``NAMES`` maps each user-facing Tensor operation (the key its method passes to
``record.operation``) to PyTorch's ``grad_fn`` class name for it; the overload
suffix is PyTorch's (``SumBackward0`` is ``sum()``, ``SumBackward1`` is
``sum(dim)``; ``PowBackward0`` is ``x ** 2``, ``PowBackward1`` ``x ** y``,
``PowBackward2`` ``2 ** x``). ``OP_NAMES`` names an IR op bound on Tensors
outside any Tensor method (``fusegrad.numpy`` functions, VJP rules run with
``create_graph=True``).
"""

from __future__ import annotations

NAMES: dict[str, str] = {
    # arithmetic
    "add": "AddBackward0",
    "sub": "SubBackward0",
    "rsub": "RsubBackward1",
    "mul": "MulBackward0",
    "div": "DivBackward0",
    "neg": "NegBackward0",
    "pow": "PowBackward0",  # tensor ** scalar
    "pow_tensor": "PowBackward1",  # tensor ** tensor
    "rpow": "PowBackward2",  # scalar ** tensor
    "remainder": "RemainderBackward0",
    "reciprocal": "ReciprocalBackward0",
    "square": "PowBackward0",
    "atan2": "Atan2Backward0",
    "maximum": "MaximumBackward0",
    "minimum": "MinimumBackward0",
    "where": "WhereBackward0",
    "masked_fill": "MaskedFillBackward0",
    "clamp": "ClampBackward1",
    "clamp_min": "ClampMinBackward0",
    "clamp_max": "ClampMaxBackward0",
    "lerp": "LerpBackward0",
    # elementwise math
    "exp": "ExpBackward0",
    "expm1": "Expm1Backward0",
    "log": "LogBackward0",
    "log1p": "Log1PBackward0",
    "log2": "Log2Backward0",
    "log10": "Log10Backward0",
    "sqrt": "SqrtBackward0",
    "rsqrt": "RsqrtBackward0",
    "sin": "SinBackward0",
    "cos": "CosBackward0",
    "tan": "TanBackward0",
    "asin": "AsinBackward0",
    "acos": "AcosBackward0",
    "atan": "AtanBackward0",
    "sinh": "SinhBackward0",
    "cosh": "CoshBackward0",
    "tanh": "TanhBackward0",
    "asinh": "AsinhBackward0",
    "acosh": "AcoshBackward0",
    "atanh": "AtanhBackward0",
    "sigmoid": "SigmoidBackward0",
    "relu": "ReluBackward0",
    "erf": "ErfBackward0",
    "abs": "AbsBackward0",
    "sign": "SignBackward0",
    "floor": "FloorBackward0",
    "ceil": "CeilBackward0",
    "round": "RoundBackward0",
    "to": "ToCopyBackward0",
    "clone": "CloneBackward0",
    "softmax": "SoftmaxBackward0",
    "log_softmax": "LogSoftmaxBackward0",
    "logsumexp": "LogsumexpBackward0",
    # reductions
    "sum": "SumBackward0",
    "sum_dim": "SumBackward1",
    "mean": "MeanBackward0",
    "mean_dim": "MeanBackward1",
    "prod": "ProdBackward0",
    "prod_dim": "ProdBackward1",
    "max": "MaxBackward1",
    "max_dim": "MaxBackward0",
    "min": "MinBackward1",
    "min_dim": "MinBackward0",
    "amax": "AmaxBackward0",
    "amin": "AminBackward0",
    "norm": "LinalgVectorNormBackward0",
    "var": "VarBackward0",
    "std": "StdBackward0",
    "cumsum": "CumsumBackward0",
    # shape and indexing
    "view": "ViewBackward0",
    "unsafe_view": "UnsafeViewBackward0",
    "alias": "AliasBackward0",
    "unsqueeze": "UnsqueezeBackward0",
    "squeeze": "SqueezeBackward0",
    "squeeze_dim": "SqueezeBackward1",
    "squeeze_dims": "SqueezeBackward2",
    "permute": "PermuteBackward0",
    "transpose": "TransposeBackward0",
    "t": "TBackward0",
    "expand": "ExpandBackward0",
    "repeat": "RepeatBackward0",
    "flip": "FlipBackward0",
    "select": "SelectBackward0",
    "slice": "SliceBackward0",
    "index": "IndexBackward0",
    "index_select": "IndexSelectBackward0",
    "gather": "GatherBackward0",
    "cat": "CatBackward0",
    "stack": "StackBackward0",
    "setitem": "CopySlices",
    # contraction
    "mm": "MmBackward0",
    "dot": "DotBackward0",
    "mv": "MvBackward0",
    "vecmat": "SqueezeBackward4",
    "bmm": "BmmBackward0",
    "outer": "OuterBackward0",
    # in place
    "zero_": "ZeroBackward0",
    "fill_": "FillBackward0",
    "copy_": "CopyBackwards",
}

#: IR op -> node name when the op is bound on Tensors by itself.
OP_NAMES: dict[str, str] = {
    "add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0",
    "div": "DivBackward0", "pow": "PowBackward1", "neg": "NegBackward0",
    "maximum": "MaximumBackward0", "minimum": "MinimumBackward0",
    "remainder": "RemainderBackward0", "atan2": "Atan2Backward0",
    "select": "WhereBackward0", "clamp": "ClampBackward0", "convert": "ToCopyBackward0",
    "exp": "ExpBackward0", "log": "LogBackward0", "log1p": "Log1PBackward0",
    "expm1": "Expm1Backward0", "sin": "SinBackward0", "cos": "CosBackward0",
    "tan": "TanBackward0", "arcsin": "AsinBackward0", "arccos": "AcosBackward0",
    "arctan": "AtanBackward0", "sinh": "SinhBackward0", "cosh": "CoshBackward0",
    "tanh": "TanhBackward0", "arcsinh": "AsinhBackward0", "arccosh": "AcoshBackward0",
    "arctanh": "AtanhBackward0", "sqrt": "SqrtBackward0", "cbrt": "PowBackward0",
    "erf": "ErfBackward0", "logistic": "SigmoidBackward0", "abs": "AbsBackward0",
    "lgamma": "LgammaBackward0", "digamma": "DigammaBackward0",  # scipy.special ops
    "polygamma": "PolygammaBackward0", "gamma": "GammaBackward0", "erfc": "ErfcBackward0",
    "erfcx": "SpecialErfcxBackward0", "erfinv": "ErfinvBackward0",
    "erfcinv": "ErfcinvBackward0", "i0e": "SpecialI0EBackward0", "i1e": "SpecialI1EBackward0",
    "logit": "LogitBackward0", "betaln": "BetalnBackward0", "pdtr": "PdtrBackward0",
    "reduce_sum": "SumBackward1", "reduce_max": "AmaxBackward0",
    "reduce_min": "AminBackward0", "cumsum": "CumsumBackward0",
    "reshape": "ViewBackward0", "transpose": "PermuteBackward0",
    "broadcast_to": "ExpandBackward0", "slice": "SliceBackward0",
    "update_slice": "SliceScatterBackward0", "concatenate": "CatBackward0",
    "take": "IndexSelectBackward0", "index_add": "IndexAddBackward0",
    "index_set": "IndexPutBackward0", "matmul": "UnsafeViewBackward0",
    "custom_vjp_call": "CustomVjpBackward0",
}  # fmt: skip

OP_NAMES.update({  # the linear-algebra ops (fusegrad.ir.linalg_ops)
    "cholesky": "LinalgCholeskyExBackward0", "solve": "LinalgSolveExBackward0",
    "triangular_solve": "LinalgSolveTriangularBackward0", "slogdet": "LinalgSlogdetBackward0",
    "eigh": "LinalgEighBackward0", "svd": "LinalgSvdBackward0", "qr": "LinalgQrBackward0",
    "eig": "LinalgEigBackward0",
    "sqrtm": "SqrtmBackward0", "sylvester": "SylvesterBackward0",  # no PyTorch op
})  # fmt: skip
