"""A native caller for an entry: the whole call of a seen signature, in machine code.

An entry (``entry.py``) is called as ``entry(*params, *results, arena)``: its caller
checks the arguments, allocates the results and finds an arena, which in Python costs
several times the call itself on a small function. ``caller(code, ...)`` returns a
``METH_FASTCALL`` builtin doing that work natively: ``caller(*args)``

1. checks ``len(args)`` and that each argument is exactly an ``ndarray``, C-contiguous
   and aligned, of the compiled dtype (the same descriptor object as ``np.dtype(d)``)
   and shape, or for a 0-d parameter exactly a NumPy scalar of its dtype or a Python
   ``float`` (float64) or ``complex`` (complex128), read in place; on any mismatch it
   returns ``NotImplemented`` (a new reference), and the Python caller takes its
   general path;
2. takes the spare arena (an atomic exchange of one word, so threads calling at once
   each get their own), or allocates one and writes its size table (``sizes.fill``);
3. allocates the results it returns with NumPy's ``PyArray_New`` (fresh arrays,
   never aliasing the arguments); the ``first`` results it drops are written into
   the arena's tail instead;
4. calls the entry, puts the arena back (or frees it, if another thread put one back
   first) and returns the one result kept, or a tuple of them (``as_tuple``), or NULL
   with the entry's exception.

Its machine code is one function for every program (``fusegrad_call``, a runtime
module compiled once per machine, as ``copies``): what differs per program is data,
the builtin's ``self``, an int64 array (``_Word`` layout) holding the shapes, dtype
descriptors, size table and the addresses of the entry and of the CPython and NumPy
functions it calls, found in this process. No address is in its machine code.
"""

from __future__ import annotations

import ctypes
import platform
import sys
import weakref

import numpy as np
from llvmlite import ir

from ... import _forksafe
from . import engine
from .sizes import ALIGN

I8P = ir.IntType(8).as_pointer()
I64 = ir.IntType(64)
I32 = ir.IntType(32)
SYMBOL = "fusegrad_call"

# where CPython 3 (not free-threaded) and NumPy keep what the caller reads
_OB_TYPE = 8
_ND, _DIMS, _DESCR, _FLAGS = 24, 32, 56, 64  # PyArrayObject_fields
_TUPLE_ITEMS = 24  # PyTupleObject.ob_item
_C_CONTIGUOUS_ALIGNED = 0x0001 | 0x0100  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
_PYARRAY_NEW = 93  # PyArray_New's index in NumPy's _ARRAY_API table
#: a parameter's words: its dtype's descriptor, ndim, where its shape is, and two types
#: of scalar objects taken for it (0-d only: NumPy's scalar of its dtype, and Python's
#: ``float`` or ``complex`` for float64 or complex128), whose value is at offset 16
_PARAM_WORDS = 5


class _Word:
    """The descriptor's words (its variable-length parts start at the word named)."""
    SPARE, ENTRY, NDARRAY, ARRAY_NEW, DECREF, ALLOC, FREE, NOT_IMPLEMENTED = range(8)
    TUPLE_NEW, NARGS, NEXTRA, NRESULTS, FIRST, AS_TUPLE, ARENA_BYTES, TABLE_OFFSET = (
        range(8, 16))
    NSIZES, SIZES_AT, PARAMS_AT, EXTRAS_AT, RESULTS_AT = range(16, 21)
    HEAD = 21


def _function(mod: ir.Module) -> None:
    fnty = ir.FunctionType(I8P, [I8P, I8P.as_pointer(), I64])
    f = ir.Function(mod, fnty, SYMBOL)
    me, args, nargs = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    c = lambda n: ir.Constant(I64, n)  # noqa: E731
    d = b.load(b.bitcast(b.gep(me, [c(16)]), I64.as_pointer().as_pointer()))

    def word(k):
        return b.load(b.gep(d, [k if isinstance(k, ir.Value) else c(k)]))

    def field(obj, offset, ty):
        return b.load(b.bitcast(b.gep(obj, [c(offset)]), ty.as_pointer()))

    def fnptr(k, ret, params):
        return b.inttoptr(word(k), ir.FunctionType(ret, params).as_pointer())

    not_impl = f.append_basic_block("not_implemented")
    checks = f.append_basic_block("checks")
    b.cbranch(b.icmp_signed("==", nargs, word(_Word.NARGS)), checks, not_impl)
    b.position_at_end(checks)
    # the entry's arguments: the parameters (the call's, then the extra ones), the
    # results, the arena; a scalar argument, a dropped result and the arena as
    # stand-in objects whose data pointer (at 16) points at their data
    nextra, nres = word(_Word.NEXTRA), word(_Word.NRESULTS)
    nparams = b.add(nargs, nextra)
    total = b.add(b.add(nparams, nres), c(1))
    argv = b.alloca(I8P, total)
    fakes = b.alloca(I8P, b.mul(total, c(3)))
    params_at = word(_Word.PARAMS_AT)
    with _Loop(b, f, nargs, "param") as (i, cont):
        obj = b.load(b.gep(args, [i]))
        spec = b.add(params_at, b.mul(i, c(_PARAM_WORDS)))
        kind = b.ptrtoint(field(obj, _OB_TYPE, I8P), I64)
        array, other = f.append_basic_block("array"), f.append_basic_block("other")
        b.cbranch(b.icmp_signed("==", kind, word(_Word.NDARRAY)), array, other)
        # a Python or NumPy scalar of the parameter's type: its value is at 16
        b.position_at_end(other)
        scalar = b.or_(b.icmp_signed("==", kind, word(b.add(spec, c(3)))),
                       b.icmp_signed("==", kind, word(b.add(spec, c(4)))))
        _guard(b, f, scalar, not_impl)
        fake = b.gep(fakes, [b.mul(i, c(3))])
        b.store(b.gep(obj, [c(16)]), b.gep(fake, [c(2)]))
        b.store(b.bitcast(fake, I8P), b.gep(argv, [i]))
        cont()
        b.position_at_end(array)
        flags = b.and_(field(obj, _FLAGS, I32), ir.Constant(I32, _C_CONTIGUOUS_ALIGNED))
        ok = b.and_(b.icmp_signed("==", flags, ir.Constant(I32, _C_CONTIGUOUS_ALIGNED)),
                    b.icmp_signed("==", b.ptrtoint(field(obj, _DESCR, I8P), I64), word(spec)))
        nd = b.sext(field(obj, _ND, I32), I64)
        ok = b.and_(ok, b.icmp_signed("==", nd, word(b.add(spec, c(1)))))
        _guard(b, f, ok, not_impl)
        dims = field(obj, _DIMS, I64.as_pointer())
        want = word(b.add(spec, c(2)))
        with _Loop(b, f, nd, "dim") as (j, next_dim):
            same = b.icmp_signed("==", b.load(b.gep(dims, [j])), word(b.add(want, j)))
            _guard(b, f, same, not_impl)
            next_dim()
        b.store(obj, b.gep(argv, [i]))
        cont()
    extras_at = word(_Word.EXTRAS_AT)
    with _Loop(b, f, nextra, "extra") as (i, cont):
        b.store(b.inttoptr(word(b.add(extras_at, i)), I8P), b.gep(argv, [b.add(nargs, i)]))
        cont()
    arena = _take_arena(b, f, d, word, fnptr, not_impl)
    first, results_at = word(_Word.FIRST), word(_Word.RESULTS_AT)
    fail = f.append_basic_block("failed")
    no_result = f.append_basic_block("result_failed")
    made = b.alloca(I64)  # results allocated so far (from ``first``)
    b.store(first, made)
    with _Loop(b, f, nres, "result") as (r, cont):
        spec = b.add(results_at, b.mul(r, c(4)))
        slot = b.gep(argv, [b.add(nparams, r)])
        dropped = b.icmp_signed("<", r, first)
        with b.if_else(dropped) as (drop, keep):
            with drop:
                fake = b.gep(fakes, [b.mul(b.add(nparams, r), c(3))])
                b.store(b.gep(arena, [word(b.add(spec, c(3)))]), b.gep(fake, [c(2)]))
                b.store(b.bitcast(fake, I8P), slot)
            with keep:
                new = fnptr(_Word.ARRAY_NEW, I8P, [I8P, I32, I64.as_pointer(), I32,
                                                   I8P, I8P, I32, I32, I8P])
                dims = b.gep(d, [word(b.add(spec, c(2)))])
                null = ir.Constant(I8P, None)
                arr = b.call(new, [b.inttoptr(word(_Word.NDARRAY), I8P),
                                   b.trunc(word(b.add(spec, c(1))), I32), dims,
                                   b.trunc(word(spec), I32), null, null,
                                   ir.Constant(I32, 0), ir.Constant(I32, 0), null])
                b.store(arr, slot)
                got = b.icmp_unsigned("!=", b.ptrtoint(arr, I64), c(0))
                b.store(b.add(r, c(1)), made)
                _guard(b, f, got, no_result)
        cont()
    fake = b.gep(fakes, [b.mul(b.sub(total, c(1)), c(3))])
    b.store(arena, b.gep(fake, [c(2)]))
    b.store(b.bitcast(fake, I8P), b.gep(argv, [b.sub(total, c(1))]))
    entry = fnptr(_Word.ENTRY, I8P, [I8P, I8P.as_pointer(), I64])
    ret = b.call(entry, [me, argv, total])
    _give_arena(b, d, arena, fnptr)
    b.store(nres, made)
    failed = b.icmp_unsigned("==", b.ptrtoint(ret, I64), c(0))
    done = f.append_basic_block("done")
    b.cbranch(failed, fail, done)
    # a result not allocated: the arena back, then as any failure
    b.position_at_end(no_result)
    _give_arena(b, d, arena, fnptr)
    b.branch(fail)
    # a failure: drop the results made, return NULL (the exception is set)
    b.position_at_end(fail)
    with _Loop(b, f, b.sub(b.load(made), first), "drop") as (k, cont):
        obj = b.load(b.gep(argv, [b.add(nparams, b.add(first, k))]))
        b.call(fnptr(_Word.DECREF, ir.VoidType(), [I8P]), [obj])
        cont()
    b.ret(ir.Constant(I8P, None))
    # the entry returned ``me`` with a reference more: give it back (the builtin holds one)
    b.position_at_end(done)
    refs = b.bitcast(me, I64.as_pointer())
    b.store(b.sub(b.load(refs), c(1)), refs)
    kept = b.sub(nres, first)
    single = f.append_basic_block("single")
    many = f.append_basic_block("tuple")
    b.cbranch(b.and_(b.icmp_signed("==", kept, c(1)),
                     b.icmp_signed("==", word(_Word.AS_TUPLE), c(0))), single, many)
    b.position_at_end(single)
    b.ret(b.load(b.gep(argv, [b.add(nparams, first)])))
    b.position_at_end(many)
    tup = b.call(fnptr(_Word.TUPLE_NEW, I8P, [I64]), [kept])
    made_tuple = f.append_basic_block("fill")
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(tup, I64), c(0)), fail, made_tuple)
    b.position_at_end(made_tuple)
    items = b.bitcast(b.gep(tup, [c(_TUPLE_ITEMS)]), I8P.as_pointer())
    with _Loop(b, f, kept, "fill") as (k, cont):
        b.store(b.load(b.gep(argv, [b.add(nparams, b.add(first, k))])), b.gep(items, [k]))
        cont()
    b.ret(tup)
    # a mismatch: a new reference to NotImplemented
    b.position_at_end(not_impl)
    sentinel = b.inttoptr(word(_Word.NOT_IMPLEMENTED), I8P)
    refs = b.bitcast(sentinel, I64.as_pointer())
    b.store(b.add(b.load(refs), c(1)), refs)
    b.ret(sentinel)


def _guard(b: ir.IRBuilder, f: ir.Function, ok, otherwise):
    """Go on where ``ok`` holds, else branch to ``otherwise``."""
    go = f.append_basic_block("ok")
    b.cbranch(ok, go, otherwise)
    b.position_at_end(go)
    return ok


def _take_arena(b, f, d, word, fnptr, not_impl):
    """The spare arena (taken atomically), or a new one with its size table written."""
    c = lambda n: ir.Constant(I64, n)  # noqa: E731
    taken = b.atomic_rmw("xchg", d, c(0), "seq_cst")
    have = b.block
    new = f.append_basic_block("new_arena")
    ready = f.append_basic_block("arena")
    b.cbranch(b.icmp_unsigned("==", taken, c(0)), new, ready)
    b.position_at_end(new)
    alloc = fnptr(_Word.ALLOC, I8P, [I64, I64])
    fresh = b.call(alloc, [c(ALIGN), word(_Word.ARENA_BYTES)])
    _guard(b, f, b.icmp_unsigned("!=", b.ptrtoint(fresh, I64), c(0)), not_impl)
    table = b.bitcast(fresh, I64.as_pointer())
    offset = word(_Word.TABLE_OFFSET)
    b.store(offset, table)
    at = b.gep(table, [b.udiv(offset, c(8))])
    sizes_at = word(_Word.SIZES_AT)
    with _Loop(b, f, word(_Word.NSIZES), "size") as (k, cont):
        b.store(word(b.add(sizes_at, k)), b.gep(at, [k]))
        cont()
    fresh = b.ptrtoint(fresh, I64)
    filled = b.block
    b.branch(ready)
    b.position_at_end(ready)
    arena = b.phi(I64)
    arena.add_incoming(taken, have)
    arena.add_incoming(fresh, filled)
    return b.inttoptr(arena, I8P)


def _give_arena(b, d, arena, fnptr) -> None:
    """Put ``arena`` back as the spare, or free it if another thread did first."""
    c = lambda n: ir.Constant(I64, n)  # noqa: E731
    pair = b.cmpxchg(d, c(0), b.ptrtoint(arena, I64), "seq_cst", "seq_cst")
    with b.if_then(b.not_(b.extract_value(pair, 1))):
        b.call(fnptr(_Word.FREE, ir.VoidType(), [I8P]), [arena])


class _Loop:
    """``with _Loop(b, f, n, name) as (i, cont):`` emits a body for ``i`` in ``[0, n)``
    that ends by calling ``cont()`` (the body may branch away, as a failed check does)."""

    def __init__(self, b: ir.IRBuilder, f: ir.Function, n, name: str):
        self.b, self.f, self.n, self.name = b, f, n, name

    def __enter__(self):
        b, f = self.b, self.f
        self.i = b.alloca(I64)
        b.store(ir.Constant(I64, 0), self.i)
        self.head = f.append_basic_block(self.name)
        self.done = f.append_basic_block(self.name + ".done")
        b.branch(self.head)
        b.position_at_end(self.head)
        i = b.load(self.i)
        body = f.append_basic_block(self.name + ".body")
        b.cbranch(b.icmp_signed("<", i, self.n), body, self.done)
        b.position_at_end(body)

        def cont():
            b.store(b.add(b.load(self.i), ir.Constant(I64, 1)), self.i)
            b.branch(self.head)
        return i, cont

    def __exit__(self, *exc):
        if exc[0] is None:
            self.b.position_at_end(self.done)
        return False


def module_text() -> str:
    mod = ir.Module(name="caller")
    mod.triple, mod.data_layout = engine.triple_and_layout()
    _function(mod)
    return str(mod)


def name() -> str:
    """The module's name: ``rt_`` (kept once per machine) and a hash of the salt (this
    file's source among it), the optimisation level and the platform, found without
    LLVM (a warm start loads the module by this name alone)."""
    return "rt_" + engine.module_name(f"; caller for {platform.machine()} {sys.platform}")[4:]


_state: dict = {}
_lock = _forksafe.lock()


def _host() -> dict:
    """This process's addresses of what the caller calls, and its method definition
    (found once, by the first thread to ask)."""
    if "md" in _state:
        return _state
    with _lock:
        if "md" in _state:
            return _state
        api = ctypes.pythonapi
        get = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", api))
        from numpy._core import _multiarray_umath

        table = get(_multiarray_umath._ARRAY_API, None)
        libc = ctypes.CDLL(None)
        fn = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
        _state["words"] = {
            _Word.NDARRAY: id(np.ndarray),
            _Word.ARRAY_NEW: ctypes.c_void_p.from_address(table + 8 * _PYARRAY_NEW).value,
            _Word.DECREF: fn(api.Py_DecRef), _Word.ALLOC: fn(libc.aligned_alloc),
            _Word.FREE: fn(libc.free), _Word.NOT_IMPLEMENTED: id(NotImplemented),
            _Word.TUPLE_NEW: fn(api.PyTuple_New)}
        _state["free"] = libc.free
        rt = name()
        if not engine.load_objects([rt]):
            engine.add(module_text(), rt, kind="runtime")
        md = engine._MethodDef(b"fusegrad_call", engine.address(SYMBOL),
                               engine._METH_FASTCALL, None)
        engine._keep.append(md)
        _state["md"] = ctypes.addressof(md)
    return _state


def _entry_address(call) -> int:
    """The C function of builtin ``call`` (``PyCFunctionObject.m_ml->ml_meth``)."""
    method_def = ctypes.c_void_p.from_address(id(call) + 16).value
    return ctypes.c_void_p.from_address(method_def + 8).value


#: Python scalars whose value is stored as NumPy's of a dtype is (``PyFloatObject``,
#: ``PyComplexObject``)
_PYTHON_SCALARS = {np.dtype(np.float64).str: float, np.dtype(np.complex128).str: complex}


def caller(code, params, results, extra: tuple = (), first: int = 0,
           as_tuple: bool = False):
    """The native caller of ``code`` (a host ``Compiled``) for arguments of types
    ``params`` (``(shape, dtype)`` each) followed by the arrays ``extra`` (C-contiguous,
    of their parameters' types, kept as long as the caller), with results of types
    ``results``, returning those from ``first`` on: the one, or a tuple of them if more
    or ``as_tuple``; None if the entry is not a builtin."""
    if type(code.call) is not type(len):  # (an entry wrapped in Python: not called here)
        return None
    host = _host()
    head, tail = [0] * _Word.HEAD, []

    def put(values) -> int:
        at = _Word.HEAD + len(tail)
        tail.extend(values)
        return at

    arena = code.arena_bytes
    arena += -arena % ALIGN
    for k, v in host["words"].items():
        head[k] = v
    head[_Word.ENTRY] = _entry_address(code.call)
    head[_Word.NARGS], head[_Word.NEXTRA] = len(params), len(extra)
    head[_Word.NRESULTS], head[_Word.FIRST] = len(results), first
    head[_Word.AS_TUPLE] = int(as_tuple)
    sizes = [] if code.sizes is None else [int(s) for s in code.sizes]
    head[_Word.TABLE_OFFSET] = code.table_offset if sizes else 0
    head[_Word.NSIZES] = len(sizes) if sizes else 0
    head[_Word.SIZES_AT] = put(sizes)
    head[_Word.PARAMS_AT] = at = put([0] * _PARAM_WORDS * len(params))
    for k, (shape, dtype) in enumerate(params):
        dtype = np.dtype(dtype)
        scalars = [id(dtype.type), id(_PYTHON_SCALARS.get(dtype.str, dtype.type))] if (
            shape == () and dtype.isnative) else [0, 0]
        start = at - _Word.HEAD + _PARAM_WORDS * k
        tail[start:start + _PARAM_WORDS] = [id(dtype), len(shape), put(shape), *scalars]
    head[_Word.EXTRAS_AT] = put([id(a) for a in extra])
    head[_Word.RESULTS_AT] = at = put([0] * 4 * len(results))
    for k, (shape, dtype) in enumerate(results):
        scratch = 0
        if k < first:  # written into the arena's tail
            scratch = arena
            arena += -(-max(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, 1)
                       // ALIGN) * ALIGN
        tail[at - _Word.HEAD + 4 * k: at - _Word.HEAD + 4 * k + 4] = [
            np.dtype(dtype).num, len(shape), put(shape), scratch]
    head[_Word.ARENA_BYTES] = max(arena, ALIGN)
    words = np.array(head + tail, dtype=np.int64)
    call = engine._new_cfunction(host["md"], words, None)
    # keeps the extra arrays, and frees the spare arena, as long as the caller lives
    weakref.finalize(call, _free_spare, words, host["free"], extra)
    return call


def _free_spare(words: np.ndarray, free, extra: tuple) -> None:
    spare = int(words[_Word.SPARE])
    if spare:
        words[_Word.SPARE] = 0
        free(ctypes.c_void_p(spare))
