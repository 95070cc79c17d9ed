"""Python control flow on traced values under fg.grad & co.: value-guarded traces.

A function that branches on values (``if x.sum() > 0``), loops on them (``while err >
tol``) or converts them (``float(x)``, ``x.item()``, ``np.asarray(x)``, ``int(x)``, where
no gradient is lost by it) is traced on the arguments' values; the compiled code of
each path is reused while its guards hold. Checked against finite differences,
``jax.grad`` of the same Python function, and compile/trace counts.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp

pytestmark = pytest.mark.compiled  # the compiled path (tests default to the interpreter)

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

POS = np.array([0.3, 1.2, -0.4])
NEG = np.array([-0.7, 0.2, -0.9])


def branchy(x, m=fnp):
    if m.sum(x) > 0:
        return m.sum(m.sin(x) * x)
    return m.sum(m.exp(x) * x * x)


def newton_sqrt(c, m=fnp):
    """sqrt(c) by Newton's method; the loop runs until the residual is small."""
    y = c
    while m.abs(y * y - c) > 1e-13:
        y = 0.5 * (y + c / y)
    return y


def check_grads(f, x, h=1e-6, rtol=1e-6):
    """fg.grad (compiled) against central differences of ``f`` run on NumPy values, and
    the second derivative (fg.hvp and fg.grad(fg.grad) for scalars) against central
    differences of fg.grad, along a random direction (the path must not change within
    ``h``)."""
    x = np.asarray(x, float)
    u = np.random.default_rng(0).standard_normal(x.shape)
    fd = (float(f(x + h * u)) - float(f(x - h * u))) / (2 * h)
    g = np.asarray(fg.grad(f)(x))
    np.testing.assert_allclose(np.sum(g * u), fd, rtol=rtol, atol=1e-8)
    fd2 = (np.asarray(fg.grad(f)(x + h * u)) - np.asarray(fg.grad(f)(x - h * u))) / (2 * h)
    np.testing.assert_allclose(fg.hvp(f)(x, u), fd2, rtol=1e-5, atol=1e-6)
    if x.shape == ():
        np.testing.assert_allclose(fg.grad(fg.grad(f))(x) * u, fd2, rtol=1e-5, atol=1e-6)


def _stats(name):
    s = fg.compile_stats()
    return s["traces"].get(name, 0), s["compiles"].get(f"{name}_grad", 0)


# --- values and gradients -----------------------------------------------------------------


@pytest.mark.parametrize("x", [POS, NEG], ids=["true-branch", "false-branch"])
def test_if_on_a_value_both_branches_match_jax_and_finite_differences(x):
    got = fg.grad(branchy)(x)
    want = jax.grad(lambda v: branchy(v, jnp))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    check_grads(branchy, x)
    value, g = fg.value_and_grad(branchy)(x)
    np.testing.assert_allclose(value, branchy(x, np), rtol=1e-12)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_while_newton_iteration():
    for c in (2.0, 9.0, 0.5):
        g = fg.grad(newton_sqrt)(c)
        np.testing.assert_allclose(g, 0.5 / np.sqrt(c), rtol=1e-9)
        np.testing.assert_allclose(g, jax.grad(lambda v: newton_sqrt(v, jnp))(c), rtol=1e-12)
    check_grads(newton_sqrt, 2.0)


def test_float_of_a_differentiated_value_raises_and_of_a_stopped_one_is_a_constant():
    with pytest.raises(fg.TracerConversionError, match=r"float\(\).*fg\.stop_gradient"):
        fg.grad(lambda x: x * float(x) + fnp.sin(x))(0.7)

    def f(x):
        return x * float(fg.stop_gradient(x)) + fnp.sin(x)

    # the float is a constant: d/dx = float(x) + cos(x), not 2x + cos(x)
    for x in (0.7, -1.3):
        want = x + np.cos(x)
        np.testing.assert_allclose(fg.grad(f)(x), want, rtol=1e-14)
        jax_want = jax.grad(lambda v: v * jax.lax.stop_gradient(v) + jnp.sin(v))(x)
        np.testing.assert_allclose(fg.grad(f)(x), jax_want, rtol=1e-14)


def test_item_and_int():
    def f(x):
        k = int(fnp.sum(x > 0))  # a Python int, used as a shape and an index
        scale = fg.stop_gradient(x[0]).item()
        return fnp.sum(x[:k] ** 2) * scale + fnp.sum(fnp.zeros(k) + x[k - 1])

    x = np.array([0.5, 2.0, -1.0])
    k = 2
    want = 2 * x * x[0] * (np.arange(3) < k)  # the stopped .item() factor x[0] is a constant
    want[k - 1] += k
    np.testing.assert_allclose(fg.grad(f)(x), want, rtol=1e-14)
    x2 = np.array([0.5, 2.0, 1.0])  # three positives: another path
    want2 = 2 * x2 * x2[0]
    want2[2] += 3
    np.testing.assert_allclose(fg.grad(f)(x2), want2, rtol=1e-14)


def test_asarray_of_a_stopped_value_is_a_read_only_constant():
    seen = []

    def f(x):
        a = np.asarray(fg.stop_gradient(x))
        seen.append(a)
        return fnp.sum(x * a) + fnp.sum(fnp.sin(x))

    x = np.array([0.5, -2.0, 3.0])
    np.testing.assert_allclose(fg.grad(f)(x), x + np.cos(x), rtol=1e-14)
    a = seen[0]
    assert type(a) is np.ndarray and not a.flags.writeable and np.array_equal(a, x)
    with pytest.raises(ValueError):
        a[0] = 1.0


def test_boolean_mask_on_values():
    f = lambda x: fnp.sum(x[x > 0] ** 3)  # noqa: E731
    for x in (POS, NEG):
        np.testing.assert_allclose(fg.grad(f)(x), 3 * x ** 2 * (x > 0), rtol=1e-14)


def test_second_order_with_a_branch():
    def f(x):
        return x ** 3 if x > 0 else fnp.sin(x)

    gg = fg.grad(fg.grad(f))
    for x in (1.5, -0.5, 2.0, -1.0):
        want = 6 * x if x > 0 else -np.sin(x)
        np.testing.assert_allclose(gg(x), want, rtol=1e-13)
        np.testing.assert_allclose(gg(x), jax.grad(jax.grad(
            lambda v: v ** 3 if v > 0 else jnp.sin(v)))(x), rtol=1e-13)
    check_grads(f, -0.5)
    check_grads(f, 1.5)


def test_inner_branch_on_an_outer_value():
    """grad(grad): the inner trace converts a value of the outer one; the outer trace's
    compiled code is reused only on the same side of the branch."""

    def outer(x):
        return fg.grad(lambda y: y * y * x if x * y > 1 else y * x)(x)

    g = fg.grad(outer)
    for x in (1.5, -2.0, 0.5, -0.9, 1.2, 0.7):
        # x * x > 1: d/dx (2 x * x) = 4 x; else: d/dx x = 1
        np.testing.assert_allclose(g(x), 4 * x if x * x > 1 else 1.0, rtol=1e-13)


def test_other_transforms():
    def f(x):
        if fnp.sum(x) > 0:
            return fnp.sin(x) * x
        return x ** 3

    def s(x):
        return fnp.sum(f(x))

    def jf(v):
        return jnp.sin(v) * v if jnp.sum(v) > 0 else v ** 3

    def js(v):
        return jnp.sum(jf(v))

    for x in (POS, NEG):
        v = np.array([1.0, -0.5, 2.0])
        np.testing.assert_allclose(fg.jvp(f, (x,), (v,))[1], jax.jvp(jf, (x,), (v,))[1],
                                   rtol=1e-12)
        _, vjp_fn = fg.vjp(f, x)
        np.testing.assert_allclose(vjp_fn(v)[0], jax.vjp(jf, x)[1](v)[0], rtol=1e-12)
        np.testing.assert_allclose(fg.jacobian(f)(x), jax.jacrev(jf)(x), rtol=1e-12)
        np.testing.assert_allclose(fg.jacfwd(f)(x), jax.jacfwd(jf)(x), rtol=1e-12)
        np.testing.assert_allclose(fg.hessian(s)(x), jax.hessian(js)(x), rtol=1e-12)
        np.testing.assert_allclose(fg.hvp(s)(x, v), jax.hessian(js)(x) @ v, rtol=1e-12)
        np.testing.assert_allclose(fg.elementwise_grad(f)(x), jax.grad(js)(x), rtol=1e-12)


def test_a_value_of_a_non_differentiated_argument():
    def f(x, n):
        y = x
        for _ in range(int(n)):
            y = fnp.sin(y)
        return y

    for n in (1, 3, 2, 3):
        np.testing.assert_allclose(fg.grad(f)(0.4, np.int64(n)),
                                   jax.grad(_nsin)(0.4, n), rtol=1e-14)


def _nsin(v, n):
    for _ in range(n):
        v = jnp.sin(v)
    return v


# --- reuse of compiled code ------------------------------------------------------------------


def test_compiled_paths_are_reused_while_guards_hold():
    def alternating(x):
        if fnp.sum(x) > 0:
            return fnp.sum(x * x)
        return fnp.sum(fnp.sin(x))

    g = fg.grad(alternating)
    before = _stats("alternating")
    for i in range(20):
        x = POS * (i + 1) if i % 2 == 0 else NEG * (i + 1)
        want = 2 * x if x.sum() > 0 else np.cos(x)
        np.testing.assert_allclose(g(x), want, rtol=1e-14)
    traces, compiles = (a - b for a, b in zip(_stats("alternating"), before))
    assert traces == 2 and compiles == 2


def test_retrace_warning_on_a_value_that_changes_every_call():
    def drifting(x):
        return x * float(fg.stop_gradient(x))

    g = fg.grad(drifting)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            np.testing.assert_allclose(g(1.0 + i), 1.0 + i, rtol=1e-14)
        compiles = _stats("drifting")[1]
        for i in range(5):
            np.testing.assert_allclose(g(30.0 + i), 30.0 + i, rtol=1e-14)
    retrace = [w for w in caught if issubclass(w.category, fg.RetraceWarning)]
    assert len(retrace) == 1
    msg = str(retrace[0].message)
    assert "drifting" in msg and "float()" in msg
    line = drifting.__code__.co_firstlineno + 1
    assert f"{__file__}:{line}" in msg and retrace[0].lineno == line
    assert _stats("drifting")[1] == compiles  # interpreted from then on: no compiles


def test_the_cache_of_paths_is_bounded():
    def powers(x):
        k = int(fnp.floor(fnp.sum(x)))
        return fnp.sum(x ** k)

    vg = fg.value_and_grad(powers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.RetraceWarning)
        for k in range(1, 13):
            x = np.array([k / 2 + 0.1, k / 2])
            _, g = vg(x)
            np.testing.assert_allclose(g, k * x ** (k - 1), rtol=1e-13)
    (paths,) = vg._plans.values()
    assert 0 < len(paths) <= 8


def test_threads_take_different_branches_concurrently():
    def f(x):
        if fnp.sum(x) > 0:
            return fnp.sum(x * x * x)
        return fnp.sum(fnp.cos(x))

    g = fg.grad(f)
    errors = []

    def work(sign):
        for i in range(30):
            x = sign * np.array([0.5, 1.0, 0.25]) * (1 + i / 10)
            want = 3 * x * x if sign > 0 else -np.sin(x)
            try:
                np.testing.assert_allclose(g(x), want, rtol=1e-14)
            except AssertionError as e:
                errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, -1, 1, -1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# --- where values are not available -----------------------------------------------------------


def test_jit_keeps_the_clear_error():
    with pytest.raises(fg.TracerError) as info:
        fg.jit(branchy)(POS)
    msg = str(info.value)
    assert "fg.jit traces the function once" in msg and "without fg.jit" in msg
    assert "fg.cond" in msg and f"{__file__}:" in msg
    with pytest.raises(fg.TracerError, match=r"without fg\.jit"):
        fg.jit(fg.grad(branchy))(POS)
    with pytest.raises(fg.TracerError, match=r"without fg\.jit"):
        fg.grad(fg.jit(branchy))(POS)


def test_vmap_keeps_a_clear_error():
    with pytest.raises(fg.TracerError) as info:
        fg.vmap(fg.grad(branchy))(np.stack([POS, NEG]))
    assert "per-example" in str(info.value) and "fg.cond" in str(info.value)
    with pytest.raises(fg.TracerError, match="per-example"):
        fg.vmap(lambda x: x if x > 0 else -x)(POS)


def test_conversions_inside_control_flow_bodies_keep_the_error():
    def f(x):
        return fg.while_loop(lambda y: float(fnp.sum(y)) < 10.0, lambda y: y * 2.0, x)

    with pytest.raises(fg.TracerError, match="traced once for all iterations"):
        fg.grad(lambda x: fnp.sum(f(x)))(POS)


def test_nested_traces_are_reused_only_on_their_inner_path():
    """hessian = jacfwd(grad(f)): the inner grad's guards become guards of the outer trace,
    so one hessian object alternating between branches stays right."""

    def s(x):
        if fnp.sum(x) > 0:
            return fnp.sum(fnp.sin(x) * x * x)
        return fnp.sum(x ** 4)

    def js(v):
        return jnp.sum(jnp.sin(v) * v * v) if jnp.sum(v) > 0 else jnp.sum(v ** 4)

    hess, hv = fg.hessian(s), fg.hvp(s)
    u = np.array([0.3, -1.0, 2.0])
    for i in range(6):
        x = (POS if i % 2 == 0 else NEG) * (1 + i / 10)
        np.testing.assert_allclose(hess(x), jax.hessian(js)(x), rtol=1e-12)
        np.testing.assert_allclose(hv(x, u), jax.hessian(js)(x) @ u, rtol=1e-12)


def test_the_interpreter_path(monkeypatch):
    from fusegrad import config

    monkeypatch.setattr(config, "DISABLE_JIT", True)
    g = fg.grad(branchy)
    for x in (POS, NEG, POS * 2, NEG * 3):
        np.testing.assert_allclose(g(x), jax.grad(lambda v: branchy(v, jnp))(x), rtol=1e-12)


def test_a_leaked_tracer_has_no_value():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * x

    fg.grad(f)(1.0)
    with pytest.raises(fg.TracerError, match="leaked tracer"):
        bool(leaked[0])
    with pytest.raises(fg.TracerError, match="leaked tracer"):
        float(leaked[0])
