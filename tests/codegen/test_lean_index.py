"""Gathers and scatters (``take``, ``index_add``, ``index_set``) lowered by the lean code
generator (codegen/lean/indexing.py): one compiled program with the interpreter's bits,
on several axes, index shapes and dtypes, with negative and repeated indices, inside
control-flow regions too; an index out of range raises the interpreter's IndexError, with
or without the GIL held."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.lean import indexing, lowers
from fusegrad.codegen.lean.control import walk
from fusegrad.codegen.lean.entry import GIL_FREE_ELEMENTS
from fusegrad.ir import ops
from fusegrad.passes.fusion import fuse
from fusegrad.passes.simplify import simplify
from fusegrad.runtime import compiled, lean_exec
from fusegrad.runtime.interpreter import run
from fusegrad.tracer import trace_pytree
from tests.helpers import assert_close, interpreted

pytestmark = pytest.mark.compiled

RNG = np.random.default_rng(0)


def _build(f, *args):
    """``f`` traced at ``args`` and built by the lean generator, and its arguments."""
    traced = trace_pytree(f, args)
    fn = traced.function
    exe = lean_exec.build(fn, fuse(simplify(fn)), "test", compiled._run_region)
    return exe, (*args, *traced.free)


def _same_bits(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


def _close(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, "exact64")


def _compiled_equals_interpreter(f, *args):
    """``f`` runs as one compiled program giving the interpreter's bits."""
    exe, full = _build(f, *args)
    assert lean_exec.segments(exe.fused) == [exe.fused]
    assert any(op.name in indexing.LOWERED for op in walk(exe.fused))
    got = exe(*full)
    _same_bits(got, run(exe.fn, *full))
    return got


def _data(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return RNG.normal(size=shape).astype(dtype)
    return RNG.integers(-50, 50, size=shape).astype(dtype)


# (x shape, axis, indices): 0-d, 1-d and 2-d indices, negative and repeated
LAYOUTS = [
    ((5, 3), 0, np.array([[1, 2], [1, -1]])),
    ((4, 5, 3), 1, np.array([0, -1, 2, 2, -5])),
    ((4, 5), -1, np.array(3)),
    ((6,), 0, np.array(-2)),
    ((3, 4), 1, np.array([3, 3, -1, 3, 0, 3])),
    ((2, 3, 4), 2, np.array([[0, -4], [3, 3], [1, 1]])),
]
DTYPES = ["float64", "float32", "int32"]


def _update_shape(shape, axis, idx):
    a = axis % len(shape)
    return shape[:a] + idx.shape + shape[a + 1:]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,idx", LAYOUTS, ids=[f"{s}@{a}" for s, a, _ in LAYOUTS])
def test_take_equals_the_interpreter(shape, axis, idx, dtype):
    x = _data(shape, dtype)
    (got,) = _compiled_equals_interpreter(lambda x, i: fnp.take(x, i, axis=axis), x, idx)
    np.testing.assert_array_equal(got, np.take(x, idx, axis=axis))


@pytest.mark.parametrize("name", ["index_add", "index_set"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,idx", LAYOUTS, ids=[f"{s}@{a}" for s, a, _ in LAYOUTS])
def test_scatter_equals_the_interpreter(shape, axis, idx, dtype, name):
    """Repeated indices: ``index_add`` sums them in index order (the interpreter's bits,
    ``np.add.at``), ``index_set`` keeps the last."""
    x, v = _data(shape, dtype), _data(_update_shape(shape, axis, idx), dtype)
    op = getattr(ops, name)
    (got,) = _compiled_equals_interpreter(lambda x, i, v: op(x, i, v, axis=axis), x, idx, v)
    if name == "index_add":
        want = np.array(x)
        np.add.at(np.moveaxis(want, axis, 0), idx,
                  np.moveaxis(v, tuple(range(axis % x.ndim, axis % x.ndim + idx.ndim)),
                              tuple(range(idx.ndim))))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("itype", ["int64", "int32", "int16", "int8", "uint8"])
def test_index_dtypes(itype):
    idx = np.array([4, 0, 4, 2, 4], dtype=itype)
    if np.dtype(itype).kind == "i":
        idx[1] = -5
    x = _data((5, 2), "float64")
    v = _data((3, 5, 2), "float64")

    def f(x, i, v):
        return fnp.take(x, i, axis=0), ops.index_add(x, i, v[0], axis=0), \
            ops.index_set(x, i, v[1], axis=0)
    _compiled_equals_interpreter(f, x, idx, v)


def test_bool_data_is_gathered_and_scattered():
    x = np.array([[True, False], [False, False], [True, True]])
    idx = np.array([1, 1, -1])
    v = np.array([[True, False], [False, True], [False, False]])
    _compiled_equals_interpreter(
        lambda x, i, v: (fnp.take(x, i, axis=0), ops.index_add(x, i, v, axis=0),
                         ops.index_set(x, i, v, axis=0)), x, idx, v)


def embedding(w, tokens, h):
    """An embedding lookup, a layer and a loss (its gradient: ``index_add``)."""
    e = fnp.take(w, tokens, axis=0)
    return fnp.sum(fnp.tanh(e @ h) ** 2)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gradient_through_take_equals_the_interpreter(dtype):
    """``take``'s VJP is ``index_add``: compiled, jitted and interpreted agree."""
    w = _data((7, 4), dtype)
    tokens = np.array([[1, 3, 1, -1], [1, 1, 6, 3]])
    h = _data((4, 4), dtype)
    g = fg.value_and_grad(embedding, argnums=(0, 2))
    exe, full = _build(g, w, tokens, h)
    assert "index_add" in [op.name for op in exe.fused.ops]
    assert lean_exec.segments(exe.fused) == [exe.fused]
    kind = "f32" if dtype == "float32" else "exact64"
    for got in (exe(*full), fg.jit(g)(w, tokens, h)):
        value, grads = (got[0], got[1:]) if len(got) == 3 else got
        ref_value, ref_grads = interpreted(g, w, tokens, h)
        assert_close(value, ref_value, kind)
        for a, b in zip(grads, ref_grads):
            assert_close(a, b, kind)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gradient_of_repeated_lookups_has_the_bits_of_add_at(dtype):
    """Repeated tokens' cotangents accumulate in index order: ``np.add.at``'s bits."""
    w = _data((5, 3), dtype)
    tokens = RNG.integers(-5, 5, size=(40,))
    h = _data((40, 3), dtype) * 1e3
    g = fg.grad(lambda w, h: fnp.sum(fnp.take(w, tokens, axis=0) * h))
    exe, full = _build(g, w, h)
    assert lean_exec.segments(exe.fused) == [exe.fused]
    got = exe(*full)
    _same_bits(got, run(exe.fn, *full))
    want = np.zeros_like(w)
    np.add.at(want, tokens, h)
    _same_bits(got, [want])
    _same_bits([fg.jit(g)(w, h)], [want])


def test_embedding_and_its_gradient_compile_to_one_segment():
    w, tokens, h = _data((9, 4), "float32"), np.array([[0, 8], [8, 2]]), _data((4, 4), "float32")
    traced = trace_pytree(fg.value_and_grad(embedding), (w, tokens, h))
    fused = fuse(simplify(traced.function))
    names = [op.name for op in fused.ops]
    assert "take" in names and "index_add" in names
    assert all(lowers(op) for op in fused.ops if op.name in indexing.LOWERED)
    assert lean_exec.segments(fused) == [fused]


def _errors(exe, full) -> tuple[str, str]:
    """The messages of the IndexError the compiled program and the interpreter raise."""
    with pytest.raises(IndexError) as got:
        exe(*full)
    with pytest.raises(IndexError) as want:
        run(exe.fn, *full)
    return str(got.value), str(want.value)


BAD = [
    ("take", np.array([0, 7, -9])),  # the first bad index in order is reported
    ("take", np.array(-4)),
    ("index_add", np.array([[1, -1], [-4, 3]])),
    ("index_set", np.array([2, 3])),
]


@pytest.mark.parametrize("name,idx", BAD, ids=[f"{n}{i.tolist()}" for n, i in BAD])
def test_out_of_range_raises_the_interpreters_error(name, idx):
    x = _data((2, 3, 4), "float64")
    v = _data(_update_shape(x.shape, 1, idx), "float64")

    def f(x, i, v):
        y = fnp.take(x, i, axis=1) if name == "take" else getattr(ops, name)(x, i, v, axis=1)
        return fnp.sum(y * 2.0)

    exe, full = _build(f, x, idx, v)
    assert lean_exec.segments(exe.fused) == [exe.fused]
    got, want = _errors(exe, full)
    assert got == want
    assert got.startswith(f"{name}: index {idx[(idx < -3) | (idx >= 3)].flat[0]} is out of "
                          "bounds for axis 1 with size 3 (in @f, at ")
    ok = np.clip(idx, -3, 2)
    assert_close(exe(x, ok, v)[0], run(exe.fn, x, ok, v)[0], "exact64")  # and runs on


def test_out_of_range_with_the_gil_released():
    """A program large enough to release the GIL re-acquires it before raising."""
    x = _data((GIL_FREE_ELEMENTS + 10,), "float64")
    idx = np.arange(GIL_FREE_ELEMENTS + 5) - 3
    exe, _ = _build(lambda x, i: fnp.take(x, i, axis=0) * 3.0, x, idx)
    assert "PyEval_SaveThread" in exe.source
    _same_bits(exe(x, idx), run(exe.fn, x, idx))
    bad = np.array(idx)
    bad[-2] = x.size
    got, want = _errors(exe, (x, bad))
    assert got == want and f"index {x.size} is out of bounds" in got
    _same_bits(exe(x, idx), run(exe.fn, x, idx))


def lookups(w, tokens, c0):
    """A scan whose body looks up a row (an RNN over tokens)."""
    def step(c, t):
        c = fnp.tanh(c * 0.5 + fnp.take(w, t, axis=0))
        return c, fnp.sum(c)

    c, ys = fg.scan(step, c0, tokens)
    return fnp.sum(c * c) + fnp.sum(ys)


def searching(w, start):
    """A while loop following links ``w[i]`` until it reaches row 0 (a region's index
    error must end the loop)."""
    def body(s):
        i, n = s
        return fnp.take(w, i, axis=0), n + 1

    return fg.while_loop(lambda s: s[0] != 0, body, (start, np.int64(0)))


@pytest.mark.parametrize("width", [3, GIL_FREE_ELEMENTS])
def test_regions_gather_and_raise(width):
    """In a scan's body (and its gradient's), with the GIL held or released."""
    w = _data((5, width), "float64")
    tokens = np.array([1, -1, 4, 1, 0])
    c0 = _data((width,), "float64")
    for f in (lookups, fg.value_and_grad(lookups, argnums=(0, 2))):
        exe, full = _build(f, w, tokens, c0)
        assert lean_exec.segments(exe.fused) == [exe.fused]
        assert ("PyEval_SaveThread" in exe.source) == (width >= GIL_FREE_ELEMENTS)
        _close(exe(*full), run(exe.fn, *full))
        bad = np.array([1, 2, 5, 0, -7])
        got, want = _errors(exe, (w, bad, c0))
        assert got == want and got.startswith("take: index 5 is out of bounds")
        assert "(in scan of @lookups, at " in got
        _close(exe(*full), run(exe.fn, *full))


def test_a_bad_index_ends_a_while_loop():
    links = np.array([0, 0, 1, 2, 3])  # 4 -> 3 -> 2 -> 1 -> 0
    exe, _ = _build(searching, links, np.int64(2))
    assert lean_exec.segments(exe.fused) == [exe.fused]
    got = exe(links, np.int64(4))
    _same_bits(got, run(exe.fn, links, np.int64(4)))
    bad = np.array([0, 2, 3, 7, 1])  # 1 -> 2 -> 3 -> 7: out of range
    got, want = _errors(exe, (bad, np.int64(1)))
    assert got == want and got.startswith("take: index 7 is out of bounds for axis 0")
