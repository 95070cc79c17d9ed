"""Fused IR -> Numba source: the loop kernels (``fused`` ops) and the writer they share.

Every concrete size the code needs (loop extents, shapes, slice bounds) is
read from the int64 array ``d`` passed at run time, except sizes equal to 1,
which decide broadcasting and are written into the text. Two calls whose
shapes differ only in extents therefore produce the same source and share its
machine code. Each generated line ends with the IR op it implements.

Loop kernels are written here, the ops between them by ``codegen.driver`` and
control flow by ``codegen.control``; ``codegen.module`` puts a Function's
statements into the entry functions of one module (``generate``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..ir import Function, Op, Value
from ..ir.count_op import count_n
from ..ir.printer import format_op_header, value_names
from ..ir.types import TensorType, dtype_name
from . import mathlib as ml
from .templates import SCALAR

NP_DTYPE = {"f64": "np.float64", "f32": "np.float32", "f16": "np.float16", "i64": "np.int64",
            "i32": "np.int32", "i16": "np.int16", "i8": "np.int8", "u8": "np.uint8",
            "bool": "np.bool_", "c64": "np.complex64", "c128": "np.complex128"}

#: elements per chunk of a flat loop: fixed, so results never depend on the thread count
CHUNK = 512


class LoweringError(NotImplementedError):
    """An op the code generator has no lowering for (listed with its source line)."""


def np_dtype(t: TensorType) -> str:
    return NP_DTYPE[dtype_name(t.dtype)]


def literal(value, t: TensorType) -> str:
    """A typed scalar literal: float32 constants stay float32."""
    name = dtype_name(t.dtype)
    if name == "bool":
        return "True" if value else "False"
    if isinstance(value, str | complex) and t.dtype.kind == "c":
        return f"{NP_DTYPE[name]}({complex(value)!r})"
    if isinstance(value, float) and not math.isfinite(value):
        text = "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    else:
        text = repr(value)
    return f"{NP_DTYPE[name]}({text})"


def count_expr(w: _Writer, op: Op) -> str:
    """A ``count`` op: its element count read from the sizes table, as a float scalar."""
    n = count_n(op.attrs["shape"], op.attrs["axes"])
    return f"{np_dtype(op.results[0].type)}({w.number(n)})"


def reduce_init(name: str, t: TensorType) -> str:
    if name == "reduce_sum":
        return literal(0, t)
    big = "inf" if t.is_float else None
    if big is None:
        info = np.iinfo(t.dtype) if t.dtype != np.bool_ else None
        value = (info.min if name == "reduce_max" else info.max) if info else name == "reduce_min"
        return literal(int(value), t) if info else literal(value, t)
    return literal(-np.inf if name == "reduce_max" else np.inf, t)


class _Writer:
    """Shared state of one module: the sizes table and the text."""

    def __init__(self, buffers=None):
        self.dims: list[int] = []
        self.parts: list[str] = []
        self.buffers = buffers  # a codegen.buffers.BufferPlan, or None
        self.parallel = False  # writing the body of the parallel entry

    def slot(self, v) -> str | None:
        """The entry argument ``v`` is written into, if the buffer plan gives it one (``v``:
        a Value, or ``(value, "part" | "buf")`` for a reduction's scratch arrays)."""
        return None if self.buffers is None else self.buffers.name(v)

    def size(self, n: int) -> str:
        if n == 1:
            return "1"
        self.dims.append(int(n))
        return f"d[{len(self.dims) - 1}]"

    def number(self, n: int) -> str:
        self.dims.append(int(n))
        return f"d[{len(self.dims) - 1}]"

    def shape(self, shape) -> str:
        items = [self.size(n) for n in shape]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _py_names(fn: Function, prefix: str = "") -> dict[Value, str]:
    out = {}
    for v, name in value_names(fn).items():
        n = name[1:]
        out[v] = f"{prefix}v{n}" if n[0].isdigit() else f"{prefix}a_{n}"
    return out


#: attributes whose values are sizes, read from ``d`` at run time (not in the text)
_SIZE_ATTRS = ("shape", "starts", "stops", "n", "length", "last")


def _generic_dims(m: re.Match) -> str:
    return "[" + ",".join(d if d in ("", "1") else "*" for d in m.group(1).split(",")) + "]"


def _comment(op: Op, names) -> str:
    """The IR op a line implements, with sizes other than 1 shown as ``*``: the text must
    not depend on extents, or every new shape would compile again."""
    shown = op.replace(attrs={k: v for k, v in op.attrs.items() if k not in _SIZE_ATTRS})
    head, _, types = format_op_header(shown, names).partition(" : ")
    return "  # " + head + (" : " + re.sub(r"\[([\d,]*)\]", _generic_dims, types) if types
                            else "")


def _math_suffix(op: Op) -> str | None:
    """``f64``/``f32`` when the math library implements ``op`` at its dtype, else None."""
    t = op.results[0].type
    name = dtype_name(t.dtype)
    if name in ("f64", "f32") and (op.name, t.dtype) in ml.FUNCTIONS:
        return name
    return None


def _scalar_expr(op: Op, args: list[str], full: bool = True) -> str:
    """The expression computing one element of ``op``. Math functions come from the math
    library; ``full=False`` takes the vector path of those with rare inputs (the caller
    then flags the rare lanes, see ``_rare_flag``)."""
    if op.name == "convert":
        if op.operands[0].type.dtype.kind == "c" and op.attrs["dtype"][0] != "c":
            return f"{NP_DTYPE[op.attrs['dtype']]}({args[0]}.real)"
        return f"{NP_DTYPE[op.attrs['dtype']]}({args[0]})"
    if op.name == "sign" and op.results[0].type.dtype.kind == "c":
        return f"rt.csign({args[0]})"
    sfx = _math_suffix(op)
    if sfx is not None:
        variant = "_full" if full and op.name in ml.RARE else ""
        return f"ml.{op.name}{variant}_{sfx}({', '.join(args)})"
    if _signed_int_pow(op):
        return f"rt.power{'_checked' if full else ''}({args[0]}, {args[1]})"
    return SCALAR[op.name].format(*args, **op.attrs)


def _signed_int_pow(op: Op) -> bool:
    """Integer ``pow`` with a signed exponent: a negative one must raise, as in NumPy."""
    return op.name == "pow" and op.operands[1].type.dtype.kind == "i"


def _sincos_pairs(body: Function) -> dict:
    """For each value with both ``sin`` and ``cos`` taken: the first of the two ops maps to
    its (sin result, cos result), the second to None (already computed)."""
    sins, coss = {}, {}
    for op in body.ops:
        if op.name in ("sin", "cos") and _math_suffix(op):
            (sins if op.name == "sin" else coss).setdefault(op.operands[0], op)
    pairs: dict = {}
    for v, s in sins.items():
        c = coss.get(v)
        if c is not None:
            first, second = (s, c) if body.ops.index(s) < body.ops.index(c) else (c, s)
            pairs[first] = (s.results[0], c.results[0])
            pairs[second] = None
    return pairs


def _rare_flag(op: Op, args: list[str]) -> str | None:
    """``ml.trig_rare_f64(x)`` for an op whose vector path misses rare inputs (``x < 0``
    for the exponent of an integer power: the exact entry raises)."""
    if _signed_int_pow(op):
        return f"{args[-1]} < 0"
    sfx = _math_suffix(op)
    if sfx is None or op.name not in ml.RARE:
        return None
    return f"ml.{ml.RARE[op.name]}_{sfx}({args[0]})"


#: scalar ops of a kernel's body computed once before its loops
_HOISTED = ("constant", "count")


class _Kernel:
    """One fused op as a loop nest over its iteration space, written inline in ``entry``.

    Inputs are read with broadcasting index arithmetic (an input's size-1 axes
    read index 0), elementwise results used outside are stored per element,
    and reductions accumulate in the same pass: full reductions into a scalar,
    partial ones into an array indexed by the kept axes.
    """

    def __init__(self, w: _Writer, op: Op, index: int, prefix: str = ""):
        self.w, self.op, self.body = w, op, op.regions[0]
        self.tag = f"{prefix}k{index}_"
        self.space = next(
            bop.operands[0].type.shape if bop.name.startswith("reduce_")
            else bop.results[0].type.shape
            for bop in self.body.ops if bop.name not in _HOISTED
        )

    def _kinds(self):
        """For each body result: 'array' (stored per element), 'partial' or 'full'."""
        producer = {r: o for o in self.body.ops for r in o.results}
        out = []
        for r in self.body.results:
            p = producer.get(r)
            if p is not None and p.name.startswith("reduce_"):
                out.append((r, p, "full" if r.type.shape == () else "partial"))
            else:
                out.append((r, p, "array"))
        return out

    def lines(self, outer: dict, op_names, exact: bool) -> list[str]:
        """Driver lines computing the kernel: the flat chunked form where it applies.

        If the kernel uses a math function whose vector path misses rare inputs, the
        fast form (``exact=False``) also flags them into ``rare_any``; the caller then
        runs the exact form of the whole function (``entry_exact``) instead.
        """
        head = f"    # kernel {self.tag[:-1]}: " + ("flat loop in chunks of "
                                                   f"{CHUNK}" if self._flat() else "loop nest")
        head += _comment(self.op, op_names)[1:]
        make = self._flat_lines if self._flat() else self._nest_lines
        if exact or not self.has_rare():
            return [head, *make(outer, None)]
        flag = f"{self.tag}rare"
        return [head, *make(outer, flag), f"    rare_any |= {flag}"]

    def has_rare(self) -> bool:
        return any(_rare_flag(op, ["x"]) for op in self.body.ops)

    def _flat(self) -> bool:
        """Every array input has the full iteration shape and every reduction is total:
        the loop runs over the flattened space in fixed chunks (prange-able, vectorised
        reductions through per-chunk lanes)."""
        if any(p.type.shape not in ((), self.space) for p in self.body.params):
            return False
        return all(kind != "partial" for _, _, kind in self._kinds())

    def _statements(self, names, local, idx_for, on_reduce, flag, at=None) -> list[str]:
        """The loop body: loads, one line per op, reductions via ``on_reduce``; with a
        ``flag`` name, the vector paths of math functions and ``flag |= rare(x)``.
        ``at``: for some params, the index to load them at instead of ``idx_for``'s."""
        body = self.body
        irnames = value_names(body)
        inner = []
        at = at or {}
        for p in body.params:
            if p.type.shape != ():
                inner.append(f"{names[p]} = {local[p]}[{at.get(p) or idx_for(p.type.shape)}]")
                local[p] = names[p]
        paired = _sincos_pairs(body)
        for bop in body.ops:
            if bop.name in _HOISTED or (bop in paired and paired[bop] is None):
                continue
            res = bop.results[0]
            comment = _comment(bop, irnames)
            if bop.name.startswith("reduce_"):
                inner.append(on_reduce(bop, local[bop.operands[0]]) + comment)
                continue
            args = [local[v] for v in bop.operands]
            if bop in paired:  # sin and cos of one value share their range reduction
                s, c = paired[bop]
                variant = "_full" if flag is None else ""
                inner.append(f"{names[s]}, {names[c]} = ml.sincos{variant}_"
                             f"{_math_suffix(bop)}({args[0]})" + comment + " (and cos)")
                local[s], local[c] = names[s], names[c]
            else:
                inner.append(f"{names[res]} = {_scalar_expr(bop, args, flag is None)}"
                             + comment)
                local[res] = names[res]
            rare = _rare_flag(bop, args) if flag else None
            if rare:
                inner.append(f"{flag} |= {rare}")
        return inner

    def _constants(self, names, local) -> list[str]:
        irnames = value_names(self.body)
        out = []
        for bop in self.body.ops:
            if bop.name in _HOISTED:
                res = bop.results[0]
                value = (count_expr(self.w, bop) if bop.name == "count"
                         else literal(bop.attrs["value"], res.type))
                out.append(f"    {names[res]} = {value}" + _comment(bop, irnames))
                local[res] = names[res]
        return out

    def _inputs(self, outer, names, flat: bool) -> tuple[dict, list[str]]:
        local, lines = {}, []
        for p, operand in zip(self.body.params, self.op.operands):
            if p.type.shape == () or not flat or len(self.space) == 1:
                local[p] = outer[operand]
            else:
                local[p] = names[p] + "_flat"
                lines.append(f"    {local[p]} = rt.contiguous({outer[operand]}).ravel()")
        return local, lines

    def _nest_lines(self, outer, flag) -> list[str]:
        body, w, t = self.body, self.w, self.tag
        names = {v: t + n for v, n in _py_names(body).items()}
        idx = [f"{t}i{k}" for k in range(len(self.space))]
        dest, lines = {}, []
        for (r, p, kind), res in zip(self._kinds(), self.op.results):
            dest[r] = outer[res]
            slot = w.slot(res)
            if slot and kind == "array":
                lines.append(f"    {outer[res]} = {slot}")
            elif slot and kind == "partial":
                lines += [f"    {outer[res]} = {slot}",
                          f"    rt.fill({outer[res]}, {reduce_init(p.name, r.type)})"]
            elif kind == "array":
                lines.append(f"    {outer[res]} = rt.empty({w.shape(r.type.shape)}, "
                             f"{np_dtype(r.type)})")
            elif kind == "partial":
                lines.append(f"    {outer[res]} = rt.full({w.shape(r.type.shape)}, "
                             f"{reduce_init(p.name, r.type)})")
            else:
                lines.append(f"    {outer[res]} = {reduce_init(p.name, r.type)}")
        local, pre = self._inputs(outer, names, flat=False)
        lines += pre + self._constants(names, local)
        if flag:
            lines.append(f"    {flag} = False")
        # a reduction over the innermost axis only: the inner loop stores its terms in a
        # row buffer (no loop-carried dependency: the loop vectorises, transcendental
        # functions included), then they are accumulated in a local, in the same order
        row, inner_n = {}, w.size(self.space[-1])
        for j, ((r, p, kind), res) in enumerate(zip(self._kinds(), self.op.results)):
            if kind == "partial" and tuple(p.attrs["axes"]) == (len(self.space) - 1,):
                row[r] = (f"{t}acc{j}", f"{t}row{j}", p)
                lines.append(f"    {t}row{j} = " + (w.slot((res, "row")) or
                                                   f"rt.empty({inner_n}, {np_dtype(r.type)})"))

        def on_reduce(bop, arg):
            r = bop.results[0]
            if r in row:
                return f"{row[r][1]}[{idx[-1]}] = {arg}"
            return self._accumulate(bop, arg, dest, idx)
        inner = self._statements(
            names, local, lambda shape: self._index(shape, idx), on_reduce, flag)
        for r, _, kind in self._kinds():
            if kind == "array":
                inner.append(f"{dest[r]}[{', '.join(idx)}] = {local[r]}")
        indent = "    "
        for k, n in enumerate(self.space):
            lines.append(f"{indent}for {idx[k]} in range({w.size(n)}):")
            indent += "    "
        lines += [indent + s for s in inner]
        kept, outer_indent, q = ", ".join(idx[:-1]), indent[:-4], f"{t}q"
        for r, (a, b, p) in row.items():
            lines += [f"{outer_indent}{a} = {dest[r]}[{kept}]",
                      f"{outer_indent}for {q} in range({inner_n}):",
                      f"{outer_indent}    " + self._accumulate(p, f"{b}[{q}]", {r: a}, []),
                      f"{outer_indent}{dest[r]}[{kept}] = {a}"]
        return lines

    def _flat_lines(self, outer, flag) -> list[str]:
        body, w, t = self.body, self.w, self.tag
        names = {v: t + n for v, n in _py_names(body).items()}
        n, i, c = f"{t}n", f"{t}i", f"{t}c"
        lines = [f"    {n} = {w.size(math.prod(self.space))}",
                 f"    {t}chunks = ({n} + {CHUNK - 1}) // {CHUNK}"]
        local, pre = self._inputs(outer, names, flat=True)
        lines += pre
        stores, reds = {}, {}
        for (r, p, kind), res in zip(self._kinds(), self.op.results):
            if kind == "array":
                stores[r] = f"{t}out{len(stores)}"
                slot = w.slot(res)
                lines.append(f"    {stores[r]} = " + (f"{slot}.reshape({n})" if slot else
                                                      f"rt.empty({n}, {np_dtype(r.type)})"))
            else:
                reds[r] = (p.name, f"{t}part{len(reds)}", f"{t}buf{len(reds)}", res)
                part = w.slot((res, "part")) or f"rt.empty({t}chunks, {np_dtype(r.type)})"
                lines.append(f"    {reds[r][1]} = {part}")
        lines += self._constants(names, local)
        if flag:
            lines.append(f"    {t}flags = rt.zeros({t}chunks, np.bool_)")
        lines += [f"    for {c} in numba.prange({t}chunks):",
                  f"        {t}lo = {c} * {CHUNK}",
                  f"        {t}hi = min({t}lo + {CHUNK}, {n})"]
        if flag:
            lines.append(f"        {flag} = False")
        row = "numba.get_thread_id()" if w.parallel else "0"  # one row of lanes per thread
        for r, (_, _, buf, res) in reds.items():
            rows = w.slot((res, "buf"))
            lines.append(f"        {buf} = " + (f"{rows}[{row}]" if rows else
                                                f"rt.empty({CHUNK}, {np_dtype(r.type)})"))

        def to_buffer(bop, arg):
            return f"{reds[bop.results[0]][2]}[{t}j] = {arg}"

        inner = self._statements(names, local, lambda shape: i, to_buffer, flag)
        inner += [f"{stores[r]}[{i}] = {local[r]}" for r in stores]
        # from 0, not from lo: Numba then knows the index is not negative (no wraparound
        # select), which lets LLVM vectorise the chunk (3-4x faster without reductions)
        lines += [f"        for {t}j in range({t}hi - {t}lo):", f"            {i} = {t}lo + {t}j"]
        lines += ["            " + s for s in inner]
        if flag:
            lines.append(f"        {t}flags[{c}] = {flag}")
        for r, (kind, part, buf, _) in reds.items():
            zero = reduce_init(kind, r.type)
            lines.append(f"        {part}[{c}] = rt.lanes_{kind[7:]}({buf}, {t}hi - {t}lo, {zero})")
        for r, (kind, part, _, res) in reds.items():
            lines.append(f"    {outer[res]} = rt.combine_{kind[7:]}({part}, "
                         f"{reduce_init(kind, r.type)})")
        for (r, _, kind), res in zip(self._kinds(), self.op.results):
            if kind == "array" and w.slot(res):
                lines.append(f"    {outer[res]} = {w.slot(res)}")
            elif kind == "array":
                shape = w.shape(r.type.shape) if len(self.space) > 1 else None
                lines.append(f"    {outer[res]} = {stores[r]}" + (
                    f".reshape({shape})" if shape else ""))
        if flag:
            lines.append(f"    {flag} = rt.any_true({t}flags)")
        return lines

    def _index(self, shape, idx) -> str:
        lead = len(self.space) - len(shape)
        return ", ".join(
            "0" if n == 1 and self.space[lead + j] != 1 else idx[lead + j]
            for j, n in enumerate(shape)
        )

    def _accumulate(self, bop, arg, dest, idx) -> str:
        r = bop.results[0]
        target = dest[r]
        if r.type.shape != () and idx:
            keep = [i for k, i in enumerate(idx) if k not in bop.attrs["axes"]]
            target = f"{target}[{', '.join(keep)}]"
        if bop.name == "reduce_sum":
            return f"{target} += {arg}"
        fn = "rt.maximum" if bop.name == "reduce_max" else "rt.minimum"
        return f"{target} = {fn}({target}, {arg})"
