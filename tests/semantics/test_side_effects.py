"""A traced function that draws random numbers or reads a clock is not replayed silently.

``grad``/``jvp``/``vmap`` trace it again per call (each call draws afresh, as
autograd and ``jax.grad`` do); ``jit`` keeps its trace. Both warn once per
function, naming the line of the draw and pointing to ``fg.random``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp

X = np.ones(3)


def _line(fn) -> int:
    return fn.__code__.co_firstlineno


def _one_warning(record, *needles):
    msgs = [str(w.message) for w in record if issubclass(w.category, fg.SideEffectWarning)]
    assert len(msgs) == 1, msgs
    for n in needles:
        assert n in msgs[0], (n, msgs[0])
    return record[0]


def test_grad_of_a_randomstate_draw_differs_per_call():
    rs = np.random.RandomState(0)
    f = lambda x: fnp.sum(x * rs.randn(3))  # noqa: E731
    g = fg.grad(f)
    with pytest.warns(fg.SideEffectWarning) as record:
        got = [g(X) for _ in range(3)]
    want = np.random.RandomState(0).randn(9).reshape(3, 3)
    np.testing.assert_array_equal(np.array(got), want)
    w = _one_warning(record, "RandomState 'rs'", f"{__file__}:{_line(f)}", "fg.random")
    assert w.filename == __file__ and w.lineno == _line(f)


@pytest.mark.compiled
def test_compiled_grad_of_a_python_random_draw_differs_per_call():
    r = random.Random(3)
    g = fg.grad(lambda x: x * r.gauss(0.0, 1.0))
    with pytest.warns(fg.SideEffectWarning, match="Random.gauss"):
        got = [float(g(2.0)) for _ in range(3)]
    ref = random.Random(3)
    assert got == [ref.gauss(0.0, 1.0) for _ in range(3)]


def test_jvp_and_vmap_of_global_numpy_draws_differ_per_call():
    np.random.seed(5)
    f = lambda x: fnp.sum(x * np.random.randn(3))  # noqa: E731
    with pytest.warns(fg.SideEffectWarning, match="np.random.randn"):
        t1 = fg.jvp(f, (X,), (X,))[1]
        t2 = fg.jvp(f, (X,), (X,))[1]
    np.random.seed(5)
    want = np.random.randn(2, 3).sum(axis=1)
    np.testing.assert_allclose([t1, t2], want, rtol=1e-12)
    v = fg.vmap(lambda x: x * np.random.rand())
    with pytest.warns(fg.SideEffectWarning, match="fg.vmap"):
        assert not np.array_equal(v(X), v(X))


def test_generator_attribute_and_clock_are_seen():
    class Model:
        def __init__(self):
            self.rng = np.random.default_rng(1)

        def loss(self, x):
            return fnp.sum(x * self.rng.normal(size=3))

    g = fg.grad(Model().loss)
    with pytest.warns(fg.SideEffectWarning, match="Generator 'rng'"):
        assert not np.array_equal(g(X), g(X))
    h = fg.grad(lambda x: x * (time.perf_counter() * 0 + 1.0))
    with pytest.warns(fg.SideEffectWarning, match="time.perf_counter"):
        assert float(h(2.0)) == 1.0


def test_warns_once_per_function():
    rs = np.random.RandomState(0)
    g = fg.grad(lambda x: fnp.sum(x * rs.randn(3)))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(4):
            g(X)
    assert len([w for w in record if issubclass(w.category, fg.SideEffectWarning)]) == 1


def test_jit_keeps_its_trace_and_warns():
    f = lambda x: x * random.random()  # noqa: E731
    jf = fg.jit(f)
    with pytest.warns(fg.SideEffectWarning, match=r"fg\.jit.*random\.random.*fg\.random") as rec:
        a, b = jf(1.0), jf(1.0)
    assert a == b
    assert rec[0].lineno == _line(f)


def test_jit_of_grad_warns_once_for_the_outer_transform():
    rs = np.random.RandomState(1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fg.jit(fg.grad(lambda x: fnp.sum(x * rs.randn(3))))(X)
    msgs = [str(w.message) for w in record if issubclass(w.category, fg.SideEffectWarning)]
    assert len(msgs) == 1 and msgs[0].startswith("fg.jit("), msgs


def test_pure_functions_keep_one_trace_and_do_not_warn():
    """A generator created and seeded inside the function draws the same numbers each call."""
    vg = fg.value_and_grad(lambda x: fnp.sum(x * np.random.default_rng(0).normal(size=3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.SideEffectWarning)
        np.testing.assert_array_equal(vg(X)[1], vg(X)[1])
    assert len(vg._plans) == 1


def test_another_thread_drawing_does_not_taint_a_trace():
    stop = threading.Event()

    def draw():
        while not stop.is_set():
            np.random.randn(2)
            random.random()

    t = threading.Thread(target=draw)
    t.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", fg.SideEffectWarning)
            for k in range(20):
                vg = fg.value_and_grad(lambda x, k=k: fnp.sum(fnp.sin(x) * k))
                vg(X)
                vg(X)
                assert len(vg._plans) == 1
    finally:
        stop.set()
        t.join()


def test_entry_points_are_restored_after_tracing():
    with pytest.warns(fg.SideEffectWarning):
        fg.grad(lambda x: x * random.random())(1.0)
    assert not hasattr(np.random.randn, "__fusegrad_wrapped__")
    assert "random" not in random.Random.__dict__
    assert not hasattr(time.time, "__fusegrad_wrapped__")


@pytest.mark.compiled
def test_compiled_jit_keeps_and_compiles_its_trace():
    jf = fg.jit(lambda x: x * random.random())
    with pytest.warns(fg.SideEffectWarning):
        a, b = jf(np.ones(2)), jf(np.ones(2))
    np.testing.assert_array_equal(a, b)
    (plan,) = jf._cache.values()
    assert plan.exe is not None  # compiled, not run by the interpreter


def test_library_clock_reads_do_not_count(caplog):
    """logging stamps its records with time.time(): not the user's clock read."""
    import logging

    def f(x):
        logging.getLogger("fusegrad.test").warning("tracing")
        return fnp.sum(x)

    vg = fg.value_and_grad(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.SideEffectWarning)
        vg(X)
        vg(X)
    assert len(vg._plans) == 1 and "tracing" in caplog.text


_FIRST_IMPORT = """
import sys, warnings
import numpy as np
import fusegrad as fg
assert "numpy.random" not in sys.modules
g = fg.grad(lambda x: fg.numpy.sum(x * {draw}))
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter("always")
    a, b = g(np.ones(3)), g(np.ones(3))
print([str(w.message) for w in record if issubclass(w.category, fg.SideEffectWarning)])
print(bool(np.array_equal(a, b)))
"""


@pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2,
                    reason="NumPy 1 imports numpy.random with numpy")
@pytest.mark.parametrize(("draw", "seen"), [("np.random.rand(3)", "np.random.rand at"),
                                            ("np.random.default_rng(0).normal(size=3)", None)])
def test_the_draw_that_imports_numpy_random_is_seen(draw, seen):
    """fusegrad does not import ``numpy.random`` (NumPy loads it on first use): the traced
    code's first ``np.random`` call imports it, and is seen as a draw, with its line; a
    seeded generator made there (the import seeds the global one from the OS) is not one."""
    env = {k: v for k, v in os.environ.items() if k != "FUSEGRAD_DISABLE_JIT"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_FIRST_IMPORT).format(draw=draw)],
                         capture_output=True, text=True, env={**env, "FUSEGRAD_DISABLE_JIT": "1"},
                         timeout=600)
    assert out.returncode == 0, out.stderr
    messages, equal = out.stdout.splitlines()[-2:]
    if seen is None:
        assert messages == "[]" and equal == "True", out.stdout
    else:
        assert seen in messages and "<string>:6" in messages and equal == "False", out.stdout
