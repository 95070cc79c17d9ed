"""Integer division, remainder and power in compiled code follow NumPy exactly.

``MIN // -1`` and ``x // 0`` trap in the hardware division (SIGFPE kills the
process); NumPy gives MIN and 0 (``%``: 0 and 0). An integer to a negative
integer power raises ValueError in NumPy; compiled code must not return 0.
Float floor division follows NumPy's ``npy_divmod`` (``inf // 3`` is NaN).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import fusegrad as fg

SIGNED = (np.int8, np.int16, np.int32, np.int64)


def _int_cases(dt):
    info = np.iinfo(dt)
    if info.min < 0:
        a = [info.min, info.min, info.max, 7, -7, 7, -7, 0, info.min, 5]
        b = [-1, 0, -1, 2, 2, -2, -2, 0, 1, 3]
    else:
        a, b = [info.max, 7, 0, 9, info.max], [0, 2, 0, 3, 1]
    return np.array(a, dt), np.array(b, dt)


def _divmod_all(*ab):
    return tuple((a // b, a % b) for a, b in zip(ab[::2], ab[1::2]))


def _numpy_divmod(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return a // b, a % b


_SCRIPT = textwrap.dedent("""
    import numpy as np, fusegrad as fg
    from tests.codegen.test_integer_arithmetic import _divmod_all, _int_cases
    dts = (np.int8, np.int16, np.int32, np.int64, np.uint8)
    args = [x for dt in dts for x in _int_cases(dt)]
    for q, r in fg.jit(_divmod_all)(*args):
        print(q.dtype, q.tolist(), r.tolist())
""")


@pytest.mark.compiled
def test_compiled_integer_floor_divide_and_remainder_match_numpy():
    """In a child process: on failure the division traps and kills it."""
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    lines = proc.stdout.strip().splitlines()
    want = []
    for dt in (*SIGNED, np.uint8):
        q, r = _numpy_divmod(*_int_cases(dt))
        want.append(f"{q.dtype} {q.tolist()} {r.tolist()}")
    assert lines == want


@pytest.mark.parametrize("dt", [*SIGNED, np.uint8])
def test_interpreter_and_eager_integer_division_match_numpy(dt):
    a, b = _int_cases(dt)
    want = _numpy_divmod(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = fg.jit(lambda a, b: (a // b, a % b))(a, b)  # the interpreter (not compiled)
        ta, tb = fg.tensor(a), fg.tensor(b)
        eager = ((ta // tb).numpy(), (ta % tb).numpy())
    for g in (got, eager):
        np.testing.assert_array_equal(g[0], want[0])
        np.testing.assert_array_equal(g[1], want[1])
        assert g[0].dtype == want[0].dtype


@pytest.mark.compiled
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_compiled_float_floor_divide_and_remainder_match_numpy(dt):
    x = np.array([5.5, -3.0, 1.0, np.inf, -np.inf, 7.0, -7.0, np.nan, 0.0, -0.0, 1e30, 3.0,
                  -1.0], dt)
    y = np.array([2.0, 0.0, -0.0, 3.0, 2.0, np.inf, np.inf, 1.0, -2.0, 2.0, 1e-30, -np.inf,
                  3.0], dt)
    q, r = fg.jit(lambda a, b: (a // b, a % b))(x, y)
    wq, wr = _numpy_divmod(x, y)
    np.testing.assert_array_equal(q, wq)
    np.testing.assert_array_equal(r, wr)
    np.testing.assert_array_equal(np.signbit(q), np.signbit(wq))
    np.testing.assert_array_equal(np.signbit(r), np.signbit(wr))


@pytest.mark.compiled
def test_compiled_integer_power_of_a_negative_exponent_raises_as_numpy():
    f = fg.jit(lambda a, b, c: (a ** b, c ** 2, (a ** b).sum()))
    a, b = np.array([2, 3]), np.array([3, 2])
    out = f(a, b, np.array([2, -3], np.int8))
    assert out[0].tolist() == [8, 9] and out[1].tolist() == [4, 9] and int(out[2]) == 17
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        f(a, np.array([-1, 2]), np.array([1], np.int8))
    big = np.full(300_000, 2)  # large enough for the multi-threaded entry
    e = np.ones(300_000, np.int64)
    e[-1] = -2
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        fg.jit(lambda a, b: a ** b)(big, e)
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        fg.jit(lambda a: a ** -1)(np.array([2]))
    np.testing.assert_array_equal(fg.jit(lambda a, b: a ** b)(np.array([2.0, 4.0]),
                                                             np.array([-1.0, 0.5])), [0.5, 2.0])
