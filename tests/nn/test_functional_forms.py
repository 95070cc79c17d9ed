"""The functional forms the module tests reach only through their modules, against NumPy
references written here (PyTorch is not needed), with gradients by finite differences."""

from __future__ import annotations

import numpy as np

import fusegrad as fg
import fusegrad.nn.functional as F
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(11)


def _t(a):
    return fg.tensor(a)


def test_max_and_avg_pool1d():
    x = RNG.standard_normal((2, 3, 7))
    want_max = np.stack([x[..., i:i + 2].max(-1) for i in range(0, 6, 2)], -1)
    want_avg = np.stack([x[..., i:i + 3].mean(-1) for i in range(0, 5, 2)], -1)
    assert_close(F.max_pool1d(_t(x), 2).numpy(), want_max, "exact64")
    assert_close(F.avg_pool1d(_t(x), 3, stride=2).numpy(), want_avg, "exact64")
    check_grads(lambda a: F.avg_pool1d(a, 3, stride=2), [x], order=2)


def test_layer_norm_and_batch_norm_in_training():
    x = RNG.standard_normal((4, 5))
    w, b = RNG.standard_normal(5), RNG.standard_normal(5)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    assert_close(F.layer_norm(_t(x), (5,), _t(w), _t(b)).numpy(),
                 (x - mu) / np.sqrt(var + 1e-5) * w + b, "exact64")
    check_grads(lambda a: F.layer_norm(a, (5,)), [x], order=2)
    rm, rv = np.zeros(5), np.ones(5)
    out = F.batch_norm(_t(x), _t(rm), _t(rv), training=True, momentum=0.1, eps=1e-5)
    assert_close(out.numpy(), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), "exact64")


def test_conv3d_against_a_direct_sum():
    x = RNG.standard_normal((1, 2, 4, 4, 4))
    w = RNG.standard_normal((3, 2, 2, 2, 2))
    want = np.zeros((1, 3, 3, 3, 3))
    for o in range(3):
        for i, j, k in np.ndindex(3, 3, 3):
            want[0, o, i, j, k] = np.sum(x[0, :, i:i + 2, j:j + 2, k:k + 2] * w[o])
    assert_close(F.conv3d(_t(x), _t(w)).numpy(), want, "exact64")


def test_embedding_and_elu():
    weight = RNG.standard_normal((6, 3))
    idx = np.array([[0, 5], [2, 2]])
    assert_close(F.embedding(fg.tensor(idx), _t(weight)).numpy(), weight[idx], "exact64")
    x = np.linspace(-2, 2, 9)
    assert_close(F.elu(_t(x), alpha=0.7).numpy(), np.where(x > 0, x, 0.7 * np.expm1(x)),
                 "exact64")


def test_dropout_with_key_advances_its_key_and_scales():
    x = np.ones((1000,))
    key = fg.tensor(np.array([3, 4], dtype=np.int64))
    first = F.dropout_with_key(_t(x), key, p=0.25).numpy()
    assert set(np.unique(first)) <= {0.0, 1 / 0.75}
    assert 0.15 < np.mean(first == 0) < 0.35
    second = F.dropout_with_key(_t(x), key, p=0.25).numpy()
    assert not np.array_equal(first, second)  # the key moved on
    assert F.dropout_with_key(_t(x), key, p=0.25, training=False).numpy().tolist() == x.tolist()
