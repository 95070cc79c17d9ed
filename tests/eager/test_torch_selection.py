"""``torch.tril``/``triu``, ``topk``, ``multinomial``, ``sort``/``argsort`` and ``out=``.

Values against NumPy, gradients against finite differences or their closed
form, a few under ``fg.jit``; against PyTorch when it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from tests.helpers import assert_close, numeric_grads

pytestmark = pytest.mark.usefixtures("default_float64")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 4, 5))


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_triangles_values_and_gradient(fn, k):
    x = fg.tensor(X, requires_grad=True)
    y = getattr(fg, fn)(x, diagonal=k)
    assert_close(y.detach().numpy(), getattr(np, fn)(X, k), "exact64")
    assert y.grad_fn.name() == ("TrilBackward0" if fn == "tril" else "TriuBackward0")
    g = RNG.standard_normal(X.shape)
    y.backward(fg.tensor(g))
    assert_close(x.grad.numpy(), getattr(np, fn)(g, k), "exact64")
    assert_close(getattr(x, fn)(k).detach().numpy(), getattr(np, fn)(X, k), "exact64")


def test_triangles_in_place_and_out():
    a = fg.ones(3, 3)
    assert a.tril_(-1) is a
    assert_close(a.numpy(), np.tril(np.ones((3, 3)), -1), "exact64")
    b = fg.ones(2, 3, 3).triu_(1)
    assert_close(b.numpy(), np.triu(np.ones((2, 3, 3)), 1), "exact64")
    mask = fg.tril(fg.ones(3, 3, dtype=fg.bool))
    assert mask.dtype == fg.bool
    assert (mask.numpy() == np.tril(np.ones((3, 3), bool))).all()
    assert fg.triu(fg.ones(2, 3, dtype=fg.int64), 1).numpy().tolist() == [[0, 1, 1], [0, 0, 1]]
    out = fg.empty(3, 3)
    assert fg.triu(fg.ones(3, 3), out=out) is out
    assert_close(out.numpy(), np.triu(np.ones((3, 3))), "exact64")
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        fg.tril(fg.ones(3))
    leaf = fg.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.tril_()


def test_causal_mask_line_under_jit():
    """The line GPT programs build their mask with, inside a jitted forward."""
    T = 4
    mask = fg.tril(fg.ones(T, T)).view(1, 1, T, T)

    def attend(x):
        att = x.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
        return fg.nn.functional.softmax(att, dim=-1).triu(0)

    x = fg.tensor(RNG.standard_normal((1, 1, T, T)))
    with fg.no_grad():
        assert_close(fg.jit(attend)(x).numpy(), attend(x).numpy(), "exact64")
    assert_close(fg.jit(lambda a: fg.tril(a, -1))(x).numpy(), np.tril(x.numpy(), -1),
                 "exact64")


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_topk_values_indices_gradient(largest, dim):
    x = fg.tensor(X, requires_grad=True)
    v, i = fg.topk(x, 2, dim=dim, largest=largest)
    order = np.argsort(-X if largest else X, axis=dim, kind="stable")
    idx = np.take(order, [0, 1], axis=dim)
    assert_close(i.numpy(), idx, "exact64")
    assert_close(v.detach().numpy(), np.take_along_axis(X, idx, dim), "exact64")
    assert v.grad_fn.name() == "TopkBackward0"
    g = RNG.standard_normal(v.shape)
    v.backward(fg.tensor(g))
    expected = np.zeros_like(X)
    np.put_along_axis(expected, idx, g, dim)
    assert_close(x.grad.numpy(), expected, "exact64")


def test_topk_method_fd_gradient_and_errors():
    x0 = RNG.standard_normal((3, 6))

    def f(a):
        return float((fg.tensor(a).topk(3, sorted=True).values ** 2).sum())

    x = fg.tensor(x0, requires_grad=True)
    (x.topk(3).values ** 2).sum().backward()
    assert_close(x.grad.numpy(), numeric_grads(f, [x0])[0], "fd")
    with pytest.raises(RuntimeError, match="k out of range"):
        fg.topk(fg.ones(3), 4)


def test_topk_under_jit_and_generation_idiom():
    logits = fg.tensor(RNG.standard_normal((2, 7)))
    v, i = fg.jit(lambda a: fg.topk(a, 3))(logits)
    ev, ei = fg.topk(logits, 3)
    assert_close(v.numpy(), ev.numpy(), "exact64")
    assert_close(i.numpy(), ei.numpy(), "exact64")
    # the sampling idiom: keep the top-k logits, -inf elsewhere
    cut = logits.clone()
    cut[cut < v[:, [-1]]] = -float("Inf")
    assert (np.isfinite(cut.numpy()).sum(1) == 3).all()


def test_multinomial_with_replacement_distribution_and_seed():
    p = fg.tensor([0.1, 0.0, 0.6, 0.3])
    fg.manual_seed(0)
    s = fg.multinomial(p, 40000, replacement=True)
    assert s.dtype == fg.int64 and tuple(s.shape) == (40000,)
    freq = np.bincount(s.numpy(), minlength=4) / 40000
    assert freq[1] == 0
    assert np.abs(freq - [0.1, 0.0, 0.6, 0.3]).max() < 0.01  # ~5 standard deviations
    fg.manual_seed(3)
    a = p.multinomial(5, True)
    fg.manual_seed(3)
    assert (a.numpy() == fg.multinomial(p, 5, replacement=True).numpy()).all()


def test_multinomial_without_replacement():
    fg.manual_seed(1)
    w = fg.tensor([[1.0, 0.0, 3.0, 0.5], [2.0, 2.0, 0.0, 1.0]])
    draws = np.stack([fg.multinomial(w, 3).numpy() for _ in range(3000)])
    for row in draws.reshape(-1, 3):
        assert len(set(row.tolist())) == 3
    assert not (draws[:, 0] == 1).any() and not (draws[:, 1] == 2).any()
    first = np.bincount(draws[:, 0, 0], minlength=4) / 3000
    assert np.abs(first - np.array([1, 0, 3, 0.5]) / 4.5).max() < 0.04
    # the second draw of row 0, after renormalising: P(2nd = 0) = sum_j p_j * p_0 / (1 - p_j)
    p = np.array([1, 0, 3, 0.5]) / 4.5
    second0 = sum(p[j] * p[0] / (1 - p[j]) for j in (2, 3))
    assert abs((draws[:, 0, 1] == 0).mean() - second0) < 0.04


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match="without replacement"):
        fg.multinomial(fg.tensor([0.5, 0.5]), 3)
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        fg.multinomial(fg.tensor([0.5, 0.0, 0.0]), 2)
    with pytest.raises(RuntimeError, match="element < 0"):
        fg.multinomial(fg.tensor([0.5, -1.0]), 1)
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        fg.multinomial(fg.ones(2, 2, 2), 1)


def test_multinomial_under_jit_draws_anew_each_call():
    p = fg.tensor([0.1, 0.0, 0.6, 0.3])
    draw = fg.jit(lambda q: fg.multinomial(q, 50, replacement=True))
    calls = [draw(p).numpy() for _ in range(40)]
    assert len({c.tobytes() for c in calls}) > 30
    allv = np.concatenate(calls)
    assert not (allv == 1).any()
    assert np.abs(np.bincount(allv, minlength=4) / allv.size - [0.1, 0, 0.6, 0.3]).max() < 0.04
    fg.manual_seed(5)
    a = draw(p)
    fg.manual_seed(5)
    assert (draw(p).numpy() == a.numpy()).all()
    nr = fg.jit(lambda q: fg.multinomial(q, 3))(p).numpy()
    assert sorted(nr.tolist()) == [0, 2, 3]


def test_sort_argsort_out_and_randint_high_size():
    x = fg.tensor([[3.0, 1.0, 2.0]])
    vals, idx = fg.empty(1, 3), fg.empty(1, 3, dtype=fg.int64)
    res = fg.sort(x, descending=True, out=(vals, idx))
    assert res.values is vals and res.indices is idx
    assert vals.tolist() == [[3.0, 2.0, 1.0]] and idx.tolist() == [[0, 2, 1]]
    assert fg.argsort(x, dim=1, descending=False).tolist() == [[1, 2, 0]]
    r = fg.randint(5, (100,))
    assert tuple(r.shape) == (100,) and r.min().item() >= 0 and r.max().item() < 5
    assert tuple(fg.randint(2, 5, (3, 2)).shape) == (3, 2)


def test_out_argument_rules():
    o = fg.empty(2)
    assert fg.sum(fg.ones(2, 3), dim=1, out=o) is o and o.tolist() == [3.0, 3.0]
    with pytest.warns(UserWarning, match="resized"):
        fg.exp(fg.zeros(3), out=o)
    assert o.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        fg.exp(fg.zeros(2, requires_grad=True), out=fg.empty(2))
    c = fg.empty(4)
    assert fg.cat([fg.ones(2), fg.zeros(2)], out=c) is c and c.tolist() == [1, 1, 0, 0]


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, 5))
    for k in (-1, 0, 2):
        assert_close(fg.tril(fg.tensor(x), k).numpy(), torch.tril(torch.tensor(x), k).numpy(),
                     "exact64")
        assert_close(fg.tensor(x).triu(k).numpy(), torch.tensor(x).triu(k).numpy(), "exact64")
    tv, ti = torch.topk(torch.tensor(x), 2, dim=0, largest=False)
    fv, fi = fg.topk(fg.tensor(x), 2, dim=0, largest=False)
    assert_close(fv.numpy(), tv.numpy(), "exact64")
    assert_close(fi.numpy(), ti.numpy(), "exact64")
    t = torch.tensor(x, requires_grad=True)
    torch.topk(t, 3).values.pow(2).sum().backward()
    f = fg.tensor(x, requires_grad=True)
    fg.topk(f, 3).values.pow(2).sum().backward()
    assert_close(f.grad.numpy(), t.grad.numpy(), "exact64")
    assert torch.multinomial(torch.tensor([0.2, 0.8]), 2).shape == \
        tuple(fg.multinomial(fg.tensor([0.2, 0.8]), 2).shape)


@pytest.mark.compiled
def test_compiled_tril_topk_multinomial():
    """One compiled function using the three (compiled code, not the interpreter)."""
    x = fg.tensor(RNG.standard_normal((3, 5)))

    def f(a):
        low = fg.tril(a, 1)
        v, i = fg.topk(low, 2)
        return low, v, i, fg.multinomial(fg.nn.functional.softmax(v, dim=-1), 4, True)

    low, v, i, s = fg.jit(f)(x)
    el, ev, ei, _ = f(x)
    assert_close(low.numpy(), el.numpy(), "exact64")
    assert_close(v.numpy(), ev.numpy(), "exact64")
    assert_close(i.numpy(), ei.numpy(), "exact64")
    assert tuple(s.shape) == (3, 4) and ((s.numpy() == 0) | (s.numpy() == 1)).all()
