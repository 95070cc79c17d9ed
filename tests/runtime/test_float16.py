"""float16 under compiled transforms: a clear fusegrad error naming the argument (or the
op) and what to do, never Numba's ``NotImplementedError: float16``; the interpreter and
eager Tensors compute float16."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir.errors import FusegradError
from fusegrad.runtime.compiled import Float16Error

pytestmark = pytest.mark.compiled

X16 = np.linspace(-1.0, 1.0, 8).astype(np.float16)


@pytest.mark.parametrize("transform", [
    lambda: fg.jit(lambda x: x * 2 + 1),
    lambda: fg.grad(lambda x: fnp.sum(x * x)),
    lambda: fg.jit(fg.grad(lambda x: fnp.sum(fnp.sin(x)))),
], ids=["jit", "grad", "jit_of_grad"])
def test_a_float16_argument_is_a_clear_error(transform):
    with pytest.raises(Float16Error) as info:
        transform()(X16)
    msg = str(info.value)
    assert isinstance(info.value, FusegradError)
    assert "argument x (f16[8])" in msg and "float32" in msg and "FUSEGRAD_DISABLE_JIT" in msg


def test_a_float16_value_inside_is_a_clear_error_naming_the_op():
    f = fg.jit(lambda x: (x * 2).astype(np.float16).astype(np.float32) + x)
    with pytest.raises(Float16Error, match=r"`convert` making f16\[8\] at .*test_float16.py"):
        f(X16.astype(np.float32))


def test_the_interpreter_computes_float16(monkeypatch):
    monkeypatch.setattr(config, "DISABLE_JIT", True)
    got = fg.grad(lambda x: fnp.sum(x * x))(X16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, X16 * np.float16(2))


def test_float32_still_compiles():
    x = X16.astype(np.float32)
    np.testing.assert_allclose(fg.grad(lambda x: fnp.sum(x * x))(x), 2 * x, rtol=1e-6)
