"""A gradient fusegrad cannot compute is an error, never a wrong number.

Converting a traced value that depends on a differentiated input to a Python number or
a NumPy array (``float``, ``int``, ``complex``, ``.item()``, ``.tolist()``,
``np.asarray`` / ``np.array``, storing it into a NumPy array, SciPy's own conversions)
would make it a constant of the trace and drop its gradient: every transform raises
``fg.TracerConversionError`` naming the line, the conversion and the fixes. The fixed
code (``fnp.stack``, ``x.at[i].set``) gives the right gradient; conversions of values
that carry no gradient (``fg.stop_gradient``, integer and non-differentiated arguments,
zero-gradient ops, ``bool`` for ``if``) keep working, through the interpreter and
compiled code; the eager ``Tensor`` keeps PyTorch's ``float(t)`` (it detaches).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

import fusegrad as fg
import fusegrad.numpy as fnp
from tests.helpers import assert_close, numeric_grads
from tests.semantics.test_errors import _line_of

X = np.array([0.7, 0.5, -0.3])
V = np.array([0.2, -1.0, 0.6])


def store_scalar(x):
    g = np.zeros(3)
    g[1] = x[1]  # convert-here
    return fnp.sum(g * x)


def store_slice(x):
    xx = np.zeros(5)
    xx[1:-1] = x  # convert-here
    return fnp.sum(xx[2:] * xx[:-2])


def to_float(x):
    return float(x[0]) * x[1]  # convert-here


def to_item(x):
    return x[1] * x[0].item()  # convert-here


def to_int(x):
    return x[1] * int(10 * x[0])  # convert-here


def to_complex(x):
    return complex(x[0]).real * x[1]  # convert-here


def to_list(x):
    return fnp.sum(fnp.asarray(x.tolist()) * x)  # convert-here


def as_array(x):
    return fnp.sum(np.asarray(x) * x)  # convert-here


def array_of_list(x):
    return np.sum(np.array([x[0], x[1] * x[2]]) ** 2)  # convert-here


def scipy_rosen(x):
    return scipy.optimize.rosen(x)  # convert-here


CASES = {
    "store scalar": (store_scalar, "storing it into a NumPy array"),
    "store slice": (store_slice, "storing it into a NumPy array"),
    "float": (to_float, "float()"),
    "item": (to_item, ".item()"),
    "int": (to_int, "int()"),
    "complex": (to_complex, "complex()"),
    "tolist": (to_list, ".tolist()"),
    "np.asarray": (as_array, "np.asarray"),
    "np.array of a list": (array_of_list, "NumPy converting a list"),
    "scipy.optimize.rosen": (scipy_rosen, "np.asarray"),
}

#: every transform that differentiates, applied to a scalar function of X
TRANSFORMS = {
    "grad": lambda f: fg.grad(f)(X),
    "value_and_grad": lambda f: fg.value_and_grad(f)(X),
    "vjp": lambda f: fg.vjp(f, X)[1](1.0),
    "jvp": lambda f: fg.jvp(f, (X,), (V,)),
    "jacobian": lambda f: fg.jacobian(f)(X),
    "jacfwd": lambda f: fg.jacfwd(f)(X),
    "hessian": lambda f: fg.hessian(f)(X),
    "hvp": lambda f: fg.hvp(f)(X, V),
    "elementwise_grad": lambda f: fg.elementwise_grad(f)(X),
    "grad(grad)": lambda f: fg.grad(lambda y: fg.grad(f)(y)[0])(X),
    "jit(grad)": lambda f: fg.jit(fg.grad(f))(X),
    "vmap(grad)": lambda f: fg.vmap(fg.grad(f))(np.stack([X, -X])),
}


def _assert_names_line_and_fixes(err, fn, conversion, cut=True):
    msg = str(err)
    assert f"{__file__}:{_line_of(fn, 'convert-here')}" in msg, msg
    assert conversion in msg, msg
    for fix in ("fnp.asarray / fnp.array / fnp.stack", "g = g.at[i].set(v)",
                *(("fg.stop_gradient(x)",) if cut else ())):
        assert fix in msg, (fix, msg)
    assert "site-packages" not in msg


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_a_conversion_that_drops_a_gradient_raises(name, transform):
    fn, conversion = CASES[name]
    with pytest.raises(fg.TracerConversionError) as info:
        TRANSFORMS[transform](fn)
    assert isinstance(info.value, TypeError)
    _assert_names_line_and_fixes(info.value, fn, conversion)
    assert "depends on an input being differentiated" in str(info.value)


@pytest.mark.compiled
@pytest.mark.parametrize("name", ["store scalar", "float", "np.asarray"])
def test_a_conversion_that_drops_a_gradient_raises_compiled(name):
    fn, conversion = CASES[name]
    for transform in ("grad", "jvp", "hessian"):
        with pytest.raises(fg.TracerConversionError) as info:
            TRANSFORMS[transform](fn)
        _assert_names_line_and_fixes(info.value, fn, conversion)


def test_jit_and_vmap_conversions_give_the_conversion_error():
    for fn, why in ((to_float, "fg.jit traces the function once"),
                    (store_scalar, "fg.jit traces the function once")):
        with pytest.raises(fg.TracerConversionError) as info:
            fg.jit(fn)(X)
        _assert_names_line_and_fixes(info.value, fn, CASES["float"][1] if fn is to_float
                                     else "storing it into a NumPy array", cut=False)
        assert why in str(info.value) and "static_argnums" in str(info.value)
    with pytest.raises(fg.TracerConversionError, match="per-example") as info:
        fg.vmap(as_array)(np.stack([X, X]))
    _assert_names_line_and_fixes(info.value, as_array, "np.asarray", cut=False)


# --- the fixes keep the gradient -------------------------------------------------------------


def fixed_store_scalar(x):
    g = fnp.zeros_like(x).at[1].set(x[1])
    return fnp.sum(g * x)


def fixed_store_slice(x):
    xx = fg.stop_gradient(np.zeros(5)).at[1:-1].set(x)
    return fnp.sum(xx[2:] * xx[:-2])


def fixed_store_slice_pad(x):
    xx = fnp.pad(x, 1)
    return fnp.sum(xx[2:] * xx[:-2])


def fixed_array_of_list(x):
    return fnp.sum(fnp.stack([x[0], x[1] * x[2]]) ** 2)


def fixed_rosen(x):
    return fnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


#: each fix, and the original code: run on NumPy arrays, that is what FD differentiates
FIXED = {fixed_store_scalar: store_scalar, fixed_store_slice: store_slice,
         fixed_store_slice_pad: store_slice, fixed_array_of_list: array_of_list,
         fixed_rosen: scipy_rosen}


@pytest.mark.parametrize("fn", FIXED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.compiled)],
                         ids=["interpreted", "compiled"])
def test_the_fixes_give_the_finite_difference_gradient(fn, compiled):
    (want,) = numeric_grads(lambda x: float(FIXED[fn](x)), [X])
    assert_close(fg.grad(fn)(X), want, "fd")
    assert_close(fg.jvp(fn, (X,), (V,))[1], want @ V, "fd")
    if fn is fixed_rosen:
        assert_close(fg.grad(fn)(X), scipy.optimize.rosen_der(X), "exact64")
        assert_close(fg.hessian(fn)(X), scipy.optimize.rosen_hess(X), "exact64")


# --- conversions that drop nothing keep working ----------------------------------------------


def stopped_float(x):
    return x[1] * float(fg.stop_gradient(x[0]))


def stopped_asarray(x):
    a = np.asarray(fg.stop_gradient(x))
    return fnp.sum(x * a)


def stopped_store(x):
    g = np.zeros(3)
    g[1] = fg.stop_gradient(x[1])
    return fnp.sum(g * x)


def int_argument(x, n):
    y = x
    for _ in range(int(n)):
        y = fnp.sin(y)
    return fnp.sum(y)


def other_argument(x, c):
    return fnp.sum(x * float(c[0]) + np.asarray(c) * x)


def zero_gradient_ops(x):
    k = int(fnp.floor(fnp.sum(x) * 2))  # floor has no gradient: nothing dropped
    i = int(fnp.argmax(x))  # an integer value
    return fnp.sum(x ** k) + x[i] * float(fnp.sign(x[0]))


def branch(x):
    if fnp.sum(x) > 0:  # bool() for `if` stays guarded
        return fnp.sum(fnp.sin(x) * x)
    return fnp.sum(x ** 3)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.compiled)],
                         ids=["interpreted", "compiled"])
def test_conversions_that_drop_no_gradient_keep_working(compiled):
    x0, x1, _ = X
    assert_close(fg.grad(stopped_float)(X), np.array([0.0, x0, 0.0]), "exact64")
    assert_close(fg.grad(stopped_asarray)(X), X, "exact64")
    assert_close(fg.grad(stopped_store)(X), np.array([0.0, x1, 0.0]), "exact64")
    for n in (1, 3):
        (want,) = numeric_grads(lambda x, n=n: float(int_argument(x, n)), [X])
        assert_close(fg.grad(int_argument)(X, n), want, "fd")
    c = np.array([2.0, -1.0, 0.5])
    assert_close(fg.grad(other_argument)(X, c), c[0] + c, "exact64")
    (want,) = numeric_grads(lambda x: float(zero_gradient_ops(x)), [X])
    assert_close(fg.grad(zero_gradient_ops)(X), want, "fd")
    for x in (X, -X - 1):
        (want,) = numeric_grads(lambda v: float(branch(v)), [x])
        assert_close(fg.grad(branch)(x), want, "fd")


def test_nested_transforms_see_the_outer_dependence():
    # the inner grad does not differentiate y, but the outer one does
    def inner(x, y):
        return x * float(y)  # convert-here

    with pytest.raises(fg.TracerConversionError) as info:
        fg.grad(lambda y: fg.grad(inner)(1.5, y))(2.0)
    assert f"{__file__}:{_line_of(inner, 'convert-here')}" in str(info.value)
    # an outer value that is not differentiated converts fine
    g = fg.grad(lambda x, y: x * fg.grad(inner)(x, y), argnums=0)(1.5, 2.0)
    assert_close(g, np.array(2.0), "exact64")


def test_eager_float_detaches_as_in_pytorch():
    t = fg.tensor(2.0, requires_grad=True)
    y = t * float(t) + t.item() * t
    y.backward()
    assert float(t.grad) == 4.0
    a = np.asarray(fg.tensor([1.0, 2.0]))
    assert a.tolist() == [1.0, 2.0]
