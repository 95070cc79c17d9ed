"""The compiled convolution helpers (``codegen.rt_conv``) against the op table's NumPy
``conv`` on random geometries: both algorithms (im2col and scatter), 1-3 spatial axes."""

from __future__ import annotations

import numpy as np
import pytest

from fusegrad.codegen import rt_conv
from fusegrad.ir.conv_ops import conv_impl
from tests.helpers import assert_close


def _geometries(nd: int, count: int, seed: int):
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        g = int(rng.integers(1, 3))
        cg, og = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        attrs = {"stride": tuple(rng.integers(1, 4, nd).tolist()),
                 "padding": tuple(rng.integers(-1, 4, 2 * nd).tolist()),
                 "lhs_dilation": tuple(rng.integers(1, 3, nd).tolist()),
                 "rhs_dilation": tuple(rng.integers(1, 3, nd).tolist()), "groups": g}
        x = rng.standard_normal((2, g * cg, *rng.integers(1, 7, nd).tolist()))
        w = rng.standard_normal((g * og, cg, *rng.integers(1, 4, nd).tolist()))
        try:
            want = conv_impl(x, w, **attrs)
        except ValueError:  # padding that crops more than the axis holds
            continue
        found.append((x, w, attrs, want))
    return found


#: What generated modules call for ``nd`` spatial axes.
ENTRIES = {1: rt_conv.conv1, 2: rt_conv.conv2, 3: rt_conv.conv5}


def _arrays(attrs):
    return [np.array(attrs[k], np.int64) for k in ("stride", "padding", "lhs_dilation",
                                                     "rhs_dilation")]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_rt_conv_matches_numpy_conv(nd):
    fn = ENTRIES[nd]
    for x, w, attrs, want in _geometries(nd, 60, nd):
        got = fn(x, w, *_arrays(attrs), attrs["groups"])
        assert got.shape == want.shape, attrs
        assert_close(got, want, "exact64", str(attrs))


def test_scatter_algorithm_matches_numpy_conv():
    """The scatter path forced on every geometry (``conv5`` picks it by cost)."""
    for x, w, attrs, want in _geometries(2, 80, 7):
        q = want.shape[2:]
        if min(q) == 0:
            continue
        st, pad, ld, rd = _arrays(attrs)
        one = np.ones(1, np.int64)
        got = rt_conv._scatter(x[:, :, None], w[:, :, None], np.concatenate((one, st)),
                               np.concatenate((np.zeros(2, np.int64), pad)),
                               np.concatenate((one, ld)), np.concatenate((one, rd)),
                               attrs["groups"], 1, q[0], q[1])
        assert_close(got[:, :, 0], want, "exact64", str(attrs))


def test_float32_stays_float32():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    one, z = np.ones(2, np.int64), np.zeros(4, np.int64)
    got = rt_conv.conv2(x, w, one, z, one, one, 1)
    assert got.dtype == np.float32
    want = conv_impl(x.astype(np.float64), w.astype(np.float64), stride=(1, 1),
                     padding=(0, 0, 0, 0), lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups=1)
    assert_close(got, want, "f32")


def _by_rows(x, w, attrs):
    """``conv`` of a 2-d geometry through ``_conv_by_rows`` (forced, whatever its cost)."""
    st, pad, ld, rd = _arrays(attrs)
    x5, w5 = x[:, :, None], w[:, :, None]
    t0, _ = rt_conv._table(1, 1, 1, 0, 0, 1, 1)
    t1, q1 = rt_conv._table(x.shape[2], w.shape[2], st[0], pad[0], pad[1], ld[0], rd[0])
    t2, q2 = rt_conv._table(x.shape[3], w.shape[3], st[1], pad[2], pad[3], ld[1], rd[1])
    o, cg = w.shape[:2]
    out = np.zeros((x.shape[0], o, q1 * q2), x.dtype)
    wr = np.ascontiguousarray(w5).reshape((o, -1))
    got = rt_conv._conv_by_rows(np.ascontiguousarray(x5), wr, t0, t1, t2, attrs["groups"],
                                cg, 1, w.shape[2], w.shape[3], 1, q1, q2, out)
    return got[:, :, 0]


def test_transposed_columns_match_numpy_conv():
    """The ``(outputs, taps)`` column layout forced on every geometry."""
    for x, w, attrs, want in _geometries(2, 80, 11):
        if min(want.shape[2:]) == 0:
            continue
        assert_close(_by_rows(x, w, attrs), want, "exact64", str(attrs))


@pytest.mark.parametrize("nd, dtype", [
    (1, np.float64), (2, np.float32), (3, np.float32),
    # conv1's float32 compile (about 10 s of Numba, re-optimising conv5) adds nothing the
    # float32 conv2 and conv5 and the float64 conv1 do not check
    pytest.param(1, np.float32, marks=pytest.mark.slow)])
def test_weight_gradient_geometry(nd, dtype):
    """A small output read through a kernel as large as the input (the convolution a
    weight gradient is), where ``conv5`` picks the transposed column layout; more
    images than one product holds, groups, padding and kernel dilation."""
    rng = np.random.default_rng(nd)
    fn = ENTRIES[nd]
    sp = {1: (40,), 2: (9, 10), 3: (6, 6, 9)}[nd]
    ks = tuple(s - 2 for s in sp)
    x = rng.standard_normal((70, 4, *sp)).astype(dtype)
    w = rng.standard_normal((6, 2, *ks)).astype(dtype)
    attrs = {"stride": (1,) * nd, "padding": (0, 1) * nd, "lhs_dilation": (1,) * nd,
             "rhs_dilation": (1,) * nd, "groups": 2}
    q = rt_conv._table(sp[-1], ks[-1], 1, 0, 1, 1, 1)[1]
    assert q == 4 and q < ks[-1] and q ** nd < np.prod(ks)  # the transposed layout's case
    got = fn(x, w, *_arrays(attrs), 2)
    want = conv_impl(x.astype(np.float64), w.astype(np.float64), **attrs)
    assert got.dtype == dtype and got.shape == want.shape
    assert_close(got, want, "f32" if dtype == np.float32 else "exact64")


@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_zero_bordered_paths_match_numpy_conv(layout):
    """Both zero-bordered im2col layouts forced on geometries without input dilation or
    cropping (strides, kernel dilation, groups)."""
    seen = 0
    for x, w, attrs, want in _geometries(2, 400, 13):
        if min(attrs["padding"]) < 0 or max(attrs["lhs_dilation"]) > 1 or min(want.shape) == 0:
            continue
        st, pad, _, rd = _arrays(attrs)
        one, z = np.ones(1, np.int64), np.zeros(2, np.int64)
        st, pad, rd = (np.concatenate((one, st)), np.concatenate((z, pad)),
                       np.concatenate((one, rd)))
        x5 = np.ascontiguousarray(x[:, :, None])
        o, cg = w.shape[:2]
        wr = np.ascontiguousarray(w).reshape((o, -1))
        q1, q2 = want.shape[2:]
        out = np.zeros((x.shape[0], o, q1 * q2), x.dtype)
        args = (x5, wr, st, pad, rd, attrs["groups"], cg, 1, w.shape[2], w.shape[3], 1, q1, q2)
        if layout == "rows":
            got = rt_conv._rows_padded(*args, out)
        else:
            got = rt_conv._conv_padded(*args, np.empty((wr.shape[1], q1 * q2)), out)
        assert_close(got[:, :, 0], want, "exact64", str(attrs))
        seen += 1
    assert seen >= 25
