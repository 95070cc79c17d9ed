"""Shape and dtype rules shared by the op table. Each raises ShapeError naming the op."""

from __future__ import annotations

import numpy as np

from .errors import ShapeError
from .types import DTYPES, TensorType, is_complex, is_inexact, real_dtype


def fmt(types) -> str:
    return ", ".join(str(t) for t in types)


def broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        shown = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(
            f"{name}: operand shapes {shown} do not broadcast together "
            "(trailing dimensions must be equal or 1)"
        ) from None


def same_dtype(name: str, types) -> np.dtype:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise ShapeError(f"{name}: operands must share one dtype, got {fmt(types)}")
    return types[0].dtype


def norm_axis(name: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise ShapeError(f"{name}: axis {axis} is out of range for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def norm_axes(name: str, axes, ndim: int) -> tuple[int, ...]:
    out = tuple(sorted({norm_axis(name, int(a), ndim) for a in axes}))
    if len(out) != len(tuple(axes)):
        raise ShapeError(f"{name}: repeated axis in {tuple(axes)}")
    return out


# --- rules: (in_types, **attrs) -> tuple of result types ---------------------------


#: elementwise ops that refuse complex operands (as JAX does; NumPy orders complex
#: numbers lexicographically, fusegrad does not)
REAL_ONLY = frozenset({
    "lt", "le", "gt", "ge", "maximum", "minimum", "clamp", "floor", "ceil", "floor_divide",
    "remainder", "atan2", "cbrt", "logistic", "round", "logical_and", "logical_or",
    "logical_xor", "logical_not",
})


def real_function_error(name: str, types) -> ShapeError:
    """The error of a function fusegrad implements for real arguments only (the special
    functions): never the function of the real part, silently."""
    return ShapeError(
        f"{name}: is not defined for complex operands, got {fmt(types)}; fusegrad "
        "implements it for real arguments only (SciPy's complex version is not available "
        "here): apply it to z.real or abs(z) if that is what you mean")


def real_elementwise(name: str):
    """Rule for an elementwise function of real floating-point operands only."""
    base = elementwise(name, need="float")

    def rule(types, **attrs):
        if any(is_complex(t.dtype) for t in types):
            raise real_function_error(name, types)
        return base(types, **attrs)

    return rule


def elementwise(name: str, *, out: str | None = None, need: str | None = None):
    """Rule for an elementwise op: operands broadcast; result dtype = operands' (or ``out``)."""

    def rule(types, **_):
        dtype = same_dtype(name, types)
        if need == "float" and not is_inexact(dtype):
            raise ShapeError(f"{name}: expects floating-point operands, got {fmt(types)}")
        if is_complex(dtype) and name in REAL_ONLY:
            raise ShapeError(f"{name}: is not defined for complex operands, got {fmt(types)} "
                             "(complex numbers are not ordered; compare .real or abs())")
        if name == "abs" and is_complex(dtype):
            out_dt = real_dtype(dtype)
            return (TensorType(broadcast_shapes(name, *(t.shape for t in types)), out_dt),)
        if need == "bool" and dtype != np.bool_:
            raise ShapeError(f"{name}: expects boolean operands, got {fmt(types)}")
        shape = broadcast_shapes(name, *(t.shape for t in types))
        return (TensorType(shape, DTYPES[out] if out else dtype),)

    return rule


def select_rule(types, **_):
    c, a, b = types
    if c.dtype != np.bool_:
        raise ShapeError(f"select: the condition must be boolean, got {c}")
    dtype = same_dtype("select", (a, b))
    return (TensorType(broadcast_shapes("select", c.shape, a.shape, b.shape), dtype),)


def constant_rule(types, *, value, dtype):
    return (TensorType((), DTYPES[dtype]),)


def iota_rule(types, *, n, dtype):
    if n < 0:
        raise ShapeError(f"iota: length must be >= 0, got {n}")
    return (TensorType((n,), DTYPES[dtype]),)


def convert_rule(types, *, dtype):
    return (TensorType(types[0].shape, DTYPES[dtype]),)


def reduce_rule(name: str, *, out: str | None = None):
    def rule(types, *, axes):
        (x,) = types
        ax = norm_axes(name, axes, x.ndim)
        if tuple(axes) != ax:
            raise ShapeError(f"{name}: axes must be sorted and non-negative, got {axes}")
        if name in ("reduce_max", "reduce_min") and is_complex(x.dtype):
            raise ShapeError(f"{name}: complex numbers are not ordered, got {x}")
        if name in ("reduce_max", "reduce_min") and any(x.shape[a] == 0 for a in ax):
            raise ShapeError(f"{name}: zero-size axis in {x} has no identity")
        shape = tuple(d for i, d in enumerate(x.shape) if i not in ax)
        return (TensorType(shape, DTYPES[out] if out else x.dtype),)

    return rule


def arg_reduce_rule(name: str):
    def rule(types, *, axis):
        (x,) = types
        a = norm_axis(name, axis, x.ndim)
        if x.ndim and x.shape[a] == 0:
            raise ShapeError(f"{name}: attempt to take {name} of an empty axis in {x}")
        shape = tuple(d for i, d in enumerate(x.shape) if i != a)
        return (TensorType(shape, np.int64),)

    return rule


def cumsum_rule(types, *, axis):
    (x,) = types
    if x.ndim == 0:
        raise ShapeError(f"cumsum: needs an array of rank >= 1, got {x}")
    norm_axis("cumsum", axis, x.ndim)
    return (x,)


def reshape_rule(types, *, shape):
    (x,) = types
    shape = tuple(shape)
    if int(np.prod(shape, dtype=np.int64)) != x.size or any(d < 0 for d in shape):
        raise ShapeError(f"reshape: cannot reshape {x} to shape {shape} ({x.size} elements)")
    return (TensorType(shape, x.dtype),)


def transpose_rule(types, *, perm):
    (x,) = types
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: perm {tuple(perm)} is not a permutation of {x.ndim} axes")
    return (TensorType(tuple(x.shape[p] for p in perm), x.dtype),)


def broadcast_to_rule(types, *, shape):
    (x,) = types
    shape = tuple(shape)
    if broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast {x} to shape {shape}")
    return (TensorType(shape, x.dtype),)


def slice_shape(name: str, x: TensorType, starts, stops, steps) -> tuple[int, ...]:
    if not len(starts) == len(stops) == len(steps) == x.ndim:
        raise ShapeError(f"{name}: need one start/stop/step per axis of {x}")
    shape = []
    for d, start, stop, step in zip(x.shape, starts, stops, steps):
        if step == 0:
            raise ShapeError(f"{name}: slice step cannot be zero")
        if not (0 <= start <= d and -1 <= stop <= d):
            raise ShapeError(f"{name}: slice {start}:{stop}:{step} is not normalised for "
                             f"a dimension of size {d}")
        shape.append(len(range(start, stop, step)))
    return tuple(shape)


def slice_rule(types, *, starts, stops, steps):
    (x,) = types
    return (TensorType(slice_shape("slice", x, starts, stops, steps), x.dtype),)


def update_slice_rule(types, *, starts, stops, steps):
    x, v = types
    shape = slice_shape("update_slice", x, starts, stops, steps)
    if v.shape != shape or v.dtype != x.dtype:
        raise ShapeError(
            f"update_slice: the update must be {TensorType(shape, x.dtype)} "
            f"for this slice of {x}, got {v}"
        )
    return (x,)


def concatenate_rule(types, *, axis):
    if not types:
        raise ShapeError("concatenate: needs at least one operand")
    dtype = same_dtype("concatenate", types)
    first = types[0]
    a = norm_axis("concatenate", axis, first.ndim)
    for t in types[1:]:
        if t.ndim != first.ndim or any(
            d1 != d2 for i, (d1, d2) in enumerate(zip(t.shape, first.shape)) if i != a
        ):
            raise ShapeError(
                f"concatenate: shapes {fmt(types)} differ outside the concatenation axis {a}"
            )
    shape = list(first.shape)
    shape[a] = sum(t.shape[a] for t in types)
    return (TensorType(tuple(shape), dtype),)


def _check_index(name: str, idx: TensorType):
    if not np.issubdtype(idx.dtype, np.integer):
        raise ShapeError(f"{name}: indices must be integers, got {idx}")


def take_rule(types, *, axis):
    x, idx = types
    _check_index("take", idx)
    a = norm_axis("take", axis, x.ndim)
    shape = x.shape[:a] + idx.shape + x.shape[a + 1 :]
    return (TensorType(shape, x.dtype),)


def index_update_rule(name: str):
    def rule(types, *, axis):
        x, idx, v = types
        _check_index(name, idx)
        a = norm_axis(name, axis, x.ndim)
        want = x.shape[:a] + idx.shape + x.shape[a + 1 :]
        if v.shape != want or v.dtype != x.dtype:
            raise ShapeError(
                f"{name}: the update must be {TensorType(want, x.dtype)} for indices {idx} "
                f"along axis {a} of {x}, got {v}"
            )
        return (x,)

    return rule


def matmul_rule(types, **_):
    a, b = types
    dtype = same_dtype("matmul", types)
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands must have rank >= 2, got {a} and {b}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: contraction dimensions differ: {a} @ {b} "
            f"({a.shape[-1]} != {b.shape[-2]})"
        )
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    return (TensorType(batch + (a.shape[-2], b.shape[-1]), dtype),)


def identity_rule(types, **_):
    return tuple(types)
