"""Dense linear algebra in an entry: LAPACK, called as NumPy and SciPy call it.

``cholesky``, ``solve``, ``slogdet`` and ``triangular_solve`` of real matrices (float32,
float64), and ``solve`` of complex ones (complex64, complex128), run in compiled code,
each one call of a loop over the batch built in a module of its own (named by content;
the sizes are its arguments, so one module serves every size). Each matrix is handled
exactly as the interpreter's implementation handles it, so the answers are LAPACK's
for the same input in the same layout:

- ``cholesky`` (``np.linalg.cholesky``): the matrix copied in Fortran order, ``?potrf``
  on its lower triangle, the factor copied back with the upper triangle zeroed;
- ``solve`` (``np.linalg.solve``): both operands copied in Fortran order, ``?gesv``;
- ``slogdet`` (``np.linalg.slogdet``): ``?getrf`` of the Fortran copy; the sign from
  the pivots and the diagonal's signs, the logarithm the sum over the diagonal in
  order (C's ``log``); a singular matrix gives ``(0, -inf)``;
- ``triangular_solve`` (``scipy.linalg.solve_triangular``): ``?trtrs`` reading the
  C-ordered matrix as the transposed Fortran one (so the other triangle and the other
  ``trans``), the right-hand side copied in Fortran order; an empty right-hand side is
  not solved (SciPy returns it at once).

The routines are those the interpreter's implementation calls: NumPy's bundled
OpenBLAS (ILP64: 64-bit integers, ``symbols.numpy_lapack``) for the first three, so the
bits are ``np.linalg``'s, and SciPy's LAPACK (LP64, ``symbols.blas_address``) for
``triangular_solve`` and wherever NumPy was built against another LAPACK. As NumPy
does, the first three compute float32 matrices in float64 and complex64 in complex128
(the copies convert; ``zgesv`` for complex ``solve``) and round the answers back. A
matrix that is not positive definite, or singular for ``solve`` / ``triangular_solve``,
makes the loop return LAPACK's ``info`` (> 0); the entry then raises NumPy's
``LinAlgError`` with the interpreter's message (``indexing.Indexing._leave``).
``decompositions.py`` lowers ``eigh``, ``svd`` and ``qr`` with the same calls
(``_Fortran``) and copies (``_transpose``).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ...ir import Op
from . import complexes, symbols
from . import scalar as sc
from .kernel import I64, PTR, loop_nest

I32 = ir.IntType(32)
I8 = ir.IntType(8)
#: the ops lowered here
LOWERED = ("cholesky", "solve", "slogdet", "triangular_solve")
#: each op's ``LinAlgError``: the code a C entry writes for its caller, the message (the
#: interpreter's, ``%lld`` LAPACK's ``info`` - 1) and the caller's (no ``info``)
ERRORS = {
    "cholesky": (3, "Matrix is not positive definite", "Matrix is not positive definite"),
    "solve": (2, "Singular matrix", "Singular matrix"),
    "triangular_solve": (4, "singular matrix: resolution failed at diagonal %lld",
                         "singular matrix: resolution failed"),
}


#: the ops lowered for complex64 / complex128 matrices too (``zlapack.py``): those whose
#: IR takes complex operands
COMPLEX = ("solve", "eigh", "svd")


def lowered(op: Op) -> bool:
    """Whether the entry lowers linear-algebra op ``op``: real float32 / float64, or for
    ``COMPLEX``' ops complex64 / complex128 (real results of the same precision)."""
    dts = {v.type.dtype for v in (*op.operands, *op.results)}
    if len(dts) == 1 and dts <= {np.dtype(np.float64), np.dtype(np.float32)}:
        return True
    t = op.operands[0].type.dtype
    return (op.name in COMPLEX and t in (np.complex64, np.complex128)
            and dts <= {t, np.dtype(np.float32 if t == np.complex64 else np.float64)})


def work(op: Op) -> int:
    """Multiply-adds of ``op``, about: ``n**3`` (and ``n**2`` per right-hand side)."""
    a = op.operands[0].type.shape
    n = a[-1]
    count = math.prod(a[:-2])
    k = op.operands[1].type.shape[-1] if len(op.operands) > 1 else 0
    return count * (n ** 3 + n * n * k)


def symbol(routine: str, wide: bool) -> str:
    """The name a module calls LAPACK's ``routine`` by (``symbols.provide`` links it):
    NumPy's ILP64 one if ``wide``, else SciPy's."""
    return f"fusegrad_lapack{'64' if wide else ''}_{routine}"


def wide(op: Op) -> bool:
    """Whether ``op`` calls NumPy's ILP64 LAPACK (64-bit integers), as ``np.linalg``
    does, rather than SciPy's."""
    return op.name != "triangular_solve" and symbols.numpy_lapack() is not None


class Lapack:
    """Mixed into ``entry.Entry`` (uses ``b``, ``vals``, ``_place``, ``_scratch``,
    ``_typed``, ``_size``, ``_helper`` and ``_leave``)."""

    def _linalg(self, op: Op) -> None:
        t = op.operands[0].type
        a = op.operands[0]
        it = I64 if wide(op) else I32  # LAPACK's integers
        # the dtype LAPACK works in (``np.linalg``'s float32 is computed in float64,
        # complex64 in complex128)
        work = t.dtype if op.name == "triangular_solve" else working(t.dtype)
        n = t.shape[-1]
        count = math.prod(t.shape[:-2])
        item = work.itemsize
        sizes = [self._size(n), self._size(count)]
        if op.name == "slogdet":
            outs = [self._out_or_scratch(r) for r in op.results]
            args = [self._typed(self.vals[a], t), *(self._typed(o, t) for o in outs),
                    self._typed(self._scratch(n * n * item), work),
                    self._pivots(n, it), *sizes]
            self._helper(args, lambda f: _slogdet(f, work, it))
            for r, o in zip(op.results, outs):
                self.vals[r] = sc.load(self.b, self._typed(o, t), t) if r.type.shape == () else o
            return
        out = self._place(op.results[0])
        if op.name == "cholesky":
            args = [self._typed(self.vals[a], t), self._typed(out, t),
                    self._typed(self._scratch(n * n * item), work), *sizes]
            status = self._helper(args, lambda f: _cholesky(f, work, it), I64)
        else:
            rhs = op.operands[1]
            k = rhs.type.shape[-1]
            args = [self._typed(self.vals[a], t), self._typed(self.vals[rhs], t),
                    self._typed(out, t), self._typed(self._scratch(n * k * item), work)]
            if op.name == "solve":
                args += [self._typed(self._scratch(n * n * item), work), self._pivots(n, it)]
                build = _solve
            else:
                attrs = op.attrs
                build = _triangular(bool(attrs["lower"]), bool(attrs["trans"]),
                                    bool(attrs["unit_diagonal"]))
            status = self._helper([*args, *sizes, self._size(k)],
                                  lambda f: build(f, work, it), I64)
        self._status(op, status, ERRORS[op.name])
        self.vals[op.results[0]] = out

    def _status(self, op: Op, status: ir.Value, error: tuple) -> None:
        """Raise ``error`` (as ``ERRORS``' values) if the loop's ``status`` is not 0."""
        b = self.b
        code, message, _ = error
        with b.if_then(b.icmp_signed("!=", status, ir.Constant(I64, 0)), likely=False):
            info = b.sub(status, ir.Constant(I64, 1)) if "%" in message else None
            self._leave(code, lambda: self._raise_linalg(message, info))

    def _pivots(self, n: int, it) -> ir.Value:
        """An arena place for ``n`` of LAPACK's integers (``it``)."""
        return self.b.bitcast(self._scratch(n * it.width // 8), it.as_pointer())

    def _out_or_scratch(self, r) -> ir.Value:
        t = r.type
        return self._scratch(t.dtype.itemsize) if t.shape == () else self._place(r)

    def _raise_linalg(self, message: str, info) -> None:
        """Set NumPy's ``LinAlgError`` with ``message`` (``%lld``: ``info``)."""
        b = self.b
        exc = self.mod.globals.get("fusegrad_LinAlgError") or ir.GlobalVariable(
            self.mod, PTR, "fusegrad_LinAlgError")  # registered by ``engine``
        fmt = self.mod.globals.get("PyErr_Format") or ir.Function(
            self.mod, ir.FunctionType(PTR, [PTR, PTR], var_arg=True), "PyErr_Format")
        args = [b.load(exc), self._string(message)]
        b.call(fmt, args if info is None else [*args, info])


# --- the loops ---------------------------------------------------------------------


def working(dtype) -> np.dtype:
    """The dtype ``np.linalg`` computes matrices of ``dtype`` in: float64 or complex128."""
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


def _prefix(dtype) -> str:
    return {"f8": "d", "f4": "s", "c16": "z", "c8": "c"}[np.dtype(dtype).str[1:]]


def _cast(b, v, to: ir.Type) -> ir.Value:
    """Element ``v`` (real or complex) as the element type ``to`` of the same kind."""
    if v.type == to:
        return v
    if complexes.is_complex_type(to):
        return complexes.promote(b, v, to)
    return b.fpext(v, to) if isinstance(to, ir.DoubleType) else b.fptrunc(v, to)


class _Fortran:
    """A loop function's calls to LAPACK (Fortran's convention: every argument by
    reference, then one hidden length per character argument) with integers of
    LAPACK's width ``it`` (i32 or i64)."""

    def __init__(self, f: ir.Function, it: ir.IntType, dtype):
        self.f, self.it, self.dtype = f, it, dtype
        self.b = ir.IRBuilder(f.append_basic_block("entry"))

    def routine(self, name: str, args: str) -> ir.Function:
        """LAPACK's ``<s|d|c|z>name`` declared in the module: ``args`` one letter per
        argument, ``c`` a character, ``i`` an integer, ``a`` an array of the dtype,
        ``r`` an array of its real type, ``p`` an array of integers."""
        mod = self.f.module
        sym = symbol(_prefix(self.dtype) + name, self.it.width == 64)
        ety = sc.mem_type(np.dtype(self.dtype))
        real = complexes.part_type(ety) if complexes.is_complex_type(ety) else ety
        kinds = {"c": I8.as_pointer(), "i": self.it.as_pointer(), "a": ety.as_pointer(),
                 "r": real.as_pointer(), "p": self.it.as_pointer()}
        types = [kinds[k] for k in args] + [I64] * args.count("c")
        return mod.globals.get(sym) or ir.Function(
            mod, ir.FunctionType(ir.VoidType(), types), sym)

    def call(self, fn: ir.Function, args, chars: int = 0) -> None:
        self.b.call(fn, [*args, *[ir.Constant(I64, 1)] * chars])

    def ref(self, value) -> ir.Value:
        slot = self.b.alloca(value.type)
        self.b.store(value, slot)
        return slot

    def char(self, c) -> ir.Value:
        return self.ref(ir.Constant(I8, ord(c)) if isinstance(c, str) else c)

    def int(self, v) -> ir.Value:
        """A reference to the i64 ``v`` at LAPACK's width."""
        return self.ref(v if self.it.width == 64 else self.b.trunc(v, self.it))

    def lead(self, n) -> ir.Value:
        """A reference to ``max(1, n)``, a leading dimension."""
        one = ir.Constant(I64, 1)
        return self.int(self.b.select(self.b.icmp_signed("<", n, one), one, n))

    def info(self) -> ir.Value:
        return self.ref(ir.Constant(self.it, 0))

    def read(self, b, slot) -> ir.Value:
        """An integer LAPACK wrote at ``slot``, as an i64."""
        v = b.load(slot)
        return v if self.it.width == 64 else b.sext(v, I64)

    def fail_if(self, b, info, release=None) -> None:
        """Return LAPACK's ``info`` from the function if it is not 0 (after freeing
        ``release``, a ``malloc``'s block, if given); go on after."""
        code = self.read(b, info)
        fail = self.f.append_basic_block("fail")
        ok = self.f.append_basic_block("ok")
        b.cbranch(b.icmp_signed("!=", code, ir.Constant(I64, 0)), fail, ok)
        b.position_at_end(fail)
        if release is not None:
            self.free(b, release)
        b.ret(code)
        b.position_at_end(ok)

    def _libc(self, name, ret, args) -> ir.Function:
        mod = self.f.module
        return mod.globals.get(name) or ir.Function(mod, ir.FunctionType(ret, args), name)

    def malloc(self, b, nbytes) -> ir.Value:
        return b.call(self._libc("malloc", PTR, [I64]), [nbytes])

    def free(self, b, block) -> None:
        b.call(self._libc("free", ir.VoidType(), [PTR]), [block])

    def workspace(self, b, query):
        """The size LAPACK's workspace query wrote at ``query`` (a float, rounded toward
        zero as NumPy does), as an i64 of at least 1."""
        v = b.fptosi(b.load(query), I64)
        one = ir.Constant(I64, 1)
        return b.select(b.icmp_signed("<", v, one), one, v)


def _transpose(b, f, dst, src, rows, cols, dst_off, src_off, zero=None, src_ld=None,
               dst_ld=None):
    """``dst[dst_off + c * dst_ld + r] = src[src_off + r * src_ld + c]`` for ``r < rows``,
    ``c < cols`` (``src_ld`` defaults to ``cols``, ``dst_ld`` to ``rows``): a C matrix
    to Fortran order, or back, converting between float (or complex) types; ``zero``:
    write 0 where ``r > c`` (``"r>c"``: above the diagonal of a C-ordered destination) or ``c > r``
    (``"c>r"``: below it)."""
    to = dst.type.pointee
    src_ld = cols if src_ld is None else src_ld
    dst_ld = rows if dst_ld is None else dst_ld

    def body(b, idx):
        r, c = idx
        at = b.add(src_off, b.add(b.mul(r, src_ld), c))
        v = _cast(b, b.load(b.gep(src, [at])), to)
        if zero is not None:
            above = b.icmp_signed(">", *((r, c) if zero == "r>c" else (c, r)))
            v = b.select(above, ir.Constant(to, None), v)
        b.store(v, b.gep(dst, [b.add(dst_off, b.add(b.mul(c, dst_ld), r))]))
    loop_nest(b, f, (rows, cols), body)


_ZERO = ir.Constant(I64, 0)


def _cholesky(f: ir.Function, dtype, it) -> None:
    a, out, w, n, count = f.args
    F = _Fortran(f, it, dtype)
    potrf = F.routine("potrf", "ciaii")
    uplo, n_, lda, info = F.char("L"), F.int(n), F.lead(n), F.info()
    nn = F.b.mul(n, n)

    def each(b, idx):
        off = b.mul(idx[0], nn)
        _transpose(b, f, w, a, n, n, _ZERO, off)
        F.call(potrf, [uplo, n_, w, lda, info], 1)
        F.fail_if(b, info)
        _transpose(b, f, out, w, n, n, off, _ZERO, zero="r>c")
    loop_nest(F.b, f, (count,), each).ret(_ZERO)


def _solve(f: ir.Function, dtype, it) -> None:
    a, rhs, out, wb, wa, ipiv, n, count, k = f.args
    F = _Fortran(f, it, dtype)
    gesv = F.routine("gesv", "iiaipaii")
    n_, k_, lda, info = F.int(n), F.int(k), F.lead(n), F.info()
    nn, nk = F.b.mul(n, n), F.b.mul(n, k)

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, wa, a, n, n, _ZERO, b.mul(i, nn))
        _transpose(b, f, wb, rhs, n, k, _ZERO, b.mul(i, nk))
        F.call(gesv, [n_, k_, wa, lda, ipiv, wb, lda, info])
        F.fail_if(b, info)
        _transpose(b, f, out, wb, k, n, b.mul(i, nk), _ZERO)
    loop_nest(F.b, f, (count,), each).ret(_ZERO)


def _triangular(lower: bool, trans: bool, unit: bool):
    """The loop of ``triangular_solve`` with these attributes: the C matrix is the
    Fortran transpose, so LAPACK is asked for the other triangle and the other
    ``trans`` (as SciPy does); a 1x1 matrix is both orders, and SciPy passes the flags
    as given."""
    def build(f: ir.Function, dtype, it) -> None:
        a, rhs, out, wb, n, count, k = f.args
        F = _Fortran(f, it, dtype)
        b = F.b
        trtrs = F.routine("trtrs", "cccii" "aiaii")
        one = b.icmp_signed("==", n, ir.Constant(I64, 1))

        def flag(as_given: str, swapped: str):
            return F.char(b.select(one, ir.Constant(I8, ord(as_given)),
                                   ir.Constant(I8, ord(swapped))))
        uplo = flag("L", "U") if lower else flag("U", "L")
        tr = flag("T", "N") if trans else flag("N", "T")
        diag = F.char("U" if unit else "N")
        n_, k_, lda, info = F.int(n), F.int(k), F.lead(n), F.info()
        nn, nk = b.mul(n, n), b.mul(n, k)
        empty, work = f.append_basic_block("empty"), f.append_basic_block("work")
        b.cbranch(b.icmp_signed("==", nk, _ZERO), empty, work)
        b.position_at_end(empty)
        b.ret(_ZERO)
        b.position_at_end(work)

        def each(b, idx):
            i = idx[0]
            _transpose(b, f, wb, rhs, n, k, _ZERO, b.mul(i, nk))
            F.call(trtrs, [uplo, tr, diag, n_, k_, b.gep(a, [b.mul(i, nn)]), lda, wb, lda,
                           info], 3)
            F.fail_if(b, info)
            _transpose(b, f, out, wb, k, n, b.mul(i, nk), _ZERO)
        loop_nest(b, f, (count,), each).ret(_ZERO)
    return build


def _slogdet(f: ir.Function, dtype, it) -> None:
    a, sign, logdet, wa, ipiv, n, count = f.args
    F = _Fortran(f, it, dtype)
    getrf = F.routine("getrf", "iiaipi")
    ety, out_t = wa.type.pointee, sign.type.pointee
    log_name = "log" if np.dtype(dtype) == np.float64 else "logf"
    log = f.module.globals.get(log_name) or ir.Function(
        f.module, ir.FunctionType(ety, [ety]), log_name)
    n_, lda, info = F.int(n), F.lead(n), F.info()
    nn = F.b.mul(n, n)
    zero, one = ir.Constant(ety, 0.0), ir.Constant(ety, 1.0)
    acc_sign, acc_log = F.b.alloca(ety), F.b.alloca(ety)

    def flip_if(b, cond):
        s = b.load(acc_sign)
        b.store(b.select(cond, b.fneg(s), s), acc_sign)

    def pivot(b, j):  # a row swapped (LAPACK counts from 1)
        flip_if(b, b.icmp_signed("!=", F.read(b, b.gep(ipiv, [j[0]])),
                                 b.add(j[0], ir.Constant(I64, 1))))

    def diagonal(b, j):
        v = b.load(b.gep(wa, [b.mul(j[0], b.add(n, ir.Constant(I64, 1)))]))
        neg = b.fcmp_ordered("<", v, zero)
        flip_if(b, neg)
        b.store(b.fadd(b.load(acc_log), b.call(log, [b.select(neg, b.fneg(v), v)])), acc_log)

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, wa, a, n, n, _ZERO, b.mul(i, nn))
        b.store(ir.Constant(it, 0), info)
        F.call(getrf, [n_, n_, wa, lda, ipiv, info])
        b.store(one, acc_sign)
        b.store(zero, acc_log)
        singular = b.icmp_signed("!=", F.read(b, info), _ZERO)
        with b.if_else(singular) as (then, otherwise):
            with then:  # NumPy's answer for a singular matrix
                b.store(zero, acc_sign)
                b.store(ir.Constant(ety, -np.inf), acc_log)
            with otherwise:
                loop_nest(b, f, (n,), pivot)
                loop_nest(b, f, (n,), diagonal)
        for acc, res in ((acc_sign, sign), (acc_log, logdet)):
            v = b.load(acc)
            b.store(v if out_t == ety else b.fptrunc(v, out_t), b.gep(res, [i]))
    loop_nest(F.b, f, (count,), each).ret_void()


def eigh_loop(F: _Fortran, block, args: list, routine) -> None:
    """``eigh``'s loop over the stack, its workspaces in ``block``: each matrix copied in
    Fortran order, ``routine(*args)`` (``?syevd`` or ``?heevd``; its ``info``, the last
    argument, checked), the eigenvalues and vectors copied out; then ``block`` freed."""
    f, b = F.f, F.b
    a, w_out, v_out, aw, ww, n, count = f.args
    nn = b.mul(n, n)

    def each(b, idx):
        i = idx[0]
        _transpose(b, f, aw, a, n, n, _ZERO, b.mul(i, nn))
        F.call(routine, args, 2)
        F.fail_if(b, args[-1], block)
        _transpose(b, f, w_out, ww, ir.Constant(I64, 1), n, b.mul(i, n), _ZERO)
        _transpose(b, f, v_out, aw, n, n, b.mul(i, nn), _ZERO)
    b = loop_nest(b, f, (count,), each)
    F.free(b, block)
    b.ret(_ZERO)
