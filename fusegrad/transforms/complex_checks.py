"""The dtype checks of ``holomorphic=`` (JAX's): which transforms accept complex values.

``grad`` of a real-valued function accepts complex inputs (JAX's convention, see
docs/complex.md); a complex output needs ``holomorphic=True``, and then every
differentiated input must be complex too. ``jacobian`` accepts complex inputs or
outputs only with ``holomorphic=True``.
"""

from __future__ import annotations

from ..ir.bind import aval
from ..tracer.pytree import tree_flatten
from .plan import GradError


def _leaves(args, nums):
    return [leaf for i in nums for leaf in tree_flatten(args[i])[0]]


def check_holomorphic_inputs(who: str, args, nums) -> None:
    for x in _leaves(args, nums):
        t = aval(x)
        if not t.is_complex:
            raise GradError(f"{who}(holomorphic=True): differentiated inputs must be complex, "
                            f"got {t}")


def check_complex_jacobian(args, nums, holomorphic: bool, out_leaves) -> None:
    if holomorphic:
        check_holomorphic_inputs("jacobian", args, nums)
        for o in out_leaves or ():
            if not aval(o).is_complex:
                raise GradError(f"jacobian(holomorphic=True): outputs must be complex, got "
                                f"{aval(o)}")
        return
    for x in (_leaves(args, nums) if out_leaves is None else out_leaves):
        if aval(x).is_complex:
            what = "inputs" if out_leaves is None else "outputs"
            raise GradError(
                f"jacobian: complex {what} ({aval(x)}) need holomorphic=True; for a "
                "non-holomorphic function of complex values use fg.vjp directly")
