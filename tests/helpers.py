"""The test suite's one tolerance policy, and the finite-difference gradient checker.

Tolerances (STYLE.md, "Tests"), each scaled by ``max(1, max|ref|)`` in its
absolute part so that large values are compared relatively and values near
zero absolutely:

* ``"exact64"``: float64 results of the same computation done two ways
  (interpreter vs NumPy, later compiled vs interpreter):
  ``rtol=1e-10, atol=1e-12 * max(1, max|ref|)``.
* ``"f32"``: float32 results: ``rtol=1e-5, atol=1e-6 * max(1, max|ref|)``. The
  absolute part is looser than float64's because a float32 result near zero
  that comes from cancellation carries an error of a few float32 ulps
  (1.2e-7) of the operands, not of the result.
* ``"fd"``: a derivative against central finite differences in float64:
  ``rtol=1e-6, atol=1e-8 * max(1, max|ref|)``.

Non-floating results (integers, booleans) must always be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fusegrad import config
from fusegrad.ir import Function, TensorType, evaluate
from fusegrad.passes.autodiff import vjp
from fusegrad.tracer import trace, trace_pytree

TOLERANCES: dict[str, tuple[float, float]] = {
    "exact64": (1e-10, 1e-12),
    "f32": (1e-5, 1e-6),
    "fd": (1e-6, 1e-8),
}

#: Finite-difference step, relative to max(1, max|x|) over the differentiated inputs.
#: The 4-point central stencil used below has truncation error h**4 / 30 * f^(5)
#: (3e-18 * f^(5) for h = 1e-4) and rounding error about 1.5 * 2.2e-16 * |f| / h
#: (3e-12 * |f|): both far below the "fd" tolerance even where the fifth derivative
#: is large (arctanh near 0.9, sqrt near 0.1, and their VJPs at second order). The
#: 2-point stencil's h**2 / 6 * f''' would leave far less margin there. Inputs
#: must stay more than 2 * h away from kinks and discontinuities (the direction u
#: has max|u| <= 1).
FD_STEP = 1e-4


def assert_close(actual, expected, kind: str, err_msg: str = "") -> None:
    """Assert ``actual`` matches ``expected`` (the reference) under tolerance ``kind``.

    Shapes must be equal (no broadcasting); NaNs must sit at the same places.

    >>> assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-11]), "exact64")
    """
    if kind not in TOLERANCES:
        raise ValueError(f"unknown tolerance kind {kind!r}; use one of {sorted(TOLERANCES)}")
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(f"shape {actual.shape} != expected {expected.shape}. {err_msg}")
    if not (np.issubdtype(expected.dtype, np.inexact) or np.issubdtype(actual.dtype, np.inexact)):
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    rtol, atol = TOLERANCES[kind]
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(
        actual, expected, rtol=rtol, atol=atol * scale, equal_nan=True, err_msg=err_msg
    )


def numeric_grads(f, inputs, step: float = FD_STEP) -> list[np.ndarray]:
    """d f / d inputs[k] per element, by the 4-point central stencil."""
    h = step * max(1.0, *(float(np.abs(x).max(initial=0.0)) for x in inputs))
    grads = []
    for k, x in enumerate(inputs):
        g = np.zeros(np.shape(x))
        for idx in np.ndindex(g.shape):

            def at(t, k=k, idx=idx):
                moved = [np.array(a, dtype=np.float64, copy=True) for a in inputs]
                moved[k][idx] += t
                return float(f(*moved))

            g[idx] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)
        grads.append(g)
    return grads


def as_function(fn: Function | Callable, args: Sequence) -> Function:
    """``fn`` itself if it is a Function, else ``fn`` traced on the types of ``args``."""
    if isinstance(fn, Function):
        return fn
    return trace(fn, *(TensorType(np.shape(a), np.asarray(a).dtype) for a in args))


def float_params(fn: Function) -> tuple[int, ...]:
    """Indices of ``fn``'s floating-point and complex parameters (the default ``wrt``)."""
    return tuple(i for i, p in enumerate(fn.params) if p.type.is_inexact)


def pair(a, b) -> float:
    """The real pairing ``re(sum(a * b))`` under which JAX-convention VJPs (linear
    transposes, no conjugation) are adjoint to JVPs; ``vdot`` for real arrays."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


def normal_like(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal of ``dtype``; complex dtypes get independent real and imaginary parts."""
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def random_cotangents(fn: Function, rng: np.random.Generator) -> list[np.ndarray]:
    """One cotangent per result: standard normal for float results, zeros otherwise."""
    return [
        normal_like(rng, t.shape, t.dtype) if t.is_inexact else np.zeros(t.shape, t.dtype)
        for t in fn.out_types
    ]


def check_grads(
    fn: Function | Callable,
    args: Sequence[np.ndarray],
    *,
    wrt: Sequence[int] | None = None,
    order: int = 1,
    seed: int = 0,
    step: float = FD_STEP,
) -> None:
    """Check ``vjp(fn, wrt)`` against finite differences, to ``order``-th derivatives.

    ``fn`` is an IR Function (or a callable, traced on ``args``' types) of float64
    and integer/boolean arrays; ``wrt`` (default: every float parameter) are the
    inputs differentiated. With random directions ``u`` (one per input in
    ``wrt``) and ``v`` (one per result), ``<u, J^T v>`` from the VJP Function
    must equal ``<J u, v>`` from central differences along ``u`` (tolerance
    ``"fd"``). This checks the whole Jacobian up to an event of probability
    zero, at the cost of one VJP and four evaluations.

    For ``order=2`` the same check runs on the VJP Function ``g = vjp(fn, wrt)``
    as a function of the primal inputs, its cotangent parameters held at a fixed
    random value: that differentiates the cotangent results, i.e. checks
    ``vjp(vjp(fn, wrt), wrt)``.

    >>> check_grads(lambda x: x * x, [np.array([1.0, 2.0])], order=2)
    """
    args = [np.asarray(a) for a in args]
    n_explicit = len(args)
    if not isinstance(fn, Function):  # closed-over arrays become trailing parameters
        traced = trace_pytree(fn, tuple(TensorType(a.shape, a.dtype) for a in args))
        fn, args = traced.function, [*args, *(np.asarray(c) for c in traced.free)]
    if wrt is None:
        wrt = tuple(i for i in float_params(fn) if i < n_explicit)
    wrt = tuple(wrt)
    rng = np.random.default_rng(seed)
    _check_vjp(fn, args, wrt, rng, step)
    if order > 1:
        g = vjp(fn, wrt)
        cts = random_cotangents(fn, rng)
        check_grads(g, [*args, *cts], wrt=wrt, order=order - 1, seed=seed + 1, step=step)


def _check_vjp(fn, args, wrt, rng, step) -> None:
    for i in wrt:
        if args[i].dtype not in (np.float64, np.complex128):
            raise TypeError(f"check_grads: input {i} is {args[i].dtype}; differentiate float64")
    outs = evaluate(fn, *args)
    v = random_cotangents(fn, rng)
    u = {i: normal_like(rng, args[i].shape, args[i].dtype) for i in wrt}
    size = max([1.0, *(np.abs(d).max(initial=0.0) for d in u.values())])
    u = {i: d / size for i, d in u.items()}
    g = vjp(fn, wrt)
    res = evaluate(g, *args, *v)
    n = len(fn.results)
    where = f"\nin the VJP of:\n{fn}"
    for k, (r, o) in enumerate(zip(res[:n], outs)):
        assert_close(r, o, "exact64", f"primal result {k} of the VJP Function{where}")
    for i, ct in zip(wrt, res[n:]):
        ct = np.asarray(ct)
        if (ct.shape, ct.dtype) != (args[i].shape, args[i].dtype):
            raise AssertionError(
                f"cotangent of input {i} is {TensorType.of(ct)}, "
                f"expected {TensorType.of(args[i])}{where}"
            )
    analytic = sum(pair(u[i], ct) for i, ct in zip(wrt, res[n:]))

    h = step * max([1.0, *(np.abs(args[i]).max(initial=0.0) for i in wrt)])

    def along(t: float) -> float:
        moved = [a + t * u[i] if i in u else a for i, a in enumerate(args)]
        return sum(pair(w, o) for w, o in zip(v, evaluate(fn, *moved)))

    numeric = (8 * (along(h) - along(-h)) - (along(2 * h) - along(-2 * h))) / (12 * h)
    assert_close(
        analytic, numeric, "fd", f"<u, J^T v> (VJP) vs <J u, v> (finite differences){where}"
    )


def interpreted(f: Callable, *args):
    """``f(*args)`` run by the NumPy interpreter (the reference for compiled results)."""
    old = config.DISABLE_JIT
    config.DISABLE_JIT = True
    try:
        return f(*args)
    finally:
        config.DISABLE_JIT = old


def same_bits(got, want) -> None:
    """``got`` and ``want`` are the same array: dtype, shape and every byte (NaN payloads
    and signed zeros included)."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8))


def same_results(got, want) -> None:
    """``same_bits`` for each of two results (a tuple, or one array each)."""
    got = tuple(got) if isinstance(got, tuple) else (got,)
    want = tuple(want) if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same_bits(g, w)


def on_one_and_all_threads(f: Callable, *args) -> tuple:
    """``(f(*args) on one of Numba's threads, f(*args) on all of them)``."""
    import numba

    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = f(*args)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)  # all there are
        return one, f(*args)
    finally:
        numba.set_num_threads(before)


def damage(path) -> None:
    """Flip one byte in the middle of the file at ``path`` (a damaged cache entry)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def lowered_natively(f: Callable, *args) -> bool:
    """Whether the lean code generator lowers every op of ``f`` traced at ``args``'
    types and fused (no op runs with NumPy between segments)."""
    from fusegrad.codegen import lean
    from fusegrad.passes.fusion import fuse
    from fusegrad.passes.simplify import simplify
    from fusegrad.tracer import trace_pytree

    types = tuple(TensorType(np.shape(a), np.asarray(a).dtype) for a in args)
    fused = fuse(simplify(trace_pytree(f, types, name="f").function))
    return all(lean.lowers(op) for op in fused.ops)
