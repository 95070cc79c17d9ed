"""fg.random: Threefry test vectors, samplers, and bitwise agreement of the interpreter,
compiled code, vmap and loops."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import fusegrad as fg
from fusegrad import config
from fusegrad.ir import ops
from fusegrad.ir.threefry import hash_words
from fusegrad.random import _cos_2pi, _log_unit
from tests.helpers import check_grads

ROOT = Path(__file__).resolve().parents[2]

#: Random123's known-answer vectors for threefry2x32_20: (key, counter, result)
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


def both(f, *args):
    """``fg.jit(f)(*args)`` with the NumPy interpreter and compiled; asserts they agree
    bit for bit and returns the compiled result."""
    jf = fg.jit(f)
    old = config.DISABLE_JIT
    try:
        config.DISABLE_JIT = True
        want = jf(*args)
        config.DISABLE_JIT = False
        got = jf(*args)
    finally:
        config.DISABLE_JIT = old
    for g, w in zip(fg.tree.tree_leaves(got), fg.tree.tree_leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes(), (g, w)
    return got


# --- the hash ----------------------------------------------------------------------


@pytest.mark.parametrize("k, c, want", KAT)
def test_reference_hash_matches_known_answers(k, c, want):
    assert tuple(int(w) for w in hash_words(*k, *c)) == want


@pytest.mark.parametrize("k, c, want", KAT)
def test_op_matches_known_answers_eagerly_and_compiled(k, c, want):
    args = [np.int64(v) for v in (*k, *c)]
    f = lambda *a: (ops.threefry2x32(*a, word=0), ops.threefry2x32(*a, word=1))  # noqa: E731
    assert tuple(int(w) for w in f(*args)) == want
    assert tuple(int(w) for w in both(f, *args)) == want


def test_op_reads_low_32_bits():
    lo = ops.threefry2x32(np.int64(0x13198A2E), 0x03707344, 0x243F6A88, 0x85A308D3, word=0)
    hi = ops.threefry2x32(np.int64(0x13198A2E + 5 * 2**32), 0x03707344 - 2**32, 0x243F6A88,
                          0x85A308D3, word=0)
    assert int(lo) == int(hi) == 0xC4923A9C


def test_classic_jax_split_layout():
    """jax.random.split(PRNGKey(0)) before jax_threefry_partitionable hashed the counters
    iota(4) as pairs (0, 2), (1, 3): the op reproduces JAX's published keys."""
    y0, y1 = hash_words(0, 0, np.array([0, 1]), np.array([2, 3]))
    got = np.concatenate([y0, y1]).reshape(2, 2)
    assert got.tolist() == [[4146024105, 967050713], [2718843009, 1272950319]]


# --- keys --------------------------------------------------------------------------


def test_key_words():
    assert fg.random.key(0).tolist() == [0, 0]
    assert fg.random.key(2**40 + 7).tolist() == [256, 7]
    assert fg.random.key(-1).tolist() == [2**32 - 1, 2**32 - 1]
    assert fg.random.key(0).dtype == np.int64
    with pytest.raises(ValueError, match="64 bits"):
        fg.random.key(2**64)


def test_split_and_fold_in_hash_counters():
    k = fg.random.key(123)
    s = fg.random.split(k, 3)
    assert s.shape == (3, 2) and s.dtype == np.int64
    for j in range(3):
        assert s[j].tolist() == [int(w) for w in hash_words(0, 123, 0, j)]
    assert fg.random.fold_in(k, 2).tolist() == s[2].tolist()
    assert fg.random.fold_in(k, np.int32(2)).tolist() == s[2].tolist()
    assert len({tuple(r) for r in fg.random.split(k, 1000).tolist()}) == 1000


def test_bad_keys_are_refused():
    with pytest.raises(TypeError, match="shape \\(2,\\)"):
        fg.random.normal(np.zeros(3, dtype=np.int64), (2,))
    with pytest.raises(TypeError, match="integer"):
        fg.random.uniform(np.zeros(2), (2,))
    with pytest.raises(TypeError, match="floating-point"):
        fg.random.uniform(fg.random.key(0), (2,), dtype=np.int64)
    with pytest.raises(ValueError, match="rate"):
        fg.random.dropout(fg.random.key(0), np.ones(3), 1.0)


# --- samplers ----------------------------------------------------------------------


def test_exact_arithmetic_log_and_cos_are_accurate():
    u = np.concatenate([np.linspace(2.0**-52, 1.0, 20001), [2.0**-52, 1.0]])
    assert np.max(np.abs(_log_unit(u) - np.log(u))) < 1e-13
    t = np.linspace(0.0, 1.0, 20001)[:-1]
    assert np.max(np.abs(_cos_2pi(t) - np.cos(2 * np.pi * t))) < 1e-15


def test_uniform_range_and_distribution():
    k = fg.random.key(1)
    u = fg.random.uniform(k, (100_000,))
    assert u.dtype == np.float64 and u.min() >= 0.0 and u.max() < 1.0
    assert stats.kstest(u, "uniform").pvalue > 1e-4
    u32 = fg.random.uniform(k, (50_000,), np.float32, minval=-2.0, maxval=3.0)
    assert u32.dtype == np.float32 and u32.min() >= -2.0 and u32.max() < 3.0
    assert stats.kstest(u32, stats.uniform(-2, 5).cdf).pvalue > 1e-4
    assert fg.random.uniform(k, ()).shape == ()


def test_normal_distribution():
    z = fg.random.normal(fg.random.key(2), (200_000,))
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.var() - 1) < 0.02
    assert fg.random.normal(fg.random.key(2), (3, 4), np.float32).dtype == np.float32


def test_bits_and_bernoulli():
    b = fg.random.bits(fg.random.key(3), (4, 5))
    assert b.shape == (4, 5) and b.min() >= 0 and b.max() < 2**32
    m = fg.random.bernoulli(fg.random.key(3), 0.3, (100_000,))
    assert m.dtype == np.bool_ and abs(m.mean() - 0.3) < 5 * np.sqrt(0.21 / m.size)
    p = np.array([0.0, 1.0, 0.5])
    assert fg.random.bernoulli(fg.random.key(4), p).tolist()[:2] == [False, True]


def test_different_keys_give_different_draws():
    a, b = fg.random.split(fg.random.key(0))
    assert not np.array_equal(fg.random.normal(a, (8,)), fg.random.normal(b, (8,)))
    assert np.array_equal(fg.random.normal(a, (8,)), fg.random.normal(a, (8,)))


# --- interpreter == compiled, bit for bit ------------------------------------------


@pytest.mark.parametrize("shape", [(), (7,), (33, 65)])
def test_samplers_bitwise_equal_interpreter_and_compiled(shape):
    def f(k, lo):
        a, b = fg.random.split(k)
        return (
            fg.random.bits(a, shape),
            fg.random.uniform(a, shape),
            fg.random.uniform(b, shape, np.float32, minval=lo, maxval=2.0),
            fg.random.normal(b, shape),
            fg.random.normal(a, shape, np.float32),
            fg.random.bernoulli(b, 0.25, shape),
            fg.random.fold_in(k, 9),
        )

    got = both(f, fg.random.key(11), np.float32(-1.5))
    eager = f(fg.random.key(11), np.float32(-1.5))
    for g, e in zip(got, eager, strict=True):
        assert np.array_equal(g, e)


def test_dropout_mask_equal_interpreter_and_compiled():
    x = np.arange(1.0, 1 + 40 * 30).reshape(40, 30)

    def f(k, x):
        return fg.random.dropout(k, x, 0.3)

    y = both(f, fg.random.key(5), x)
    kept = y != 0
    assert np.allclose(y[kept], x[kept] / 0.7, rtol=1e-15, atol=0)
    assert abs(kept.mean() - 0.7) < 0.05
    assert np.array_equal(y, f(fg.random.key(5), x))


def test_gradient_through_dropout_uses_the_mask():
    k = fg.random.key(6)
    x = np.random.default_rng(0).normal(size=(5, 6))

    def loss(x, k):
        return fg.numpy.sum(fg.random.dropout(k, x, 0.5) * x)

    g = both(fg.grad(loss), x, k)
    d = fg.random.dropout(k, x, 0.5)
    assert np.allclose(g, 2 * d, rtol=1e-14, atol=0)
    check_grads(fg.make_ir(loss)(x, k), [x, k], order=1)


# --- transformations and loops -----------------------------------------------------


def test_vmap_over_keys_equals_loop():
    keys = fg.random.split(fg.random.key(7), 5)
    f = lambda k: fg.random.normal(k, (3,))  # noqa: E731
    got = fg.vmap(f)(keys)
    want = np.stack([f(k) for k in keys])
    assert np.array_equal(got, want)
    assert np.array_equal(both(fg.vmap(f), keys), want)


def test_fold_in_loop_index_in_fori_loop_and_scan():
    k = fg.random.key(8)

    def body(i, acc):
        return acc + fg.random.uniform(fg.random.fold_in(k, i), (4,))

    want = np.zeros(4)
    for i in range(6):
        want = want + fg.random.uniform(fg.random.fold_in(k, i), (4,))
    got = both(lambda a: fg.fori_loop(0, 6, body, a), np.zeros(4))
    assert np.array_equal(got, want)

    def step(key, _):
        key, sub = fg.random.split(key)
        return key, fg.random.normal(sub, (2,))

    _, ys = both(lambda key: fg.scan(step, key, None, length=5), k)
    key, rows = k, []
    for _ in range(5):
        key, sub = fg.random.split(key)
        rows.append(fg.random.normal(sub, (2,)))
    assert np.array_equal(ys, np.stack(rows))


def test_reproducible_across_processes():
    code = ("import fusegrad as fg; import numpy as np; "
            "print(fg.random.normal(fg.random.key(42), (6,)).tobytes().hex())")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == fg.random.normal(fg.random.key(42), (6,)).tobytes().hex()


def test_ir_text_round_trip():
    from fusegrad.ir import evaluate, parse_function, verify

    fn = fg.make_ir(lambda k: fg.random.normal(k, (3,)))(fg.random.key(0))
    text = str(fn)
    assert "threefry2x32" in text and "{word=1}" in text
    back = parse_function(text)
    verify(back)
    assert str(back) == text
    assert np.array_equal(evaluate(back, fg.random.key(9))[0],
                          fg.random.normal(fg.random.key(9), (3,)))
