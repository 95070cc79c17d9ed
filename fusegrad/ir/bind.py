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
from .opdef import OPS, OpDef
from .types import DTYPES, TensorType, dtype_name, is_inexact

_HANDLERS: list[tuple[type, Callable, Callable]] = []
_AMBIENT: list[Callable] = []

_WEAK = (bool, int, float, complex)


_DTYPE_GETTERS: list[tuple[type, Callable]] = []
_DTYPE_OF: dict[type, Callable | None] = {}
#: ``(cls, value)`` from ``register_array_type``, and the getter found per type
_VALUE_GETTERS: list[tuple[type, Callable]] = []
_VALUE_OF: dict[type, Callable | None] = {}


def register_array_type(cls: type, *, level: Callable, bind: Callable,
                        dtype: Callable | None = None, value: Callable | None = None) -> None:
    """Make ``bind`` hand ops on ``cls`` operands to ``bind(opdef, operands, attrs, regions)``.

    ``level(obj)`` orders handlers when operands of several classes meet: the
    operand with the highest level handles the op (an inner trace beats an
    outer one, any trace beats an eager Tensor). ``dtype(obj)``, if given, is a
    fast way to the NumPy dtype of an operand (promotion reads it on every op).
    ``value(obj)``, if given, is the array or tracer an operand wraps: ``aval`` of the
    operand is that value's (shape and dtype read without the wrapper's properties).
    """
    _HANDLERS.append((cls, level, bind))
    _HANDLER_OF.clear()
    _ARRAYS.clear()
    _ARRAYS[np.ndarray] = True
    if dtype is not None:
        _DTYPE_GETTERS.append((cls, dtype))
        _DTYPE_OF.clear()
    if value is not None:
        _VALUE_GETTERS.append((cls, value))
        _VALUE_OF.clear()


def register_ambient(current: Callable, first: bool = False) -> None:
    """``current()`` returns a handler for ops whose operands are all concrete, or None.

    The tracer registers one so that, inside an open trace, ops on constants
    and closed-over arrays are recorded too (zeros made by a VJP rule, say)
    instead of being computed and baked in. ``first`` puts it before the others.
    """
    _AMBIENT.insert(0, current) if first else _AMBIENT.append(current)


#: Operand types no handler claims (checked first, as most operands are these).
_PLAIN = frozenset((np.ndarray, float, int, bool, complex))


#: type -> its handler's ``(level, bind)``, or None (no handler claims it)
_HANDLER_OF: dict[type, tuple | None] = {}


def _handler_of(t: type):
    found = _HANDLER_OF[t] = next(((level, fn) for cls, level, fn in _HANDLERS
                                   if issubclass(t, cls)), None)
    return found


def handler_for(operands):
    best = None
    for x in operands:
        t = type(x)
        if t in _PLAIN:
            continue
        h = _HANDLER_OF.get(t, _HANDLER_OF)
        if h is _HANDLER_OF:
            h = _handler_of(t)
        if h is not None:
            lv = h[0](x)
            if best is None or lv > best[0]:
                best = (lv, h[1])
    if best is None:
        for current in _AMBIENT:
            h = current()
            if h is not None:
                return h
        return None
    return best[1]


_WEAK_TYPES = frozenset(_WEAK)


def is_weak(x) -> bool:
    t = type(x)
    if t in _WEAK_TYPES:
        return True
    if t is np.ndarray:
        return False
    return isinstance(x, _WEAK) and not isinstance(x, np.generic)


_AVALS: dict[tuple, TensorType] = {}  # TensorTypes are immutable: one per (shape, dtype)


def aval(x) -> TensorType:
    """The abstract value (shape and dtype) of any operand bind accepts."""
    if type(x) is np.ndarray:
        key = (x.shape, x.dtype)
        ty = _AVALS.get(key)
        if ty is None:
            ty = TensorType(x.shape, x.dtype)
            if len(_AVALS) < 4096:
                _AVALS[key] = ty
        return ty
    t = type(x)
    get = _VALUE_OF.get(t, _VALUE_OF)
    if get is _VALUE_OF:
        get = _VALUE_OF[t] = next((g for c, g in _VALUE_GETTERS if issubclass(t, c)), None)
    if get is not None:
        return aval(get(x))
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return TensorType(x.shape, x.dtype)
    return TensorType.of(x)


def _dtype_of(x) -> np.dtype:
    """``aval(x).dtype`` without building the TensorType."""
    t = type(x)
    if t is np.ndarray:
        return x.dtype
    get = _DTYPE_OF.get(t, _DTYPE_OF)
    if get is _DTYPE_OF:
        get = _DTYPE_OF[t] = next((g for c, g in _DTYPE_GETTERS if issubclass(t, c)), None)
    if get is not None:
        return get(x)
    if isinstance(x, np.ndarray):
        return x.dtype
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    return np.asarray(x).dtype


#: (promote, strong dtypes, weak scalar types) -> target dtype. NumPy 2 promotion of
#: weak Python scalars depends on their type only, never on their value.
_PROMOTED: dict[tuple, np.dtype] = {}


def _target_dtype(opdef: OpDef, operands) -> np.dtype | None:
    first = 1 if opdef.promote == "select" else 0
    parts = operands[first:]
    strong = []
    weak = []
    for x in parts:
        if is_weak(x):
            weak.append(x)
        else:
            strong.append(_dtype_of(x))
    if not strong and not weak:
        return None
    key = (opdef.promote, *strong, None, *(type(w) for w in weak))
    dtype = _PROMOTED.get(key)
    if dtype is None:
        dtype = np.result_type(*strong, *weak)
        if opdef.promote == "float" and not is_inexact(dtype):
            dtype = np.dtype(np.float64)
        dtype = np.dtype(dtype)
        if len(_PROMOTED) < 4096:
            _PROMOTED[key] = dtype
    return dtype


def _cast(x, dtype: np.dtype):
    if type(x) is np.ndarray:
        return x if x.dtype == dtype else x.astype(dtype)
    if is_weak(x) or isinstance(x, np.generic | list | tuple):
        return np.asarray(x, dtype=dtype)
    if isinstance(x, np.ndarray):
        return x if x.dtype == dtype else x.astype(dtype)
    if _dtype_of(x) == dtype:
        return x
    return bind("convert", x, dtype=dtype_name(dtype))


#: type -> whether it is an array class a handler claims (or ndarray): an operand of
#: such a type that already has the target dtype is passed on as it is
_ARRAYS: dict[type, bool] = {np.ndarray: True}


def _is_array(t: type) -> bool:
    known = _ARRAYS.get(t)
    if known is None:
        known = _ARRAYS[t] = any(issubclass(t, cls) for cls, _, _ in _HANDLERS)
    return known


def promote(opdef: OpDef, operands: tuple) -> tuple:
    """Operands with dtypes made to agree as ``opdef.promote`` says."""
    kind = opdef.promote
    if kind is None:
        return tuple(np.asarray(x) if is_weak(x) or isinstance(x, list | tuple) else x
                     for x in operands)
    if kind == "select":
        dtype = _target_dtype(opdef, operands)
        cond = operands[0]
        cond = np.asarray(cond, dtype=bool) if is_weak(cond) else cond
        return (cond, *(_cast(x, dtype) for x in operands[1:]))
    # "same" / "float": as _target_dtype, and the operands passed on as they are when
    # all are arrays of the target dtype already (most ops)
    strong, weak, kept = [], [], True
    for x in operands:
        t = type(x)
        if t is np.ndarray:
            strong.append(x.dtype)
        elif is_weak(x):
            weak.append(x)
            kept = False
        else:
            strong.append(_dtype_of(x))
            kept = kept and _is_array(t)
    if not strong and not weak:
        return tuple(operands)
    key = (kind, *strong, None, *(type(w) for w in weak))
    dtype = _PROMOTED.get(key)
    if dtype is None:
        dtype = np.result_type(*strong, *weak)
        if kind == "float" and not is_inexact(dtype):
            dtype = np.dtype(np.float64)
        dtype = np.dtype(dtype)
        if len(_PROMOTED) < 4096:
            _PROMOTED[key] = dtype
    if kept:
        for d in strong:
            if d is not dtype and d != dtype:
                break
        else:
            return tuple(operands)
    return tuple(_cast(x, dtype) for x in operands)


_SEQUENCES = (list, tuple)
_INTEGERS = (int, np.integer)
_DTYPE_LIKE = (np.dtype, type)
#: attribute values kept as they are (no branch below applies to them)
_PLAIN_ATTRS = frozenset((int, float, str, bool, type(None)))


def _normalise_attrs(opdef: OpDef, attrs: dict) -> dict:
    if len(attrs) != len(opdef.attrs) or any(k not in attrs for k in opdef.attrs):
        raise TypeError(
            f"{opdef.name}: attributes are {opdef.attrs}, got {tuple(sorted(attrs))}"
        )
    out = {}
    for k, v in attrs.items():
        if type(v) in _PLAIN_ATTRS:
            pass
        elif isinstance(v, _SEQUENCES):
            v = tuple([int(e) if isinstance(e, _INTEGERS) else e for e in v])
        elif isinstance(v, _DTYPE_LIKE):
            v = dtype_name(v)
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


#: (op name, each operand's shape and dtype, attributes) -> the rule's result types. A
#: rule is a function of its operands' types and its attributes; the ops of a program are
#: mostly a few dozen (name, types) pairs, so most rules run once per process, whether
#: the op is computed (``eval_numpy``) or recorded (the tracer: ``rule_types``).
_RULES: dict[tuple, tuple] = {}
#: attribute values a key holds as they are, with their type (1, 1.0 and True are equal)
_KEYED = frozenset((int, float, str, bool, type(None)))


def _attr_key(attrs: dict) -> tuple | None:
    """``attrs`` as part of a key, or None if one is of a kind not keyed (the rule then
    runs)."""
    key = []
    for k, v in attrs.items():
        t = type(v)
        if t is tuple:
            for e in v:
                if type(e) is not int:
                    return None
        elif t not in _KEYED:
            return None
        key += (k, t, v)
    return tuple(key)


def _remember(cache: dict, key, out) -> None:
    if len(cache) >= 8192:
        cache.clear()
    cache[key] = out


#: (op name, id of each operand's TensorType, attributes) -> (the result types, the
#: operand types, kept so that their ids name them): hashing small ints, not shapes and
#: dtypes (NumPy hashes a dtype from its fields, every time). The types a rule returns
#: are those of the next ops' operands, so a program's types are mostly a few objects.
_BY_ID: dict[tuple, tuple] = {}


def rule_types(opdef: OpDef, types: tuple, attrs: dict) -> tuple:
    """``opdef.rule(types, **attrs)`` (no regions), remembered."""
    akey = _attr_key(attrs) if attrs else ()
    if akey is None:
        return opdef.rule(types, **attrs)
    key = (opdef.name, *map(id, types), *akey)
    hit = _BY_ID.get(key)
    if hit is not None:
        return hit[0]
    vkey = [opdef.name]
    for t in types:
        vkey += (t.shape, t.dtype)
    vkey = (*vkey, *akey)
    out = _RULES.get(vkey)
    if out is None:
        out = opdef.rule(types, **attrs)
        _remember(_RULES, vkey, out)
    _remember(_BY_ID, key, (out, types))
    return out


def _out_types(opdef: OpDef, arrays, kwargs, regions):
    if regions:
        return opdef.rule(tuple(TensorType(a.shape, a.dtype) for a in arrays), **kwargs)
    akey = _attr_key(kwargs) if kwargs else ()
    key = None
    if akey is not None:
        key = [opdef.name]
        for a in arrays:
            key += (a.shape, a.dtype)
        key = (*key, *akey)
    out = _RULES.get(key) if key is not None else None
    if out is None:
        out = opdef.rule(tuple(TensorType(a.shape, a.dtype) for a in arrays), **kwargs)
        if key is not None:
            _remember(_RULES, key, out)
    return out


def eval_numpy(opdef: OpDef, operands, attrs, regions=()):
    """Run ``opdef``'s NumPy reference on concrete operands; results as arrays."""
    arrays = tuple(x if type(x) is np.ndarray else np.asarray(x) for x in operands)
    kwargs = dict(attrs, regions=regions) if regions else attrs
    out_types = _out_types(opdef, arrays, kwargs, regions)
    with np.errstate(all="ignore"):
        res = opdef.impl(*arrays, **kwargs)
    if len(out_types) == 1:
        t = out_types[0]
        r = res if type(res) is np.ndarray and res.dtype == t.dtype else np.asarray(
            res, dtype=t.dtype)
        if r.shape != t.shape:
            raise ShapeError(f"{opdef.name}: reference result {r.shape} != rule {t}")
        return r
    outs = tuple(np.asarray(r, dtype=t.dtype) for r, t in zip(res, out_types))
    for r, t in zip(outs, out_types):
        if r.shape != t.shape:
            raise ShapeError(f"{opdef.name}: reference result {r.shape} != rule {t}")
    return outs


def bind(name: str, *operands, regions: tuple = (), **attrs):
    """Apply op ``name`` to ``operands``: record it, compute it eagerly, or with NumPy."""
    opdef = OPS.get(name)
    if opdef is None:
        raise KeyError(f"unknown op {name!r}")
    if opdef.arity is not None and len(operands) != opdef.arity:
        raise TypeError(f"{name}: takes {opdef.arity} operands, got {len(operands)}")
    if attrs or opdef.attrs:
        attrs = _normalise_attrs(opdef, attrs)
    operands = promote(opdef, operands)
    handler = handler_for(operands)
    if handler is None:
        return eval_numpy(opdef, operands, attrs, tuple(regions))
    return handler(opdef, operands, attrs, tuple(regions))


def dtype_of(name: str) -> np.dtype:
    return DTYPES[name]
