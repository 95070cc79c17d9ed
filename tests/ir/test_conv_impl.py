"""The op table's NumPy ``conv`` against PyTorch on random geometries, each of its
algorithms: im2col with one copy per kernel tap, im2col with one copy per output (outputs
fewer than taps), and shifted products added per tap (fewer output than input channels)."""

from __future__ import annotations

import numpy as np
import pytest

from fusegrad.ir.conv_ops import conv_impl
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _path(x, w, want):
    if 0 < want[0, 0].size < np.prod(w.shape[2:]):
        return "outputs"
    return "shifted" if w.shape[0] < x.shape[1] else "taps"


@pytest.mark.parametrize("path", ["taps", "outputs", "shifted"])
def test_conv_impl_matches_torch(path):
    rng = np.random.default_rng(len(path))
    fns = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d,
           3: torch.nn.functional.conv3d}
    seen = 0
    while seen < 40:
        nd, g = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        cg, og = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        st, rd = rng.integers(1, 3, nd).tolist(), rng.integers(1, 3, nd).tolist()
        pd = rng.integers(0, 3, nd).tolist()
        sp = rng.integers(3, 9, nd).tolist()
        ks = [int(rng.integers(1, s + 1)) for s in sp]
        x = rng.standard_normal((2, g * cg, *sp))
        w = rng.standard_normal((g * og, cg, *ks))
        try:
            want = fns[nd](torch.tensor(x), torch.tensor(w), stride=st, padding=pd,
                           dilation=rd, groups=g).numpy()
        except RuntimeError:  # the dilated kernel is larger than the padded input
            continue
        if _path(x, w, want) != path:
            continue
        got = conv_impl(x, w, stride=tuple(st), padding=tuple(v for p in pd for v in (p, p)),
                        lhs_dilation=(1,) * nd, rhs_dilation=tuple(rd), groups=g)
        assert_close(got, want, "exact64", f"{x.shape} {w.shape} {st} {pd} {rd} {g}")
        seen += 1


def test_weight_gradient_shape_float32():
    """The weight gradient's convolution of a 3x3 layer (the input's batch and channel axes
    exchanged, the cotangent as the kernel) in float32, against PyTorch's weight gradient."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 4, 10, 10)).astype(np.float32)
    g = rng.standard_normal((8, 6, 10, 10)).astype(np.float32)
    got = conv_impl(np.ascontiguousarray(x.transpose(1, 0, 2, 3)), g.transpose(1, 0, 2, 3),
                    stride=(1, 1), padding=(1, 1, 1, 1), lhs_dilation=(1, 1),
                    rhs_dilation=(1, 1), groups=1).transpose(1, 0, 2, 3)
    assert got.dtype == np.float32
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.zeros((6, 4, 3, 3), requires_grad=True)
    torch.nn.functional.conv2d(tx, tw, padding=1).backward(torch.tensor(g))
    assert_close(got, tw.grad.numpy(), "f32")
