"""``bind``: the one entry point through which every operation happens.

``bind(name, *operands, **attrs)`` promotes operand dtypes (NumPy 2 rules, Python
scalars weak), then dispatches on the operands: an array class registered with
``register_array_type`` (tracers record an op, eager Tensors compute and record
an autograd node) handles the call if any operand is one; plain arrays compute
with the op table's NumPy reference. ``ir`` imports none of those classes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .errors import ShapeError
from .optable import OPS, OpDef
from .types import DTYPES, TensorType, dtype_name, is_float

_HANDLERS: list[tuple[type, Callable, Callable]] = []
_AMBIENT: list[Callable] = []

_WEAK = (bool, int, float)


def register_array_type(cls: type, *, level: Callable, bind: Callable) -> None:
    """Make ``bind`` hand ops on ``cls`` operands to ``bind(opdef, operands, attrs, regions)``.

    ``level(obj)`` orders handlers when operands of several classes meet: the
    operand with the highest level handles the op (an inner trace beats an
    outer one, any trace beats an eager Tensor).
    """
    _HANDLERS.append((cls, level, bind))


def register_ambient(current: Callable) -> None:
    """``current()`` returns a handler for ops whose operands are all concrete, or None.

    The tracer registers one so that, inside an open trace, ops on constants
    and closed-over arrays are recorded too (zeros made by a VJP rule, say)
    instead of being computed and baked in.
    """
    _AMBIENT.append(current)


def handler_for(operands):
    best = None
    for x in operands:
        for cls, level, fn in _HANDLERS:
            if isinstance(x, cls):
                lv = level(x)
                if best is None or lv > best[0]:
                    best = (lv, fn)
                break
    if best is None:
        for current in _AMBIENT:
            h = current()
            if h is not None:
                return h
        return None
    return best[1]


def is_weak(x) -> bool:
    return isinstance(x, _WEAK) and not isinstance(x, np.generic)


def aval(x) -> TensorType:
    """The abstract value (shape and dtype) of any operand bind accepts."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return TensorType(x.shape, x.dtype)
    return TensorType.of(x)


def _target_dtype(opdef: OpDef, operands) -> np.dtype | None:
    first = 1 if opdef.promote == "select" else 0
    parts = operands[first:]
    strong = [aval(x).dtype for x in parts if not is_weak(x)]
    weak = [x for x in parts if is_weak(x)]
    if not strong and not weak:
        return None
    dtype = np.result_type(*strong, *weak)
    if opdef.promote == "float" and not is_float(dtype):
        dtype = np.dtype(np.float64)
    return np.dtype(dtype)


def _cast(x, dtype: np.dtype):
    if is_weak(x) or isinstance(x, np.generic | list | tuple):
        return np.asarray(x, dtype=dtype)
    if isinstance(x, np.ndarray):
        return x if x.dtype == dtype else x.astype(dtype)
    if aval(x).dtype == dtype:
        return x
    return bind("convert", x, dtype=dtype_name(dtype))


def promote(opdef: OpDef, operands: tuple) -> tuple:
    """Operands with dtypes made to agree as ``opdef.promote`` says."""
    if opdef.promote is None:
        return tuple(np.asarray(x) if is_weak(x) or isinstance(x, list | tuple) else x
                     for x in operands)
    dtype = _target_dtype(opdef, operands)
    if opdef.promote == "select":
        cond = operands[0]
        cond = np.asarray(cond, dtype=bool) if is_weak(cond) else cond
        return (cond, *(_cast(x, dtype) for x in operands[1:]))
    return tuple(_cast(x, dtype) for x in operands)


def _normalise_attrs(opdef: OpDef, attrs: dict) -> dict:
    unknown = set(attrs) - set(opdef.attrs)
    missing = set(opdef.attrs) - set(attrs)
    if unknown or missing:
        raise TypeError(
            f"{opdef.name}: attributes are {opdef.attrs}, got {tuple(sorted(attrs))}"
        )
    out = {}
    for k, v in attrs.items():
        if isinstance(v, list | tuple):
            v = tuple(int(e) if isinstance(e, int | np.integer) else e for e in v)
        elif isinstance(v, np.dtype | type):
            v = dtype_name(v)
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


def eval_numpy(opdef: OpDef, operands, attrs, regions=()):
    """Run ``opdef``'s NumPy reference on concrete operands; results as arrays."""
    arrays = tuple(np.asarray(x) for x in operands)
    kwargs = dict(attrs, regions=regions) if regions else attrs
    out_types = opdef.rule(tuple(TensorType(a.shape, a.dtype) for a in arrays), **kwargs)
    with np.errstate(all="ignore"):
        res = opdef.impl(*arrays, **kwargs)
    if len(out_types) == 1:
        res = (res,)
    outs = tuple(np.asarray(r, dtype=t.dtype) for r, t in zip(res, out_types))
    for r, t in zip(outs, out_types):
        if r.shape != t.shape:
            raise ShapeError(f"{opdef.name}: reference result {r.shape} != rule {t}")
    return outs[0] if len(outs) == 1 else outs


def bind(name: str, *operands, regions: tuple = (), **attrs):
    """Apply op ``name`` to ``operands``: record it, compute it eagerly, or with NumPy."""
    opdef = OPS.get(name)
    if opdef is None:
        raise KeyError(f"unknown op {name!r}")
    if opdef.arity is not None and len(operands) != opdef.arity:
        raise TypeError(f"{name}: takes {opdef.arity} operands, got {len(operands)}")
    attrs = _normalise_attrs(opdef, attrs)
    operands = promote(opdef, operands)
    handler = handler_for(operands)
    if handler is None:
        return eval_numpy(opdef, operands, attrs, tuple(regions))
    return handler(opdef, operands, attrs, tuple(regions))


def dtype_of(name: str) -> np.dtype:
    return DTYPES[name]
