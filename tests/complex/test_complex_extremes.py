"""``max``/``min`` of complex arrays in NumPy's order (real part, then imaginary part),
compiled and interpreted, with the gradient going to the chosen element."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from tests.helpers import assert_close

Z = np.array([[1 + 2j, 3 - 1j, 3 + 0.5j, -2 + 5j],
              [0 + 1j, 0 + 3j, -1j, 0 - 5j],
              [3 + 0.5j, -4 + 0j, 2 + 2j, 0 + 0j]])


@pytest.mark.parametrize("compiled", [False, True], ids=["interpreted", "compiled"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["max", "min"])
def test_values_equal_numpy(compiled, axis, keepdims, name, monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", not compiled)
    ours = fg.jit(lambda z: getattr(fnp, name)(z, axis=axis, keepdims=keepdims))(Z)
    want = getattr(np, name)(Z, axis=axis, keepdims=keepdims)
    assert np.asarray(ours).shape == want.shape
    np.testing.assert_array_equal(np.asarray(ours), want)
    via_numpy = fg.jit(lambda z: getattr(np, name)(z, axis=axis, keepdims=keepdims))(Z)
    np.testing.assert_array_equal(np.asarray(via_numpy), want)


def test_the_gradient_goes_to_the_chosen_element():
    """|max z|^2 at 3+0.5j (which beats 3-1j on the imaginary part): the gradient
    ``2 conj(z)`` = 6-1j, all of it on that element (none on the tie in the real part)."""
    g = fg.grad(lambda z: fnp.real(fnp.max(z) * fnp.conj(fnp.max(z))))(Z[:2])
    want = np.zeros(Z[:2].shape, complex)
    want[0, 2] = 6 - 1j
    assert_close(g, want, "exact64")


def test_the_gradient_matches_finite_differences_along_each_part():
    def f(z):
        return fnp.real(fnp.sum(fnp.min(z, axis=1) ** 2))

    g = fg.grad(f)(Z)
    h = 1e-6
    for i, j in [(0, 3), (2, 1)]:  # chosen, without a tie in the real part (row 1 has)
        for unit, part in [(1.0, np.real), (1j, lambda c: -np.imag(c))]:
            e = np.zeros(Z.shape, complex)
            e[i, j] = unit * h
            fd = (float(f(Z + e)) - float(f(Z - e))) / (2 * h)
            assert abs(fd - part(g[i, j])) < 1e-6


def test_a_nan_part_gives_nan():
    out = fg.jit(fnp.max)(np.array([1 + 1j, np.nan + 2j, 3 + 0j]))
    assert np.isnan(np.real(out)) and np.isnan(np.imag(out))
