"""What the fuzzer checks on one program, one check per transform.

Every check raises ``AssertionError`` (or whatever the transform raised) on a
mismatch. References: the NumPy reference implementation run directly on arrays
(no tracing) for values, central finite differences of it for derivatives
(float64 programs only), and per-example calls for ``vmap``. Interpreter checks
run with ``config.DISABLE_JIT`` set; ``compiled`` compares generated code to the
interpreter.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

import fusegrad as fg
from fusegrad import config
from tests.helpers import FD_STEP, assert_close, numeric_grads

from .gen import Program, valid


@contextmanager
def executor(compiled: bool):
    old = config.DISABLE_JIT
    config.DISABLE_JIT = not compiled
    try:
        yield
    finally:
        config.DISABLE_JIT = old


def _exact(p: Program) -> str:
    return "f32" if p.dtype == "f32" else "exact64"


def _argnums(p: Program) -> tuple[int, ...]:
    return tuple(range(p.n_inputs))


def _rng(p: Program, salt: int) -> np.random.Generator:
    return np.random.default_rng([p.seed, salt])


def _like(rng, x) -> np.ndarray:
    return rng.standard_normal(np.shape(x)).astype(np.asarray(x).dtype)


def _step(xs) -> float:
    return FD_STEP * max(1.0, *(float(np.abs(x).max(initial=0.0)) for x in xs))


def _directional(fun, xs, vs):
    """d/dt fun(xs + t vs) at 0 by the 4-point central stencil (vs scaled to max|v| <= 1)."""
    size = max(1.0, *(float(np.abs(v).max(initial=0.0)) for v in vs))
    h = _step(xs) / size

    def at(t):
        return fun(*(x + t * v for x, v in zip(xs, vs)))

    p1, m1, p2, m2 = at(h), at(-h), at(2 * h), at(-2 * h)
    if isinstance(p1, tuple):
        return tuple((8 * (a - b) - (c - d)) / (12 * h) for a, b, c, d in zip(p1, m1, p2, m2))
    return (8 * (p1 - m1) - (p2 - m2)) / (12 * h)


def _close_all(actual, expected, kind, what):
    for k, (a, e) in enumerate(zip(actual, expected)):
        assert np.asarray(a).dtype == np.asarray(e).dtype or kind == "fd", (
            f"{what}, input {k}: dtype {np.asarray(a).dtype} != {np.asarray(e).dtype}")
        assert_close(a, e, kind, f"{what}, input {k}")


def _close_to_fd(actual, f, xs, what: str) -> None:
    """``actual`` == finite-difference gradients of ``f`` at ``xs``, which are their own
    check: a stencil that crosses a step of ``floor`` (the guards keep the operands a
    margin from the steps, but a steep producer can still carry the stencil across one)
    disagrees with the stencil of a quarter of the step; there the quarter-step
    estimate is the oracle. It is computed only when the full step's disagrees with
    ``actual`` (the full step agreeing is a pass either way)."""
    coarse = numeric_grads(f, xs)
    try:
        _close_all(actual, coarse, "fd", what)
        return
    except AssertionError:
        pass
    fine = numeric_grads(f, xs, step=FD_STEP / 4)
    want = []
    for c, q in zip(coarse, fine):
        bad = ~np.isclose(c, q, rtol=1e-5, atol=1e-7 * max(1.0, float(np.abs(q).max(initial=0))))
        want.append(np.where(bad, q, c))
    _close_all(actual, want, "fd", what)


# --- the checks -----------------------------------------------------------------------


def check_forward(p: Program) -> None:
    """jit (interpreter) == NumPy reference."""
    f, _ = p.functions()
    xs = p.inputs()
    want = np.asarray(f(*xs))
    got = fg.jit(f)(*xs)
    got_dt = np.asarray(got).dtype
    assert got_dt == want.dtype, f"jit: dtype {got_dt} != {want.dtype}"
    assert_close(got, want, _exact(p), "jit forward")


def check_grad(p: Program) -> None:
    """grad == finite differences."""
    f, _ = p.functions()
    xs = p.inputs()
    grads = fg.grad(f, argnums=_argnums(p))(*xs)
    _close_to_fd(grads, p.reference()[0], xs, "grad")


def check_eager(p: Program) -> None:
    """Eager Tensor value and .backward() gradients == the functional ones."""
    f, _ = p.functions()
    xs = p.inputs()
    ts = [fg.tensor(x, requires_grad=True) for x in xs]
    out = f(*ts)
    assert isinstance(out, fg.Tensor), f"eager result is {type(out).__name__}, not a Tensor"
    want_v, want_g = fg.value_and_grad(f, argnums=_argnums(p))(*xs)
    assert_close(out.detach().numpy(), want_v, _exact(p), "eager forward")
    if out.requires_grad:
        out.backward()
    got = [t.grad.numpy() if t.grad is not None else np.zeros_like(x) for t, x in zip(ts, xs)]
    _close_all(got, want_g, _exact(p), "eager backward")


def check_vjp(p: Program) -> None:
    """vjp of the unreduced output with a random cotangent == finite differences."""
    _, fv = p.functions()
    xs = p.inputs()
    out, vjp_fn = fg.vjp(fv, *xs)
    assert_close(out, np.asarray(fv(*xs)), "exact64", "vjp primal output")
    ct = _like(_rng(p, 1), out)
    got = vjp_fn(ct)
    fv_ref = p.reference()[1]
    _close_to_fd(got, lambda *a: np.sum(np.asarray(fv_ref(*a)) * ct), xs, "vjp")


def check_jvp(p: Program) -> None:
    """jvp == directional finite difference."""
    f, _ = p.functions()
    xs = p.inputs()
    rng = _rng(p, 2)
    ts = [_like(rng, x) for x in xs]
    val, tan = fg.jvp(f, tuple(xs), tuple(ts))
    assert_close(val, np.asarray(f(*xs)), "exact64", "jvp primal output")
    f_ref = p.reference()[0]
    assert_close(tan, _directional(lambda *a: np.asarray(f_ref(*a)), xs, ts), "fd", "jvp tangent")


def _directions(p: Program):
    xs = p.inputs()
    rng = _rng(p, 3)
    return xs, [_like(rng, x) for x in xs]


#: While ``failures`` runs the checks of one program: the values its checks share.
_shared: dict | None = None


def _hvp_reference(p: Program) -> tuple[np.ndarray, ...]:
    """The Hessian-vector product along ``_directions(p)`` by differences of the reference's
    gradient: the oracle of both second-order checks, computed once per ``failures`` call
    (each check computes its own product from scratch)."""
    if _shared is not None and p in _shared:
        return _shared[p]
    xs, vs = _directions(p)
    grad_ref = fg.grad(p.reference()[0], argnums=_argnums(p))
    want = _directional(lambda *a: tuple(np.asarray(g) for g in grad_ref(*a)), xs, vs)
    want = tuple(np.array(w) for w in want)
    for w in want:
        w.setflags(write=False)
    if _shared is not None:
        _shared[p] = want
    return want


def _grad_along(p: Program):
    f, _ = p.functions()
    xs, vs = _directions(p)
    grad_f = fg.grad(f, argnums=_argnums(p))
    return grad_f, xs, vs, _hvp_reference(p)


def check_grad_grad(p: Program) -> None:
    """grad(sum(grad(f) * v)), a Hessian-vector product, == differences of grad(f)."""
    grad_f, xs, vs, want = _grad_along(p)

    def grad_dot_v(*a):
        total = 0.0
        for g, v in zip(grad_f(*a), vs):
            total = fg.ir.ops.add(total, fg.ir.ops.reduce_sum(
                fg.ir.ops.mul(g, v), axes=tuple(range(np.ndim(v)))))
        return total

    got = fg.grad(grad_dot_v, argnums=_argnums(p))(*xs)
    _close_all(got, want, "fd", "grad(grad)")


def check_jvp_grad(p: Program) -> None:
    """jvp(grad(f)) along v (forward over reverse) == differences of grad(f)."""
    grad_f, xs, vs, want = _grad_along(p)
    _, tan = fg.jvp(grad_f, tuple(xs), tuple(vs))
    _close_all(tan, want, "fd", "jvp(grad)")


def _batch(p: Program):
    """(in_axes, batched inputs, per-example input lists): two examples, the second taken
    from another seed's inputs (kept only if the program is valid on them)."""
    rng = _rng(p, 4)
    xs = p.inputs()
    other = xs
    for salt in range(1, 6):
        q = Program(p.seed + 7919 * salt, p.dtype, p.shapes, p.instrs)
        if valid(q):
            other = q.inputs()
            break
    # the batch axis of each input: None (unbatched), mostly 0, sometimes another axis
    axes = [None if rng.random() < 0.3 else 0 if rng.random() < 0.6
            else int(rng.integers(np.ndim(x) + 1)) for x in xs]
    if all(a is None for a in axes):
        axes[0] = 0
    batched = [x if a is None else np.stack([x, y], axis=a) for x, y, a in zip(xs, other, axes)]
    examples = [[x if a is None else np.take(b, e, axis=a) for x, b, a in zip(xs, batched, axes)]
                for e in (0, 1)]
    return tuple(axes), batched, examples


def check_vmap(p: Program) -> None:
    """vmap over a batch of two == the per-example results."""
    f, _ = p.functions()
    axes, batched, examples = _batch(p)
    got = fg.vmap(f, in_axes=axes)(*batched)
    want = np.stack([np.asarray(f(*ex)) for ex in examples])
    assert np.asarray(got).dtype == want.dtype, "vmap: dtype"
    assert_close(got, want, _exact(p), f"vmap, in_axes={axes}")


def check_vmap_grad(p: Program) -> None:
    """vmap(grad(f)) == per-example grad(f)."""
    f, _ = p.functions()
    axes, batched, examples = _batch(p)
    grad_f = fg.grad(f, argnums=_argnums(p))
    got = fg.vmap(grad_f, in_axes=axes)(*batched)
    per = [grad_f(*ex) for ex in examples]
    want = [np.stack([per[0][k], per[1][k]]) for k in range(p.n_inputs)]
    _close_all(got, want, _exact(p), f"vmap(grad), in_axes={axes}")


def check_compiled(p: Program) -> None:
    """jit of (f, grad(f)) as generated code == the same in the interpreter."""
    f, _ = p.functions()
    xs = p.inputs()
    argnums = _argnums(p)

    def both(*a):
        return f(*a), fg.grad(f, argnums=argnums)(*a)

    with executor(compiled=True):
        got_v, got_g = fg.jit(both)(*xs)
    with executor(compiled=False):
        want_v, want_g = fg.jit(both)(*xs)
    assert np.asarray(got_v).dtype == np.asarray(want_v).dtype, "compiled: dtype"
    assert_close(got_v, want_v, _exact(p), "compiled jit forward")
    _close_all(got_g, want_g, _exact(p), "compiled jit(grad)")


#: name -> (check, needs float64 finite differences)
CHECKS = {
    "forward": (check_forward, False),
    "eager": (check_eager, False),
    "grad": (check_grad, True),
    "vjp": (check_vjp, True),
    "jvp": (check_jvp, True),
    "grad_grad": (check_grad_grad, True),
    "jvp_grad": (check_jvp_grad, True),
    "vmap": (check_vmap, False),
    "vmap_grad": (check_vmap_grad, False),
}


def applicable(p: Program, compiled: bool = False) -> list[str]:
    names = [n for n, (_, fd) in CHECKS.items() if p.dtype == "f64" or not fd]
    return [*names, "compiled"] if compiled else names


def run_check(p: Program, name: str) -> None:
    if name == "compiled":
        check_compiled(p)
        return
    with executor(compiled=False):
        CHECKS[name][0](p)


def failures(p: Program, compiled: bool = False) -> list[tuple[str, BaseException]]:
    """Every check that fails on ``p`` with the exception it raised."""
    global _shared
    out = []
    _shared = {}
    try:
        for name in applicable(p, compiled):
            try:
                run_check(p, name)
            except Exception as e:
                out.append((name, e))
    finally:
        _shared = None
    return out
