"""Element rules computed by the inner loops of SciPy's ufuncs, for the special
functions ``scipy.special.cython_special`` does not export (``scalar.SPECIAL`` has the
ones it does).

A kernel calls the ufunc's float64 loop (NumPy's ``PyUFuncGenericFunction``: ``void
(char **args, npy_intp *dims, npy_intp *steps, void *data)``) on one element, through
a small internal function of the module, ``fusegrad.uf.<name>``: the loop and its data
are found in the ufunc object (``loader.ufunc_loop``) and linked as
``fusegrad_ufunc_<name>`` and ``fusegrad_ufdata_<name>``. The answers are the ufunc's
own, so the bits are those of the interpreter calling ``scipy.special``.

- ``polygamma(x, n)``: ``scipy.special.polygamma``: ``psi(x)`` for ``n = 0``, else
  ``(-1.0)**(n+1) * gamma(n+1.0) * zeta(n+1, x)`` (the Hurwitz zeta function, the ufunc
  ``_zeta``), the constant factor computed when the kernel is built as SciPy computes
  it; in float64, rounded to float32 for float32 operands.

``gammainc_da`` and ``betainc_grad`` call the interpreter's own Numba functions
(``fusegrad.ir.incgamma_kernel``, ``betainc_kernel``) compiled as C functions once per
machine (``numba_call``; linked as ``fusegrad_numba_<name>``, so Numba loads only when a
program calling them is): the same code, so the same bits. Porting them is not worth
it: their Taylor arithmetic on arrays of ``n + 1`` coefficients, series and continued
fractions of up to 20000 terms and Numba's own ``gamma``/``lgamma`` would all have to be
reproduced operation for operation.
"""

from __future__ import annotations

from llvmlite import ir

F64, I64, PTR = ir.DoubleType(), ir.IntType(64), ir.IntType(8).as_pointer()
#: the ufuncs called here (``loader.UFUNCS`` finds them): name -> operands
UFUNCS = {"zeta": 2}


def _loop_function(mod: ir.Module, name: str) -> ir.Function:
    """``double fusegrad.uf.<name>(double, ...)``: the ufunc's loop over one element."""
    sym = f"fusegrad.uf.{name}"
    f = mod.globals.get(sym)
    if f is not None:
        return f
    nin = UFUNCS[name]
    f = ir.Function(mod, ir.FunctionType(F64, [F64] * nin), sym)
    f.linkage = "internal"
    f.attributes.add("nounwind")
    loop_t = ir.FunctionType(ir.VoidType(), [PTR.as_pointer(), I64.as_pointer(),
                                             I64.as_pointer(), PTR])
    loop = ir.Function(mod, loop_t, f"fusegrad_ufunc_{name}")
    data = ir.GlobalVariable(mod, ir.IntType(8), f"fusegrad_ufdata_{name}")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    slots = [b.alloca(F64) for _ in range(nin + 1)]
    for slot, x in zip(slots, f.args):
        b.store(x, slot)
    args = b.alloca(ir.ArrayType(PTR, nin + 1))
    for i, slot in enumerate(slots):
        b.store(b.bitcast(slot, PTR), b.gep(args, [ir.Constant(I64, 0), ir.Constant(I64, i)]))
    dims, steps = b.alloca(I64), b.alloca(ir.ArrayType(I64, nin + 1))
    b.store(ir.Constant(I64, 1), dims)
    b.store(ir.Constant(ir.ArrayType(I64, nin + 1), [8] * (nin + 1)), steps)
    b.call(loop, [b.bitcast(args, PTR.as_pointer()), dims,
                  b.bitcast(steps, I64.as_pointer()), data])
    b.ret(b.load(slots[-1]))
    return f


def polygamma(psi):
    """The element rule of ``polygamma``; ``psi`` is ``digamma``'s (for ``n = 0``)."""

    def rule(b, op, a):
        n = int(op.attrs["n"])
        if n == 0:
            return psi(b, op, a)
        import numpy as np
        from scipy import special

        factor = float(np.float64(-1.0) ** np.int64(n + 1) * special.gamma(n + 1.0))
        x = a[0]
        wide = x if isinstance(x.type, ir.DoubleType) else b.fpext(x, F64)
        zeta = b.call(_loop_function(b.module, "zeta"), [ir.Constant(F64, float(n + 1)), wide])
        out = b.fmul(ir.Constant(F64, factor), zeta)
        return out if isinstance(x.type, ir.DoubleType) else b.fptrunc(out, x.type)
    return rule


def numba_call(name: str, attr: str):
    """The element rule calling Numba C function ``name`` on the operands (in float64)
    and the op's integer attribute ``attr``, rounded to the operands' type."""

    def rule(b, op, a):
        ty = a[0].type
        wide = [x if isinstance(ty, ir.DoubleType) else b.fpext(x, F64) for x in a]
        sym = f"fusegrad_numba_{name}"
        callee = b.module.globals.get(sym)
        if callee is None:
            callee = ir.Function(b.module, ir.FunctionType(F64, [F64] * len(a) + [I64]), sym)
            callee.attributes.add("nounwind")
        out = b.call(callee, [*wide, ir.Constant(I64, int(op.attrs[attr]))])
        return out if isinstance(ty, ir.DoubleType) else b.fptrunc(out, ty)
    rule.__name__ = name
    return rule
