"""Complex-number methods of the eager Tensor: ``real``, ``imag``, ``conj``, ``angle``.

``backward()`` of a real loss leaves PyTorch's gradient in a complex leaf's ``.grad``:
the conjugate of JAX's (``engine`` accumulates JAX-convention cotangents, ``node``
conjugates them at complex leaves; docs/complex.md).
"""

from __future__ import annotations

from ..ir import complex_ops as C
from .record import operation

_NAMES = {"real": "RealBackward0", "imag": "ImagBackward0", "conj": "ConjBackward0",
          "angle": "AngleBackward0"}


class TensorComplex:
    __slots__ = ()

    def is_complex(self) -> bool:
        return self._cell.value.dtype.kind == "c"

    @property
    def real(self):
        if not self.is_complex():
            return self
        return operation(_NAMES["real"], C.real, self)

    @property
    def imag(self):
        if not self.is_complex():
            raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
        return operation(_NAMES["imag"], C.imag, self)

    def conj(self):
        return operation(_NAMES["conj"], C.conj, self) if self.is_complex() else self

    conj_physical = resolve_conj = conj

    def angle(self):
        return operation(_NAMES["angle"], C.angle, self)
