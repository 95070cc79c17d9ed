"""The native caller (``codegen.lean.caller``, ``LeanExecutable.native_caller``) and the
cached call per argument structure (``runtime.fastcall``).

The native caller runs a seen signature's whole call in machine code: it checks the
arguments, allocates the results and takes an arena. Anything it does not take (another
dtype, shape, layout or type) must make it return NotImplemented, and the transforms
then give the same answer, or raise the same error, as before it existed.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.runtime import compiled, fastcall
from fusegrad.runtime.lean_exec import LeanExecutable
from tests.runtime.test_fast_call import w1, w1_grad, w1_np


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", False)
    monkeypatch.setattr(config, "DEBUG_NANS", False)


def _executable(fn) -> LeanExecutable:
    """The executable of the Function called last (``runtime.compiled``'s cache)."""
    return next(reversed(compiled._cache.values()))[1]


def _w1_caller(**kw):
    """``w1``'s gradient program compiled at f64[16] and its native caller."""
    x = np.linspace(-1, 1, 16)
    fg.grad(w1)(x)
    exe = _executable(w1)
    assert [p.type.shape for p in exe.fn.params] == [(16,), ()]  # x, the seed
    return exe, exe.native_caller((np.ones(()),), **kw)


def test_the_native_caller_returns_the_results_of_the_general_call():
    exe, both = _w1_caller()
    _, grads = _w1_caller(first=1)
    _, tupled = _w1_caller(first=1, as_tuple=True)
    x = np.linspace(-2, 2, 16)
    value, dx = both(x)
    want = exe(x, np.ones(()))
    assert value.shape == () and value.dtype == np.float64
    assert value == want[0] and np.array_equal(dx, want[1])
    assert np.array_equal(grads(x), want[1])
    (only,) = tupled(x)
    assert np.array_equal(only, want[1])
    np.testing.assert_allclose(dx, w1_grad(x), rtol=1e-12, atol=1e-14)


def test_results_are_fresh_and_never_alias_the_arguments():
    _, call = _w1_caller(first=1)
    x = np.linspace(-2, 2, 16)
    r1, r2 = call(x), call(x)
    assert r1.flags.owndata and r1.flags.c_contiguous and r1.flags.writeable
    assert not np.shares_memory(r1, x) and not np.shares_memory(r1, r2)
    r1[:] = 5.0
    assert np.array_equal(call(x), r2)


@pytest.mark.parametrize("arg", [
    np.linspace(-1, 1, 16).astype(np.float32),  # another dtype
    np.linspace(-1, 1, 17),  # another shape
    np.linspace(-1, 1, 16).reshape(4, 4),  # another number of axes
    np.linspace(-1, 1, 32)[::2],  # not contiguous
    np.linspace(-1, 1, 16).astype(">f8"),  # not in native byte order
    np.frombuffer(bytes(16 * 8 + 1), np.float64, 16, 1),  # not aligned
    np.linspace(-1, 1, 16).view(np.recarray),  # a subclass
    list(np.linspace(-1, 1, 16)),  # not an array
    0.5,  # a scalar for an array
], ids=["float32", "shape", "ndim", "strided", "byteswapped", "unaligned", "subclass",
        "list", "scalar"])
def test_anything_else_is_not_implemented(arg):
    _, call = _w1_caller(first=1)
    assert call(arg) is NotImplemented
    x = np.linspace(-1, 1, 16)
    assert call() is NotImplemented and call(x, x) is NotImplemented


@pytest.mark.parametrize("arg", [
    np.linspace(-1, 1, 32)[::2],
    np.frombuffer(np.linspace(-1, 1, 16).tobytes() + b"\0", np.float64, 16, 0)[:16],
    np.asfortranarray(np.linspace(-1, 1, 16)), np.linspace(-1, 1, 16).view(np.recarray),
], ids=["strided", "from-buffer", "fortran", "subclass"])
def test_the_transforms_fall_back_with_the_right_answer(arg):
    g, vg, j = fg.grad(w1), fg.value_and_grad(w1), fg.jit(w1)
    x = np.linspace(-1, 1, 16)
    for _ in range(2):  # the second call of each is a seen signature
        g(x), vg(x), j(x)
    want = w1_grad(np.asarray(arg, dtype=np.float64))
    for _ in range(2):
        np.testing.assert_allclose(g(arg), want, rtol=1e-12, atol=1e-14)
        value, dx = vg(arg)
        np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(value, w1_np(np.asarray(arg, np.float64)), rtol=1e-12)
        np.testing.assert_allclose(j(arg), value, rtol=1e-12)
    np.testing.assert_allclose(g(x), w1_grad(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", ["not an array", np.linspace(-1, 1, 16).astype(">f8")],
                         ids=["string", "byteswapped"])
def test_a_wrong_argument_raises_the_same_error_after_the_native_path_is_set(bad):
    g = fg.grad(w1)
    x = np.linspace(-1, 1, 16)
    with pytest.raises(TypeError) as before:
        g(bad)
    g(x), g(x)
    with pytest.raises(TypeError) as after:
        g(bad)
    assert str(after.value) == str(before.value)
    with pytest.raises(TypeError):
        g(x, x)  # w1 takes one argument


def test_python_and_numpy_scalars_are_read_in_place():
    def h(a, b):
        return a * fnp.sin(b) + b * b

    g = fg.grad(h, argnums=(0, 1))
    want = (np.sin(1.5), 0.5 * np.cos(1.5) + 3.0)
    calls = [(0.5, 1.5), (np.float64(0.5), 1.5), (np.array(0.5), np.float64(1.5)),
             (0.5, 1.5), (np.float32(0.5), 1.5), (0.5, np.array(1.5)), (0.5, 1.5)]
    for args in calls:
        da, db = g(*args)
        np.testing.assert_allclose([da, db], want, rtol=1e-6 if np.float32 in map(
            type, args) else 1e-14)
        assert type(da) is np.ndarray and da.shape == ()
    j = fg.jit(h)
    for args in calls:
        np.testing.assert_allclose(j(*args), h(*map(np.float64, args)), rtol=1e-6)


def test_an_error_of_the_entry_is_raised_and_the_next_call_works():
    j = fg.jit(lambda x, i: fnp.sum(fnp.take(x, i) * 2.0))
    x, good, bad = np.arange(4.0), np.array([0, 3]), np.array([1, 9])
    j(x, good), j(x, good)
    with pytest.raises(IndexError):
        j(x, bad)
    assert j(x, good) == 6.0


def test_several_threads_calling_one_function_each_get_their_answers():
    # large enough that the entry releases the GIL: the calls overlap
    n = 1 << 15
    g = fg.grad(w1)
    xs = [np.linspace(-1, 1, n) * (1 + 0.25 * k) for k in range(4)]
    wants = [w1_grad(x) for x in xs]
    g(xs[0]), g(xs[0])
    errors = []

    def work(k):
        try:
            for _ in range(40):
                np.testing.assert_allclose(g(xs[k]), wants[k], rtol=1e-12, atol=1e-14)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_debug_nans_still_checks_a_seen_signature(monkeypatch):
    g = fg.grad(lambda x: fnp.sum(fnp.log(x)))
    x = np.linspace(1, 2, 16)
    g(x), g(x)
    monkeypatch.setattr(config, "DEBUG_NANS", True)
    with pytest.raises(FloatingPointError):
        g(-x)


def test_fastcall_keys_structures_shapes_and_scalar_types():
    x = np.zeros(3)
    key = fastcall.flatten((x, 1.0, {"b": [x, 2], "a": None}))[0]
    assert key != fastcall.flatten((x, 1, {"b": [x, 2], "a": None}))[0]
    assert key != fastcall.flatten((x, 1.0, {"a": None, "b": [x, 2]}))[0]  # (key order)
    assert key != fastcall.flatten((x, 1.0, {"b": (x, 2), "a": None}))[0]
    assert key != fastcall.flatten((np.zeros(4), 1.0, {"b": [x, 2], "a": None}))[0]
    assert fastcall.flatten((x, 1 << 70)) is None and fastcall.flatten((x, "s")) is None
    leaves = fastcall.flatten(((x, 2.5), {"z": 1, "a": x}))[1]
    assert [type(v) for v in leaves] == [np.ndarray, float, np.ndarray, int]


def test_seen_structures_give_the_answers_of_their_first_call():
    def f(p, scale=1.0):
        return (fnp.sum(p["w"] * p["x"][0]) + p["b"] ** 2) * scale + fnp.sum(p["x"][1])

    rng = np.random.default_rng(1)
    vg = fg.value_and_grad(f)
    for k in range(3):
        w, x0, x1 = rng.normal(size=(3, 5))
        p = {"w": w, "x": (x0, x1), "b": 0.5 + k}
        for scale in (1.0, 2.0, 2):  # keyword arguments are part of the key
            for _ in range(2):
                value, grads = vg(p, scale=scale)
                want = (np.sum(w * x0) + p["b"] ** 2) * scale + np.sum(x1)
                np.testing.assert_allclose(value, want, rtol=1e-12)
                assert set(grads) == {"w", "x", "b"} and type(grads["x"]) is tuple
                np.testing.assert_allclose(grads["w"], x0 * scale, rtol=1e-12)
                np.testing.assert_allclose(grads["x"][0], w * scale, rtol=1e-12)
                np.testing.assert_allclose(grads["x"][1], np.ones(5), rtol=1e-12)
                np.testing.assert_allclose(grads["b"], 2 * p["b"] * scale, rtol=1e-12)
    j = fg.jit(lambda p, n: {"y": p[0] ** n, "z": (p[1] * 2.0,)}, static_argnums=1)
    for n in (2, 3, 2):
        for _ in range(2):
            out = j([x0, 1.5], n)
            np.testing.assert_allclose(out["y"], x0 ** n, rtol=1e-12)
            np.testing.assert_allclose(out["z"][0], 3.0)
