"""Tensors from NumPy arrays of other byte orders and of unsupported dtypes.

``fg.tensor`` copies, so big-endian data is converted to native order (as
``torch.tensor`` does); ``fg.from_numpy`` shares memory and cannot, so it says
how to convert. Complex, object and string arrays are a ``TypeError`` naming the
dtype and what to do, never a bare ``KeyError``.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg


@pytest.mark.parametrize("dt", [">f8", ">f4", ">i4", ">i8", ">f2"])
def test_tensor_and_as_tensor_of_big_endian_data_convert_it(dt):
    a = np.arange(6, dtype=dt).reshape(2, 3)
    for t in (fg.tensor(a), fg.as_tensor(a), fg.tensor(a, requires_grad=a.dtype.kind == "f")):
        assert t.detach().numpy().dtype == a.dtype.newbyteorder("=")
        np.testing.assert_array_equal(t.detach().numpy(), a)
    if a.dtype.kind == "f":
        x = fg.tensor(a, requires_grad=True)
        (x * x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), 2 * a)


def test_from_numpy_of_big_endian_data_says_how_to_convert():
    with pytest.raises(TypeError, match=r"'>f8'.*astype\(a.dtype.newbyteorder\('='\)\)"):
        fg.from_numpy(np.arange(3, dtype=">f8"))


@pytest.mark.parametrize("make, match", [
    (lambda: np.array([1 + 2j], np.clongdouble), r"complex256.*supported: float16"),
    (lambda: np.array([object(), 1], dtype=object), r"'\|O'.*not numeric.*np\.asarray"),
    (lambda: np.array(["a", "b"]), r"'<U1'.*supported: float16"),
])
def test_unsupported_dtypes_are_clear_type_errors(make, match):
    for f in (fg.tensor, fg.as_tensor, fg.from_numpy):
        with pytest.raises(TypeError, match=match):
            f(make())
