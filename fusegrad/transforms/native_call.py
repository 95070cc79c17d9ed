"""Calling a lean C entry (``codegen.lean.compile_function(host=False)``) from Numba code.

A C entry has the calling convention of the CPython builtin it also makes:
``entry(self, args, nargs) -> self or NULL``, ``args`` pointing at ``nargs`` objects
from each of which it reads one field, the data pointer at byte 16 (where NumPy keeps
it). ``call_entry`` gives it stand-ins: a table of three int64 words per argument, the
third the argument's data pointer, and a table of pointers into it. It never touches
CPython state (no GIL, no reference counts), so Numba code calls it anywhere: inside
``prange`` loops, in ``nogil`` functions and in ``cfunc`` callbacks.

Imports Numba: loaded only by an export.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_I8P = ir.IntType(8).as_pointer()
_I64 = ir.IntType(64)
_ENTRY = ir.FunctionType(_I8P, [_I8P, _I8P.as_pointer(), _I64])


def _call(context, builder, signature, fn, objects, pointers):
    """Call C entry ``fn`` (an LLVM function pointer) on the stand-in arrays; 1, or 0 if
    it returned NULL."""
    data = [context.make_array(t)(context, builder, v).data
            for t, v in zip(signature.args[1:3], (objects, pointers))]
    n = context.make_array(signature.args[2])(context, builder, pointers).nitems
    got = builder.call(fn, [builder.bitcast(data[0], _I8P),
                            builder.bitcast(data[1], _I8P.as_pointer()), n])
    ok = builder.icmp_unsigned("!=", got, ir.Constant(_I8P, None))
    return builder.zext(ok, _I64)


@intrinsic
def call_entry(typingctx, address, objects, pointers, keep):
    """Call the C entry at ``address`` (int64) on the stand-in ``objects`` (int64
    array, 3 words per argument) and ``pointers`` (int64 array, one per argument);
    ``keep`` (a tuple of the arrays whose data pointers ``objects`` holds) is passed so
    they live until the call returns. Returns 1, or 0 if the entry returned NULL (an
    index out of range)."""
    sig = types.int64(address, objects, pointers, keep)

    def codegen(context, builder, signature, args):
        fn = builder.inttoptr(args[0], _ENTRY.as_pointer())
        return _call(context, builder, signature, fn, args[1], args[2])

    return sig, codegen


@intrinsic(prefer_literal=True)
def call_symbol(typingctx, symbol, objects, pointers, keep):
    """``call_entry`` of the C entry named ``symbol`` (a string literal), linked by name
    (``llvmlite.binding.add_symbol``): the calling code holds no address, so Numba can
    cache it."""
    if not isinstance(symbol, types.StringLiteral):
        return None
    sig = types.int64(symbol, objects, pointers, keep)

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, _ENTRY, symbol.literal_value)
        return _call(context, builder, signature, fn, args[1], args[2])

    return sig, codegen


@intrinsic
def as_pointer(typingctx, address):
    """The int64 ``address`` as a pointer to int64 (for ``numba.carray``)."""
    sig = types.CPointer(types.int64)(address)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], _I64.as_pointer())

    return sig, codegen
