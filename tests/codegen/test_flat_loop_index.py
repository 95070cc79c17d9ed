"""Flat loop kernels index their chunk from 0 (``lo + j``), so Numba knows the index is
not negative and LLVM can vectorise the chunk; results are unchanged, edge chunks and
total reductions included."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.runtime.compiled import executable
from tests.helpers import assert_close, check_grads

pytestmark = pytest.mark.numba_codegen  # the Numba generator's loops


def _update(p, g):
    return p - 0.01 * g


def _source(f, *args) -> str:
    return executable(fg.make_ir(f)(*args)).source


@pytest.mark.parametrize("n", [1, 511, 512, 513, 3 * 512 + 7])
def test_flat_map_matches_numpy(n):
    rng = np.random.default_rng(n)
    p, g = rng.standard_normal((2, n)).astype(np.float32)
    got = fg.jit(_update)(p, g)
    assert_close(got, p - np.float32(0.01) * g, "f32")


def test_flat_map_loops_from_zero():
    p = g = np.ones((7, 300), np.float32)
    src = _source(_update, p, g)
    assert re.search(r"for (k\d+)_j in range\(\1_hi - \1_lo\):", src)
    assert not re.search(r"in range\(k\d+_lo, k\d+_hi\)", src)  # index of unknown sign


@pytest.mark.parametrize("n", [5, 512, 1300])
def test_flat_total_reduction(n):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n)
    f = fg.jit(lambda x: fnp.sum(fnp.sin(x) * x))
    assert_close(f(x), np.sum(np.sin(x) * x), "exact64")
    g = fg.jit(fg.grad(lambda x: fnp.sum(fnp.sin(x) * x)))(x)
    assert_close(g, np.cos(x) * x + np.sin(x), "exact64")
    check_grads(lambda x: fnp.sum(fnp.sin(x) * x), [x], order=2)
    src = _source(lambda x: fnp.sum(fnp.sin(x) * x), x)
    assert re.search(r"_buf0\[k\d+_j\] = ", src)  # lanes written at the chunk offset


def test_flat_map_over_donated_argument():
    rng = np.random.default_rng(2)
    p, g = rng.standard_normal((2, 2000)).astype(np.float32)
    want = p - np.float32(0.01) * g
    step = fg.jit(_update, donate_argnums=0)
    got = step(p.copy(), g)
    assert_close(got, want, "f32")
