"""Complex operands to the real-only special functions raise one clear error on every
path (NumPy reference, interpreter, compiled, eager, NumPy's ufunc protocol), never the
function of the real part."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad.ir.errors import ShapeError
from fusegrad.scipy import special

UNARY = ["erf", "erfc", "erfcx", "erfinv", "erfcinv", "gammaln", "digamma", "gamma", "logit",
         "ndtr", "log_ndtr", "ndtri", "i0", "i1", "i0e", "i1e", "log_expit"]
#: name -> function of one complex operand (the others real)
OTHERS = {
    "polygamma": lambda z: special.polygamma(1, z),
    "betaln": lambda z: special.betaln(z, 2.0),
    "gammainc": lambda z: special.gammainc(2.0, z),
    "gammaincc": lambda z: special.gammaincc(z, 1.0),
    "betainc": lambda z: special.betainc(1.5, 2.0, z),
    "multigammaln": lambda z: special.multigammaln(z, 2),
}
FUNCS = {**{n: getattr(special, n) for n in UNARY}, **OTHERS}
Z = np.array([0.6 + 0.3j, 0.2 - 0.1j])
MESSAGE = r"is not defined for complex operands, got c128\[2\].*real arguments only"


def _loss(f):
    return lambda z: fnp.sum(fnp.real(f(z)))


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_complex_operand_raises_on_arrays_and_in_the_interpreter(name):
    f = FUNCS[name]
    with pytest.raises(ShapeError, match=MESSAGE):
        f(Z)
    with pytest.raises(ShapeError, match=MESSAGE):
        fg.grad(_loss(f))(Z)
    with pytest.raises(ShapeError, match=MESSAGE):
        f(fg.tensor(Z))


@pytest.mark.compiled
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_complex_operand_raises_at_trace_time_when_compiled(name):
    with pytest.raises(ShapeError, match=MESSAGE):
        fg.jit(FUNCS[name])(Z)
    with pytest.raises(ShapeError, match=MESSAGE):
        fg.jit(fg.grad(_loss(FUNCS[name])))(Z)


@pytest.mark.parametrize("name", ["erfc", "gammaln", "psi", "ndtr", "i0", "logit", "ndtri"])
def test_scipy_ufuncs_on_complex_traced_values_raise(name):
    ufunc = getattr(scipy.special, name)
    with pytest.raises(ShapeError, match=r"is not defined for complex operands"):
        fg.jit(lambda z: ufunc(z))(Z)


def test_real_operands_still_work_and_complex_xlogy_is_complex():
    x = np.array([0.6, 0.2])
    np.testing.assert_allclose(special.digamma(x), scipy.special.digamma(x), rtol=1e-13)
    np.testing.assert_allclose(fg.jit(special.i0)(x), scipy.special.i0(x), rtol=1e-13)
    np.testing.assert_allclose(special.xlogy(Z, Z), scipy.special.xlogy(Z, Z), rtol=1e-13)
