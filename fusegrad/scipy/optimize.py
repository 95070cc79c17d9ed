"""``fg.scipy.minimize``: ``scipy.optimize.minimize`` with compiled exact derivatives.

SciPy is handed one compiled ``value_and_grad`` of the objective (``jac=True``: the
value and the gradient come from one native call) and, for the methods that take
it (Newton-CG, trust-ncg, trust-krylov, trust-constr), the Hessian-vector product
``hessp`` by forward-over-reverse (``fg.jvp`` of ``fg.grad``): no finite differences, no Hessian
matrix. Every other keyword goes to SciPy unchanged; the result is SciPy's
``OptimizeResult`` with ``x`` in the shape of ``x0``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import numpy as np

from ..transforms.forward import jvp
from ..transforms.jit_api import jit
from ..transforms.reverse import grad, value_and_grad

#: methods that evaluate only the objective (no gradient to hand them)
_VALUE_ONLY = ("nelder-mead", "powell", "cobyla", "cobyqa")
#: methods that take a Hessian-vector product
_HESSP = ("newton-cg", "trust-ncg", "trust-krylov", "trust-constr")


def minimize(fun: Callable, x0, args: tuple = (), method: str | None = None, **kw):
    """Minimise scalar ``fun(x, *args)`` from ``x0`` with ``scipy.optimize.minimize``.

    ``x0`` may have any shape (SciPy sees it flattened; ``fun`` gets it in its own
    shape); ``args`` are passed to ``fun`` after ``x``, as SciPy does. ``jac`` and
    ``hessp`` come from fusegrad unless given in ``kw``.

    >>> import numpy as np, fusegrad as fg, fusegrad.numpy as fnp
    >>> res = fg.scipy.minimize(lambda x: fnp.sum((x - 3.0) ** 2), np.zeros(2), method="BFGS")
    >>> np.round(res.x, 6)
    array([3., 3.])
    """
    import scipy.optimize

    x0 = np.asarray(x0, dtype=np.float64)
    shape = x0.shape
    args = tuple(args)
    name = (method or "").lower()
    compiled, vg, hv = _compiled(fun)
    vg = None if name in _VALUE_ONLY else vg

    def value(x):
        return float(compiled(x.reshape(shape), *args))

    def value_and_jac(x):
        v, g = vg(x.reshape(shape), *args)
        return float(v), np.asarray(g, dtype=np.float64).ravel()

    if "jac" in kw or vg is None:
        objective = value
    else:
        objective, kw["jac"] = value_and_jac, True
    if name in _HESSP and "hessp" not in kw and "hess" not in kw:
        def hessp(x, p):
            return np.asarray(hv(x.reshape(shape), p.reshape(shape), *args),
                              np.float64).ravel()

        kw["hessp"] = hessp
    res = scipy.optimize.minimize(objective, x0.ravel(), args=(), method=method, **kw)
    res.x = res.x.reshape(shape)
    return res


_transformed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_transformed_lock = threading.Lock()


def _compiled(fun: Callable):
    """``(jit(fun), value_and_grad(fun), hvp)`` with ``hvp(x, p, *args)``, made once per
    ``fun`` so that later calls reuse their traces and compiled code."""
    with _transformed_lock:
        hit = _transformed.get(fun)
        if hit is None:
            def hessian_vector(x, p, *args):
                return jvp(lambda x: grad(fun)(x, *args), (x,), (p,))[1]

            hit = _transformed[fun] = (jit(fun), value_and_grad(fun), jit(hessian_vector))
        return hit
