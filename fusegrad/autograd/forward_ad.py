"""Eager forward-mode AD, as ``torch.autograd.forward_ad``.

Inside ``with dual_level():``, ``make_dual(primal, tangent)`` gives a tensor whose
tangent is carried through every operation on it (each op's JVP rule runs on
eager tensors); ``unpack_dual(t)`` returns ``(primal, tangent)``. Tangents are
dropped when the level closes. One level at a time, as PyTorch. See
docs/forward_mode.md.
"""

from __future__ import annotations

from typing import NamedTuple

from ..eager import dual as _dual
from ..eager import tensor_base as _TB


class UnpackedDualTensor(NamedTuple):
    """``unpack_dual``'s result: the primal (a view sharing the data) and the tangent."""

    primal: object
    tangent: object


def enter_dual_level() -> int:
    """Open a dual level and return its index (only one may be open at a time)."""
    if _dual.LEVEL[0] >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _dual.LEVEL[0] = 0
    _dual.ACTIVE[0] = 1
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Close the open dual level: every tangent given in it is dropped."""
    if level is None:
        level = _dual.LEVEL[0]
    if level != _dual.LEVEL[0] or level < 0:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _dual.clear()
    _dual.ACTIVE[0] = 0
    _dual.LEVEL[0] = -1


class dual_level:
    """Context manager: the ops inside may use dual tensors (``make_dual``)."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


def _check_level(level) -> None:
    if _dual.LEVEL[0] < 0:
        raise RuntimeError("To create a dual Tensor, you need to be within a dual_level "
                           "context manager (or after enter_dual_level()).")
    if level is not None and level != _dual.LEVEL[0]:
        raise RuntimeError(f"Invalid dual level {level}: only level {_dual.LEVEL[0]} is open")


def make_dual(tensor, tangent, *, level: int | None = None):
    """A tensor with ``tensor``'s value (sharing its data and history) and ``tangent``."""
    _check_level(level)
    if not isinstance(tensor, _TB.TensorBase) or not isinstance(tangent, _TB.TensorBase):
        raise TypeError("make_dual expects Tensors for both the primal and the tangent")
    p, t = tensor._data, tangent._data
    if p.dtype.kind not in "fc" or t.dtype.kind not in "fc":
        raise ValueError(
            f"Expected primal and tangent to be floating point or complex, but got primal "
            f"dtype {tensor.dtype} and tangent dtype {tangent.dtype}.")
    if tuple(p.shape) != tuple(t.shape):
        raise RuntimeError(
            f"Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(p.shape)} "
            f"while the given forward gradient is of size {list(t.shape)}.")
    if p.dtype != t.dtype:
        raise RuntimeError(
            f"Expected tangent to have the same dtype as the primal, but got primal dtype "
            f"{tensor.dtype} and tangent dtype {tangent.dtype}.")
    with _dual.suspended():
        out = tensor.view_as(tensor)
    _dual.set_tangent(out, tangent)
    return out


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``; the tangent is None for a non-dual tensor or
    outside a dual level."""
    if not isinstance(tensor, _TB.TensorBase):
        return UnpackedDualTensor(tensor, None)
    tan = _dual.tangent(tensor)
    if tan is None:
        return UnpackedDualTensor(tensor, None)
    with _dual.suspended():
        primal = tensor.view_as(tensor)
    return UnpackedDualTensor(primal, tan)


__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]
