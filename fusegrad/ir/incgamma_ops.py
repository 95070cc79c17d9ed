"""The regularised incomplete gamma and beta functions as primitive ops.

``gammainc(a, x)`` / ``gammaincc(a, x)`` are P(a, x) and Q(a, x) = 1 - P(a, x);
``betainc(a, b, x)`` / ``betaincc(a, b, x)`` are I_x(a, b) and 1 - I_x(a, b). The
complements are ops of their own because ``1 - P`` loses every digit in the upper
tail. The references are SciPy's ufuncs (float64, rounded to the operand's type).

``gammainc_da(a, x, n)`` is the n-th derivative of P in ``a`` (``incgamma_kernel``);
it is what the gradients in ``a`` are made of, and its own derivative in ``a`` is
``gammainc_da(n + 1)``, so P is differentiable in ``a`` to any order.
``betainc_grad(a, b, x, wrt)`` is the first derivative of I_x(a, b) in ``a`` or ``b``
(``betainc_kernel``); it has no derivative in the shapes itself.
"""

from __future__ import annotations

from . import shapes as S
from .opdef import _def
from .special_ops import _reference


def _betainc_grad(a, b, x, *, wrt):
    from .betainc_kernel import betainc_grad_reference

    return betainc_grad_reference(a, b, x, wrt=wrt)


def _gammainc_da(a, x, *, n):
    from .incgamma_kernel import gammainc_da_reference

    return gammainc_da_reference(a, x, n=n)


#: op name -> (arity, scipy.special function, what it computes)
INCOMPLETE = {
    "gammainc": (2, "gammainc", "gammainc(a, x): the regularised lower incomplete gamma "
                                "function P(a, x) = gamma(a, x) / Gamma(a)"),
    "gammaincc": (2, "gammaincc", "gammaincc(a, x): the regularised upper incomplete gamma "
                                  "function Q(a, x) = 1 - P(a, x), accurate where P is near 1"),
    "betainc": (3, "betainc", "betainc(a, b, x): the regularised incomplete beta function "
                              "I_x(a, b)"),
    "betaincc": (3, "betaincc", "betaincc(a, b, x): 1 - I_x(a, b), accurate where I_x is "
                                "near 1"),
}

for _name, (_arity, _f, _doc) in INCOMPLETE.items():
    _def(_name, _arity, S.real_elementwise(_name), _reference(_f, _doc), "elementwise",
         promote="float", doc=_doc)

_def("gammainc_da", 2, S.real_elementwise("gammainc_da"), _gammainc_da, "elementwise",
     attrs=("n",), promote="float",
     doc="gammainc_da(a, x, n): d^n/da^n gammainc(a, x) (n >= 1, a Python int)")
_def("betainc_grad", 3, S.real_elementwise("betainc_grad"), _betainc_grad, "elementwise",
     attrs=("wrt",), promote="float",
     doc="betainc_grad(a, b, x, wrt): d/da (wrt=0) or d/db (wrt=1) of betainc(a, b, x)")
