"""Random draws are detected whatever names the traced code calls them by.

``from numpy.random import uniform``, ``from random import random`` and generators made
inside the function without a seed (``np.random.default_rng()``, ``RandomState()``,
``random.Random()``) escape the wrappers of the module attributes: the global
generators' states are compared around every trace and unseeded construction is seen
where the seed comes from the OS. Such functions warn ``SideEffectWarning`` and draw
afresh on every call (interpreted and compiled); seeded generators made inside the
function draw the same numbers every call and keep one trace.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.transforms import plan
from tests.semantics import draws_by_other_names as D

X = np.ones(3)


def _side_effect_warnings(record):
    return [w for w in record if issubclass(w.category, fg.SideEffectWarning)]


@pytest.mark.parametrize("fn", D.DRAWS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.compiled)],
                         ids=["interpreted", "compiled"])
def test_grad_of_a_draw_by_another_name_warns_and_draws_afresh(fn, compiled, monkeypatch):
    monkeypatch.setattr(plan, "_warned", set())  # each case warns afresh (once per function)
    g = fg.grad(fn)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = [g(X) for _ in range(3)]
    assert not np.array_equal(got[0], got[1]) and not np.array_equal(got[1], got[2])
    (w,) = _side_effect_warnings(record)
    first, last = fn.__code__.co_firstlineno, fn.__code__.co_firstlineno + len(
        inspect.getsourcelines(fn)[0])
    assert w.filename == D.__file__ and first <= w.lineno < last, (w.filename, w.lineno)
    assert "fg.random" in str(w.message)


@pytest.mark.parametrize("fn", D.DRAWS[:4], ids=lambda f: f.__name__)
def test_other_transforms_redraw_and_jit_warns(fn):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        t1 = fg.jvp(fn, (X,), (X,))[1]
        t2 = fg.jvp(fn, (X,), (X,))[1]
        jf = fg.jit(fn)
        jf(X)
    assert t1 != t2
    msgs = [str(w.message) for w in _side_effect_warnings(record)]
    assert any(m.startswith("fg.jvp(") for m in msgs) and any(m.startswith("fg.jit(")
                                                               for m in msgs), msgs


@pytest.mark.parametrize("fn", D.PURE, ids=lambda f: f.__name__)
def test_seeded_generators_made_inside_keep_one_trace(fn):
    vg = fg.value_and_grad(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.SideEffectWarning)
        np.testing.assert_array_equal(vg(X)[1], vg(X)[1])
    assert len(vg._plans) == 1


def test_reseeding_the_global_generator_inside_is_a_side_effect():
    def f(x):
        np.random.seed()  # from the OS: each call differs
        return x * D._random.random()

    with pytest.warns(fg.SideEffectWarning):
        fg.grad(f)(1.0)
