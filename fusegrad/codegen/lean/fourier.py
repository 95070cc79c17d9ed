"""Discrete Fourier transforms in an entry: the ``fft`` op by NumPy's own pocketfft loops.

``np.fft.fftn`` / ``ifftn`` / ``rfftn`` / ``irfftn`` are sequences of one-dimensional
transforms, each one call of a gufunc of ``numpy.fft._pocketfft_umath`` (``fft``,
``ifft``, ``rfft_n_even``, ``rfft_n_odd``, ``irfft``) over one axis, the others a batch.
The entry calls the same loops (``PyUFuncGenericFunction``: ``loop(args, dimensions,
steps, data)``) by address, in NumPy's order and with NumPy's scale factors, so the
results have NumPy's bits:

- ``fftn`` / ``ifftn``: ``fft`` / ``ifft`` over the axes from the last to the first;
- ``rfftn``: ``rfft_n_even`` or ``rfft_n_odd`` (by the parity of the length) over the
  last axis, then ``fft`` over the others from the last to the first;
- ``irfftn``: ``ifft`` over the axes but the last, from the first, then ``irfft`` over
  the last (``last`` samples).

Each transform's factor is NumPy's ``fct`` in the array's precision: 1, ``1 / n`` or
``1 / sqrt(n)`` by the norm (its direction swapped for the inverse transforms), from
the length ``n`` read at run time. The transforms run in one loop function of their own
module (``Entry._helper``), intermediates in two arena places; its sizes are arguments
and the loop of ``rfft`` is chosen by the length's parity at run time, so one module
serves every size and a standalone module is the same text at every size. For each
transform over axis ``k`` of a C-ordered ``(A, n, C)`` array the loop is called once for
the ``A`` rows of length ``n`` if ``C`` is 1, else ``A`` times for the ``C`` strided
rows of each block (as NumPy's iterator calls it; the bits of a row do not depend on
the batching). float32 / complex64 arrays use NumPy's float loops, but for a transform
whose factor is 1: NumPy passes it as the Python integer 1, with which the ufunc picks
its double loop, so the transform runs in float64 on a converted copy (two more arena
places) and its result is rounded, as NumPy's casts do.

The loops are found by the ufunc objects' ``functions`` and ``data`` arrays
(``loader.pocketfft_address``), registered as ``fusegrad_pocketfft_<ufunc>_<d|f>`` (and
``..._data``). They take the GIL only to report a C++ exception (``PyGILState``), so
they run with the GIL released like any other loop. Such an exception (memory
exhausted by a plan) sets a Python error and leaves the result unwritten; the entry
does not test for it: a call from CPython then fails with CPython's ``SystemError``
(a result returned with an error set) caused by it, and a C entry's caller is not
told.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from .kernel import I64, PTR, loop_nest

#: the ops lowered here
LOWERED = ("fft",)
_FLOATS = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}
_F64, _F32 = ir.DoubleType(), ir.FloatType()


def lowered(op: Op) -> bool:
    """Whether the entry lowers ``fft`` op ``op``: float32/64, complex64/128, with a NumPy
    whose loops are found (``available``)."""
    return all(v.type.dtype in _FLOATS for v in (*op.operands, *op.results)) and available()


@functools.cache
def available() -> bool:
    """Whether this NumPy has the pocketfft loops where ``loader.pocketfft_address``
    looks for them (else the op runs with NumPy between native segments)."""
    from .loader import pocketfft_address

    try:
        pocketfft_address("fft_d")
    except ImportError:
        return False
    return True


def steps(op: Op) -> list[tuple[str, int, tuple, tuple]]:
    """The one-dimensional transforms of ``op`` in NumPy's order: ``(kind, axis, input
    shape, output shape)``, ``kind`` one of ``fft``, ``ifft``, ``rfft``, ``irfft``."""
    kind, axes, last = op.attrs["kind"], tuple(op.attrs["axes"]), op.attrs["last"]
    if kind in ("fft", "ifft"):
        order = [(kind, a) for a in reversed(axes)]
    elif kind == "rfft":
        order = [("rfft", axes[-1])] + [("fft", a) for a in reversed(axes[:-1])]
    else:
        order = [("ifft", a) for a in axes[:-1]] + [("irfft", axes[-1])]
    shape = tuple(op.operands[0].type.shape)
    out = []
    for k, a in order:
        new = list(shape)
        if k == "rfft":
            new[a] = shape[a] // 2 + 1
        elif k == "irfft":
            new[a] = last
        out.append((k, a, shape, tuple(new)))
        shape = tuple(new)
    return out


def work(op: Op) -> int:
    """Elements of loop work of ``op``, about: each transform's elements times the
    binary logarithm of its length."""
    return sum(math.prod(max(i, o) for i, o in zip(src, dst))
               * max(1, math.ceil(math.log2(max(src[a], dst[a]))))
               for _, a, src, dst in steps(op))


def _precision(op: Op) -> str:
    """``d`` (NumPy's double loops) or ``f`` (its float loops)."""
    return "d" if op.operands[0].type.dtype in (np.float64, np.complex128) else "f"


def _scaling(kind: str, norm: str) -> str:
    """How NumPy scales a transform of ``kind``: ``backward`` (not), ``ortho`` (by ``1 /
    sqrt(n)``) or ``forward`` (by ``1 / n``): ``norm`` swapped for the inverse ones."""
    if kind in ("ifft", "irfft"):
        return {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return norm


def _unit(kind: str, norm: str) -> bool:
    """Whether a transform's factor is NumPy's Python integer 1 (no scaling), with which
    the ufunc picks its double loop whatever the array's precision: float32 and
    complex64 arrays are then transformed in float64 and the result rounded."""
    return _scaling(kind, norm) == "backward"


class Fourier:
    """Mixed into ``entry.Entry`` (uses ``b``, ``vals``, ``_place``, ``_scratch``,
    ``_size`` and ``_helper``)."""

    def _fft(self, op: Op) -> None:
        out = op.results[0]
        plan = steps(op)
        dst = self._place(out)
        complex_bytes = 16 if _precision(op) == "d" else 8
        inner = [math.prod(s[3]) * complex_bytes for s in plan[:-1]]
        places = [self._scratch(max(inner)) for _ in range(min(2, len(inner)))]
        wide = [s for s in plan if _precision(op) == "f" and _unit(s[0], op.attrs["norm"])]
        if wide:  # the float64 copies of the input and the result of such a transform
            places += [self._scratch(max(math.prod(s[i]) for s in wide) * 16) for i in (2, 3)]
        sizes = []
        for _, a, src, res in plan:
            sizes += [math.prod(src[:a]), math.prod(src[a + 1:]), src[a], res[a]]
        args = [self.vals[op.operands[0]], dst, *places, *(self._size(n) for n in sizes)]
        self._helper(args, lambda f: _build(f, op, plan, len(places)))
        self.vals[out] = dst


# --- the loop ----------------------------------------------------------------------


def _loop(mod: ir.Module, name: str) -> ir.Function:
    """NumPy's gufunc loop registered as ``name``, declared in ``mod``."""
    fn = mod.globals.get(name)
    if fn is None:
        fnty = ir.FunctionType(ir.VoidType(), [PTR.as_pointer(), I64.as_pointer(),
                                               I64.as_pointer(), PTR])
        fn = ir.Function(mod, fnty, name)
    return fn


def _data(mod: ir.Module, name: str) -> ir.Value:
    """The loop's ``data`` (the byte NumPy's ufunc holds for it: its direction)."""
    g = mod.globals.get(name + "_data")
    if g is None:
        g = ir.GlobalVariable(mod, ir.IntType(8), name + "_data")
        g.linkage = "external"
    return g


def symbol(ufunc: str, precision: str) -> str:
    """The name a module calls the loop of ``ufunc`` in ``precision`` (``d``/``f``) by."""
    return f"fusegrad_pocketfft_{ufunc}_{precision}"


def _factor(b: ir.IRBuilder, kind: str, norm: str, n: ir.Value, ty: ir.Type) -> ir.Value:
    """NumPy's ``fct`` for a transform of length ``n``: ``1``, ``1 / n`` or
    ``1 / sqrt(n)`` computed in ``ty`` as ``np.reciprocal`` and ``np.sqrt`` do."""
    scaling = _scaling(kind, norm)
    one = ir.Constant(ty, 1.0)
    if scaling == "backward":
        return one
    x = b.sitofp(n, ty)
    if scaling == "ortho":
        name = "llvm.sqrt.f64" if ty == _F64 else "llvm.sqrt.f32"
        sqrt = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(ty, [ty]), name)
        x = b.call(sqrt, [x])
    return b.fdiv(one, x)


def _build(f: ir.Function, op: Op, plan, scratches: int) -> None:
    """The loop function: each transform of ``plan`` in turn, from the operand (its first
    argument) through the arena places after the result (its second) to the result."""
    b = ir.IRBuilder(f.append_basic_block("entry"))
    places = list(f.args[2:2 + scratches])
    sizes = f.args[2 + scratches:]
    prec, norm = _precision(op), op.attrs["norm"]
    wide = places[-2:] if prec == "f" and any(_unit(s[0], norm) for s in plan) else None
    slots = (b.alloca(PTR, 3), b.alloca(I64, 3), b.alloca(I64, 5),
             b.alloca(_F64), b.alloca(_F32))
    for k, (kind, _, _, _) in enumerate(plan):
        a, c, n_in, n_out = sizes[4 * k:4 * k + 4]
        src = f.args[0] if k == 0 else places[(k - 1) % 2]
        dst = f.args[1] if k == len(plan) - 1 else places[k % 2]
        if prec == "f" and _unit(kind, norm):  # NumPy's double loop, the result rounded
            count_in = b.mul(b.mul(a, c), b.mul(n_in, ir.Constant(I64, 1 + (kind != "rfft"))))
            count_out = b.mul(b.mul(a, c), b.mul(n_out, ir.Constant(I64, 1 + (kind != "irfft"))))
            b = _convert(b, f, src, wide[0], count_in, _F32, _F64)
            b = _transform(b, f, kind, "d", norm, wide[0], wide[1], (a, c, n_in, n_out), slots)
            b = _convert(b, f, wide[1], dst, count_out, _F64, _F32)
        else:
            b = _transform(b, f, kind, prec, norm, src, dst, (a, c, n_in, n_out), slots)
    b.ret_void()


def _convert(b, f, src, dst, count, frm, to) -> ir.IRBuilder:
    """``dst[i] = src[i]`` for ``i < count``, from float type ``frm`` to ``to``."""
    src, dst = b.bitcast(src, frm.as_pointer()), b.bitcast(dst, to.as_pointer())

    def body(b, idx):
        v = b.load(b.gep(src, [idx[0]]))
        v = b.fpext(v, to) if to == _F64 else b.fptrunc(v, to)
        b.store(v, b.gep(dst, [idx[0]]))
    return loop_nest(b, f, (count,), body)


def _put(b, slot, i, v) -> None:
    b.store(v, b.gep(slot, [ir.Constant(I64, i)]))


def _transform(b, f, kind, prec, norm, src, dst, sizes, slots) -> ir.IRBuilder:
    """Calls of NumPy's loop of ``kind`` in ``prec`` over the rows of a C-ordered ``(A,
    n_in, C)`` array at ``src``, to ``(A, n_out, C)`` at ``dst`` (``sizes``: ``(A, C,
    n_in, n_out)``; ``slots``: the calls' argument arrays and factors)."""
    a, c, n_in, n_out = sizes
    args, dims, strides = slots[:3]
    ty, fct = (_F64, slots[3]) if prec == "d" else (_F32, slots[4])
    real, cplx = (8, 16) if prec == "d" else (4, 8)
    isz = ir.Constant(I64, real if kind == "rfft" else cplx)
    osz = ir.Constant(I64, real if kind == "irfft" else cplx)
    data = ir.Constant(PTR, None)
    if kind == "rfft":  # the loop for the length's parity
        fn = b.select(b.trunc(n_in, ir.IntType(1)), _loop(f.module, symbol("rfft_n_odd", prec)),
                      _loop(f.module, symbol("rfft_n_even", prec)))
    else:
        fn = _loop(f.module, symbol(kind, prec))
        if kind != "irfft":
            data = _data(f.module, symbol(kind, prec))
    b.store(_factor(b, kind, norm, n_out if kind == "irfft" else n_in, ty), fct)
    one = ir.Constant(I64, 1)
    rows = b.icmp_signed("==", c, one)  # rows of length n, one after another
    _put(b, dims, 0, b.select(rows, a, c))
    _put(b, dims, 1, n_in)
    _put(b, dims, 2, n_out)
    for i, v in enumerate((b.select(rows, b.mul(n_in, isz), isz), ir.Constant(I64, 0),
                           b.select(rows, b.mul(n_out, osz), osz), b.mul(c, isz),
                           b.mul(c, osz))):
        _put(b, strides, i, v)
    _put(b, args, 1, b.bitcast(fct, PTR))
    block_in, block_out = b.mul(b.mul(n_in, c), isz), b.mul(b.mul(n_out, c), osz)

    def each(b, idx):
        _put(b, args, 0, b.gep(src, [b.mul(idx[0], block_in)]))
        _put(b, args, 2, b.gep(dst, [b.mul(idx[0], block_out)]))
        b.call(fn, [args, dims, strides, data])
    return loop_nest(b, f, (b.select(rows, one, a),), each)
