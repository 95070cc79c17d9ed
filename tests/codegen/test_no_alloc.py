"""Steady-state compiled calls allocate only the arrays they return.

Allocations are counted with Numba's NRT statistics (``rtsys.get_allocation_stats``,
switched on with ``_nrt_python.memsys_enable_stats``, what ``NUMBA_NRT_STATS=1`` does at
start-up). Every ndarray argument handed to a Numba function is wrapped in one NRT
record for the duration of the call, so the count of a call minus that of an empty
Numba function taking the same arguments is the number of arrays the call allocated.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba.core.runtime import _nrt_python, rtsys

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.codegen.buffers import plan as buffer_plan
from fusegrad.nn import functional as F
from fusegrad.runtime import compiled

pytestmark = [pytest.mark.compiled, pytest.mark.numba_codegen]

LR = np.float32(0.01)


def _loss(p, x, y):
    w1, b1, w2, b2 = p
    h = fnp.tanh(x @ w1 + b1)
    logp = F.log_softmax(h @ w2 + b2, axis=1)
    return -fnp.mean(fnp.sum(y * logp, axis=1))


_vg = fg.value_and_grad(_loss)


def _step(p, x, y):
    loss, grads = _vg(p, x, y)
    return loss, tuple(w - LR * g for w, g in zip(p, grads))


def _step_with_grads(p, x, y):
    loss, grads = _vg(p, x, y)
    return loss, grads, tuple(w - LR * g for w, g in zip(p, grads))


def _data(seed=0, n=16, d=12, h=9, k=4):
    rng = np.random.default_rng(seed)
    p = ((rng.standard_normal((d, h)) / 3).astype(np.float32),
         (0.1 * rng.standard_normal(h)).astype(np.float32),
         (rng.standard_normal((h, k)) / 3).astype(np.float32),
         (0.1 * rng.standard_normal(k)).astype(np.float32))
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = np.eye(k, dtype=np.float32)[rng.integers(0, k, n)]
    return p, x, y


_noop = numba.njit(lambda *a: None)


def _exe(jitted):
    (plan,) = jitted._cache.values()
    return plan.exe


def _allocations(jitted, p, x, y, steps=4):
    """Arrays allocated by each of ``steps`` steady-state calls (argument wrappers
    subtracted), and the final parameters."""
    p = jitted(p, x, y)[-1]  # compile and warm up
    p = jitted(p, x, y)[-1]
    exe = _exe(jitted)
    _nrt_python.memsys_enable_stats()
    counts = []
    for _ in range(steps):
        conv = [*p, x, y]
        arena = exe.pool.take()
        args = [exe.dims, *conv, *exe.pool.slots(arena, conv)]
        exe.pool.give(arena)
        before = rtsys.get_allocation_stats().alloc
        _noop(*args)
        wrappers = rtsys.get_allocation_stats().alloc - before
        before = rtsys.get_allocation_stats().alloc
        p = jitted(p, x, y)[-1]
        counts.append(rtsys.get_allocation_stats().alloc - before - wrappers)
    return counts, p


def _array_outputs(jitted) -> int:
    return sum(t.shape != () for t in _exe(jitted).fn.out_types)


def test_donated_step_allocates_nothing():
    p, x, y = _data()
    jitted = fg.jit(_step, donate_argnums=0)
    counts, _ = _allocations(jitted, tuple(a.copy() for a in p), x, y)
    assert counts == [0, 0, 0, 0]


def test_step_allocates_exactly_its_array_outputs():
    p, x, y = _data()
    jitted = fg.jit(_step)
    counts, _ = _allocations(jitted, p, x, y)
    assert _array_outputs(jitted) == 4
    assert counts == [4, 4, 4, 4]


def test_donated_step_allocates_only_what_is_not_donated():
    p, x, y = _data()
    jitted = fg.jit(_step_with_grads, donate_argnums=0)
    counts, _ = _allocations(jitted, tuple(a.copy() for a in p), x, y)
    assert _array_outputs(jitted) == 8  # 4 gradients (fresh) + 4 parameters (donated)
    assert counts == [4, 4, 4, 4]


def test_donated_outputs_reuse_the_donated_memory():
    p, x, y = _data()
    jitted = fg.jit(_step, donate_argnums=0)
    p1 = jitted(tuple(a.copy() for a in p), x, y)[1]
    _, p2 = jitted(p1, x, y)
    for a, b in zip(p1, p2):
        assert np.shares_memory(a, b)


def test_arena_is_reused_across_calls():
    p, x, y = _data()
    jitted = fg.jit(_step)
    jitted(p, x, y)
    exe = _exe(jitted)
    assert exe.pool is not None and exe.pool.free
    ids = [id(a) for a in exe.pool.free[-1]]
    jitted(p, x, y)
    assert [id(a) for a in exe.pool.free[-1]] == ids


def _reference(f, *args):
    """``f`` run by the NumPy interpreter (``FUSEGRAD_DISABLE_JIT``)."""
    from fusegrad import config

    old, config.DISABLE_JIT = config.DISABLE_JIT, True
    try:
        return f(*args)
    finally:
        config.DISABLE_JIT = old


@pytest.mark.parametrize("donate", [(), 0])
def test_steps_equal_the_interpreter(donate):
    p, x, y = _data(seed=3)
    jitted = fg.jit(_step, donate_argnums=donate)
    want = tuple(a.copy() for a in p)
    got = tuple(a.copy() for a in p)
    for _ in range(3):
        want_loss, want = _reference(_step, want, x, y)
        got_loss, got = jitted(got, x, y)
        np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_donated_argument_read_after_a_same_shaped_result():
    """``a`` is read by the product after ``a + 1`` is computed: it cannot take its place."""
    def f(a, b):
        c = a + 1.0
        return c, a @ b

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 5)), rng.standard_normal((5, 5))
    want = (a + 1.0, a @ b)
    got = fg.jit(f, donate_argnums=0)(a.copy(), b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_donated_argument_passed_twice_is_not_overwritten_early():
    """The same array as a donated and a kept argument: the donation is skipped."""
    def f(a, b):
        return a * 2.0, b.sum()

    a = np.arange(6.0)
    out, s = fg.jit(f, donate_argnums=0)(a, a)
    np.testing.assert_array_equal(out, np.arange(6.0) * 2)
    assert s == 15.0


def test_non_contiguous_donation_is_skipped():
    def f(a):
        return a * 2.0

    base = np.arange(12.0).reshape(3, 4)
    view = base[:, ::2]
    out = fg.jit(f, donate_argnums=0)(view)
    np.testing.assert_array_equal(out, np.arange(12.0).reshape(3, 4)[:, ::2] * 2)
    np.testing.assert_array_equal(base, np.arange(12.0).reshape(3, 4))


def test_donating_a_static_argument_is_an_error():
    with pytest.raises(Exception, match="static"):
        fg.jit(lambda a, n: a * n, static_argnums=1, donate_argnums=1)(np.ones(3), 2)


def test_plan_shares_slots_and_keeps_results_out_of_the_arena():
    p, x, y = _data()
    jitted = fg.jit(_step)
    jitted(p, x, y)
    exe = _exe(jitted)
    plan = exe.pool.plan
    values = [v for v in plan.of if not isinstance(v, tuple)]
    assert len({plan.of[v] for v in values}) < len(values)  # some slots shared
    for r in exe.fused.results:
        assert r not in plan.of
    assert all(s.param is None for s in plan.slots)
    arena_only = buffer_plan(exe.fused, frozenset(), arena=False)
    assert arena_only.slots == []


def test_compiled_results_not_views_of_the_arena():
    """Results stay valid after later calls reuse the arena."""
    p, x, y = _data()
    jitted = fg.jit(_step)
    _, p1 = jitted(p, x, y)
    snapshot = [a.copy() for a in p1]
    jitted(p1, x, y)
    jitted(p, x, y)
    for a, b in zip(p1, snapshot):
        np.testing.assert_array_equal(a, b)


def test_pool_limits(monkeypatch):
    from fusegrad import config

    monkeypatch.setattr(config, "BUFFER_POOL", 0)
    p, x, y = _data()
    jitted = fg.jit(_step)
    jitted(p, x, y)
    exe = _exe(jitted)
    assert exe.pool.free == []
    np.testing.assert_allclose(jitted(p, x, y)[0], _reference(_step, p, x, y)[0], rtol=1e-5)


def test_cached_executables_are_per_donation():
    p, x, y = _data()
    a = fg.jit(_step)
    b = fg.jit(_step, donate_argnums=0)
    a(p, x, y)
    b(tuple(q.copy() for q in p), x, y)
    assert _exe(a) is not _exe(b)
    assert any(s.param is not None for s in _exe(b).pool.plan.slots)
    assert compiled.executable(_exe(a).fn) is _exe(a)


def test_donation_with_a_loop_and_two_donated_states():
    """Adam-like state update with a fori_loop inside: donated results equal the
    interpreter's, and the loop's carried arrays are never overwritten early."""
    def update(p, m, g):
        def body(i, carry):
            q, mm = carry
            mm = 0.9 * mm + 0.1 * g
            return q - 0.01 * mm, mm

        q, mm = fg.fori_loop(0, 3, body, (p, m))
        return q @ q.T, q, mm

    rng = np.random.default_rng(2)
    p, m, g = (rng.standard_normal((4, 4)) for _ in range(3))
    want = _reference(update, p, m, g)
    got = fg.jit(update, donate_argnums=(0, 1))(p.copy(), m.copy(), g)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_two_memmaps_of_one_file_are_not_donated(tmp_path):
    """Two mappings of one file have different addresses for the same bytes: overwriting
    the donated one would change the other while it is read."""
    path = tmp_path / "data.bin"
    np.arange(4096.0).tofile(path)
    a = np.memmap(path, dtype=np.float64, mode="r+")
    b = np.memmap(path, dtype=np.float64, mode="r+")
    f = fg.jit(lambda x, y: x * 2 + fnp.flip(y), donate_argnums=0)
    got = f(a, b)
    want = np.arange(4096.0) * 2 + np.arange(4096.0)[::-1]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.fromfile(path), np.arange(4096.0))  # file untouched


def test_arrays_over_other_buffers_are_not_donated():
    """A view of a ``bytearray`` (any buffer not owned by NumPy or Numba) is kept."""
    raw = bytearray(np.arange(8.0).tobytes())
    a = np.frombuffer(raw, dtype=np.float64)
    out = fg.jit(lambda x: x * 2.0, donate_argnums=0)(a)
    np.testing.assert_array_equal(out, np.arange(8.0) * 2)
    np.testing.assert_array_equal(np.frombuffer(raw), np.arange(8.0))


def test_results_of_compiled_calls_are_still_donated():
    """Numba-allocated results passed back in (a training loop) keep being donated."""
    f = fg.jit(lambda x: x * 2.0, donate_argnums=0)
    x = f(np.arange(8.0))
    y = f(x)
    np.testing.assert_array_equal(y, np.arange(8.0) * 4)
    assert np.shares_memory(x, y)
