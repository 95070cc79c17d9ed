"""The NumPy functions of ``fusegrad.numpy._coverage.ADDED`` against NumPy itself.

Each case is a function written with plain ``np.*`` calls: run on NumPy arrays
it *is* the reference; traced, NumPy hands every call to ``fusegrad.numpy``
through ``__array_function__``. For each case:

(a) the interpreter (the traced Function evaluated) and ``fg.jit`` match NumPy,
    shape and dtype included;
(b) differentiable cases: ``check_grads`` to second order (reverse mode,
    interpreter), and one compiled function returning the value, the gradient
    of ``sum(f * w)`` and its forward-mode derivative along ``u``, against finite
    differences of the NumPy reference;
(c) ``fg.vmap`` (compiled) over a batch of first arguments against a loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.numpy as fnp
from fusegrad import config
from fusegrad.ir import evaluate
from fusegrad.numpy._coverage import ADDED
from fusegrad.tracer.trace import trace_pytree
from tests.helpers import assert_close, check_grads, numeric_grads

RNG = np.random.default_rng(7)


def normal(*shape):
    return RNG.standard_normal(shape)


def distinct(*shape):
    """Values at least 0.1 apart (no ties for sort / extrema / knots)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.25 + RNG.uniform(-0.05, 0.05, n) - n * 0.1).reshape(shape)


def away0(*shape):
    return RNG.choice([-1.0, 1.0], shape) * RNG.uniform(0.3, 2.0, shape)


@dataclass(frozen=True)
class Case:
    """``f(*args)`` with ``np.*`` calls; ``diff``: differentiable in its float args."""

    name: str
    f: Callable
    args: tuple
    diff: bool = True
    label: str = ""
    vmap: bool = True

    @property
    def id(self):
        return f"{self.name}-{self.label}" if self.label else self.name


X = normal(4, 5)
V = normal(4)
T = normal(2, 3, 4)
XP = np.array([-1.0, 0.0, 0.5, 2.0])
XQ = np.array([-2.0, -0.7, -0.3, 0.1, 0.2, 0.9, 1.9, 3.0])
TIES = np.array([3.0, 1.0, 3.0, -2.0, 1.0, 0.5])
NANS = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [-2.0, 0.5, np.nan]])
INF = np.array([1.0, np.inf, -np.inf, np.nan, -3.0])

CASES = [
    # sorting
    Case("sort", lambda x: np.sort(x), (distinct(4, 5),), label="last"),
    Case("sort", lambda x: np.sort(x, axis=0), (distinct(4, 5),), label="axis0"),
    Case("sort", lambda x: np.sort(x, axis=None), (distinct(3, 4),), label="flat"),
    Case("sort", lambda x: np.sort(x * 2), (np.array([[2, -1, 2, 0]]),), False, "int"),
    Case("argsort", lambda x: np.argsort(x, axis=0), (distinct(4, 3),), False),
    Case("argsort", lambda x: np.argsort(x, kind="stable"), (TIES,), False, "ties"),
    Case("argsort", lambda x: np.argsort(x * 1.0), (np.array([2.0, np.nan, -1.0, np.nan, 0.0]),),
         False, "nan"),
    Case("take_along_axis", lambda x: np.take_along_axis(x, np.argsort(x, axis=1)[:, ::-1], 1),
         (distinct(3, 4),)),
    Case("partition", lambda x: np.partition(x, 2)[..., 2], (distinct(3, 5),)),
    Case("argpartition", lambda x: np.argpartition(x, 1)[:, 1], (distinct(3, 4),), False),
    Case("searchsorted", lambda v: np.searchsorted(XP, v), (XQ,), False),
    Case("searchsorted", lambda v: np.searchsorted(XP, v, side="right"),
         (np.array([-1.0, 0.0, 0.3, 2.0, np.nan]),), False, "right"),
    # elementwise
    Case("deg2rad", lambda x: np.deg2rad(x), (X,)),
    Case("rad2deg", lambda x: np.rad2deg(x), (X,)),
    Case("degrees", lambda x: np.degrees(x), (V,)),
    Case("radians", lambda x: np.radians(x), (V,)),
    Case("hypot", lambda x, y: np.hypot(x, y), (away0(3, 4), away0(4))),
    Case("hypot", lambda x, y: np.hypot(x, y), (np.array([0.0, 3.0, 1e300, np.inf, 2.0]),
                                                np.array([0.0, 4.0, 1e300, np.nan, 2.0])),
         False, "special"),
    Case("sinc", lambda x: np.sinc(x), (np.concatenate([normal(6), [1e-5, -3e-4]]),)),
    Case("sinc", lambda x: np.sinc(x), (np.array([0.0, 1.0, -2.0, 0.5]),), False, "zero"),
    Case("logaddexp2", lambda x, y: np.logaddexp2(x, y), (normal(3, 4), normal(4))),
    Case("fmax", lambda x, y: np.fmax(x, y), (distinct(3, 4), distinct(4))),
    Case("fmin", lambda x, y: np.fmin(x, y), (distinct(3, 4), distinct(4))),
    Case("fmax", lambda x, y: np.fmax(x, y), (INF, INF[::-1].copy()), False, "nan"),
    Case("fmin", lambda x, y: np.fmin(x, y), (INF, INF[::-1].copy()), False, "nan"),
    Case("nan_to_num", lambda x: np.nan_to_num(x), (INF,), False, "default"),
    Case("nan_to_num", lambda x: np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0),
         (INF,), False, "values"),
    Case("nan_to_num", lambda x: np.nan_to_num(x), (X,), label="finite"),
    Case("isclose", lambda x, y: np.isclose(x, y), (np.array([1.0, 1.0, np.inf, np.nan, 0.0]),
                                                   np.array([1.0 + 1e-9, 1.1, np.inf, np.nan,
                                                             1e-9])), False),
    Case("isclose", lambda x, y: np.isclose(x, y, equal_nan=True, atol=0.2),
         (np.array([1.0, np.nan, 0.0]), np.array([1.1, np.nan, 0.3])), False, "nan"),
    Case("allclose", lambda x: np.allclose(x, x + 1e-9), (X,), False, vmap=False),
    Case("nansum", lambda x: np.nansum(x, axis=1), (NANS,), label="nan"),
    Case("nansum", lambda x: np.nansum(x), (X,)),
    Case("nanmean", lambda x: np.nanmean(x, axis=0), (X,)),
    Case("nanmax", lambda x: np.nanmax(x, axis=1), (distinct(3, 4),)),
    Case("nanmin", lambda x: np.nanmin(x, axis=0, keepdims=True), (distinct(3, 4),)),
    Case("nanmax", lambda x: np.nanmax(x[:1]), (NANS,), False, "nan", vmap=False),
    Case("nanmin", lambda x: np.nanmin(x[2]), (NANS,), False, "nan", vmap=False),
    # array manipulation
    Case("tril", lambda x: np.tril(x, -1), (X,)),
    Case("tril", lambda x: np.tril(x), (V,), label="1d"),
    Case("triu", lambda x: np.triu(x, 2), (T,)),
    Case("diag", lambda x: np.diag(x, 1), (X,), label="2d"),
    Case("diag", lambda x: np.diag(x, -2), (V,), label="1d"),
    Case("diagonal", lambda x: np.diagonal(x, 1, 2, 0), (T,)),
    Case("trace", lambda x: np.trace(x, -1, 1, 2), (T,)),
    Case("trace", lambda x: np.trace(x), (X,), label="2d"),
    Case("roll", lambda x: np.roll(x, (2, -1), (0, 1)), (X,)),
    Case("roll", lambda x: np.roll(x, 7), (X,), label="flat"),
    Case("roll", lambda x: np.roll(x, (1, 2), 1), (X,), label="same-axis"),
    Case("append", lambda x, v: np.append(x, v), (X, V)),
    Case("append", lambda x: np.append(x, x[:1], axis=0), (X,), label="axis0"),
    Case("fliplr", lambda x: np.fliplr(x), (X,)),
    Case("flipud", lambda x: np.flipud(x), (T,)),
    *(Case("rot90", lambda x, k=k: np.rot90(x, k, (2, 0)), (T,), label=f"k{k}")
      for k in (-1, 1, 2, 3)),
    Case("array_split", lambda x: np.array_split(x, 3, axis=1), (X,)),
    Case("hsplit", lambda x: np.hsplit(x, [1, 3]), (X,)),
    Case("vsplit", lambda x: np.vsplit(x, 2), (X,)),
    Case("dsplit", lambda x: np.dsplit(x, [1]), (T,)),
    Case("atleast_3d", lambda x: np.atleast_3d(x), (V,)),
    Case("atleast_3d", lambda x, y: np.atleast_3d(x, y), (X, V), label="two"),
    Case("column_stack", lambda x, v: np.column_stack([v, x, v]), (X, V)),
    *(Case("pad", lambda x, m=m: np.pad(x, ((1, 7), (3, 2)), mode=m), (X,), label=m)
      for m in ("edge", "reflect", "symmetric", "wrap")),
    Case("pad", lambda x: np.pad(x, ((1, 2), (3, 0)), constant_values=((1, 2), (3, 4))), (X,),
         label="constant"),
    Case("pad", lambda x: np.pad(x, 2), (T,), label="scalar"),
    Case("meshgrid", lambda x, y: np.meshgrid(x, y), (V, normal(3))),
    Case("meshgrid", lambda x, y: np.meshgrid(x, y, x[:2], indexing="ij", sparse=True),
         (V, normal(3)), label="ij-sparse"),
    Case("kron", lambda x, y: np.kron(x, y), (normal(2, 3), normal(3))),
    Case("kron", lambda x, y: np.kron(x, y), (normal(2, 2), normal(3, 2)), label="2d"),
    Case("select", lambda x: np.select([x > 0.5, x < -0.5], [x, 2 * x], -1.0),
         (away0(4, 5) + 0.5 * np.sign(normal(4, 5)),)),
    # calculus
    Case("cumprod", lambda x: np.cumprod(x, axis=1), (normal(3, 7),)),
    Case("cumprod", lambda x: np.cumprod(x), (np.array([[2.0, 0.0, 3.0], [0.0, 5.0, -1.0]]),),
         label="zeros"),
    Case("cumprod", lambda x: np.cumprod(x), (np.arange(1, 7, dtype=np.int32),), False, "i32"),
    Case("diff", lambda x: np.diff(x, 2, axis=0), (X,)),
    Case("diff", lambda x: np.diff(x, prepend=0.5, append=x[:, :1]), (X,), label="edges"),
    Case("diff", lambda x: np.diff(x > 0), (X,), False, "bool"),
    Case("gradient", lambda x: np.gradient(x), (X,)),
    Case("gradient", lambda x: np.gradient(x, 0.5, 2.0, edge_order=2), (X,), label="edge2"),
    Case("gradient", lambda x: np.gradient(x, axis=-1), (T,), label="axis"),
    Case("interp", lambda q, f: np.interp(q, XP, f), (XQ, normal(4))),
    Case("interp", lambda q, f: np.interp(q, XP, f, left=-5.0, right=7.0), (XQ, normal(4)),
         label="left-right"),
    Case("cross", lambda a, b: np.cross(a, b), (normal(4, 3), normal(3))),
    Case("cross", lambda a, b: np.cross(a, b, axisa=0, axisb=0, axisc=0), (normal(3, 4),
                                                                            normal(3, 4)),
         label="axes"),
    # lists, einsum, concatenation (the np.* functions that dispatch on list items)
    Case("concatenate", lambda x, i: np.concatenate([x, i]), (X[:2], np.arange(5)[None]),
         label="f64-i64"),
    Case("concatenate", lambda x, y: np.concatenate([x, y], axis=1),
         (X[:, :2], normal(4, 1).astype(np.float32)), label="f64-f32"),
    Case("stack", lambda x, i: np.stack([x, i, x]), (V, np.arange(4, dtype=np.int32)),
         label="mixed"),
    Case("hstack", lambda x, i: np.hstack([x, i]), (V, np.array([True, False]))),
    Case("vstack", lambda x, i: np.vstack([x, i]), (V, np.arange(4))),
    Case("column_stack", lambda x, i: np.column_stack([x, i]), (V, np.arange(4)),
         label="mixed"),
    Case("einsum", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), (X, normal(5, 3)),
         label="sublist"),
    Case("einsum", lambda a, b: np.einsum(a, [Ellipsis, 1], b, [1]), (T, V), label="sublist-ell"),
    Case("einsum", lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
         (normal(4, 1, 2, 3), normal(5, 3, 2)), label="ell-broadcast"),
    Case("einsum", lambda a, b: np.einsum("i...,i...", a, b), (normal(3, 4, 1), normal(3, 5)),
         label="ell-implicit"),
    Case("einsum", lambda a, b: np.einsum("...,...->...", a, b), (normal(4, 4), normal(3, 4, 4)),
         label="ell-lower-rank-first"),
    Case("einsum", lambda a, b, c: np.einsum("...,...i,...->...i", a, b, c),
         (normal(4), normal(2, 1, 3), normal(5, 1, 4)), label="ell-three-ranks"),
    Case("full_like", lambda x: np.full_like(x, x[0, 0]), (X,), label="traced-fill"),
    # fabs, rollaxis, real_if_close, linspace with traced endpoints
    Case("fabs", lambda x: np.fabs(x * x * x), (away0(3, 4),)),
    Case("fabs", lambda x: np.fabs(x - 2), (np.arange(5),), False, "int"),
    Case("rollaxis", lambda x: np.rollaxis(x, 2), (T,)),
    Case("rollaxis", lambda x: np.rollaxis(x * 2, 0, 3), (T,), label="start"),
    Case("rollaxis", lambda x: np.rollaxis(x, -1, -2), (T,), label="negative"),
    Case("real_if_close", lambda x: np.real_if_close(x * x), (X,), label="real"),
    Case("linspace", lambda a, b: np.linspace(a, b, 7), (0.3, 2.5), label="scalars"),
    Case("linspace", lambda a, b: np.linspace(a, b, 5, endpoint=False, axis=1),
         (normal(3), normal(2, 1)), label="arrays-axis"),
    Case("linspace", lambda a: np.linspace(a, 4.0, 4, retstep=True), (V,), label="retstep"),
    Case("linspace", lambda a: np.linspace(-1.0, a, 1), (V,), label="one"),
]


def _outs(r):
    return list(r) if isinstance(r, list | tuple) else [r]


def _same(got, want, what):
    got, want = _outs(got), _outs(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype} != {w.dtype}"
        assert_close(g, w, "exact64", what)


def _traced(case):
    """The IR of ``case.f`` and its arguments (closed-over arrays are implicit parameters)."""
    tr = trace_pytree(case.f, case.args)
    return tr.function, [*map(np.asarray, case.args), *map(np.asarray, tr.free)]


def _ids(cases):
    return [c.id for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_interpreter_and_jit_match_numpy(case):
    with np.errstate(all="ignore"):
        want = case.f(*case.args)
    fn, args = _traced(case)
    _same(evaluate(fn, *args), want, "interpreter")
    _same(fg.jit(case.f)(*case.args), want, "fg.jit")


DIFF = [c for c in CASES if c.diff]


def _wrt(case):
    return tuple(i for i, a in enumerate(case.args) if np.asarray(a).dtype == np.float64)


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_gradients_to_second_order(case):
    fn, args = _traced(case)
    check_grads(fn, args, wrt=_wrt(case), order=2)


def _weighted(case, rng):
    """``g(*args) = sum_k sum(f(*args)[k] * w_k)`` with fixed random ``w_k``."""
    shapes = [np.shape(o) for o in _outs(case.f(*case.args))]
    ws = [rng.standard_normal(s) for s in shapes]

    def g(*args):
        return sum((o * w).sum() for o, w in zip(_outs(case.f(*args)), ws))

    return g


def _along(case):
    """``(f(*args), grad of g, jvp of g along u)``: ``g`` as in ``_weighted``, the
    derivatives w.r.t. the float arguments, all from one function (one compile)."""
    rng = np.random.default_rng(3)
    g = _weighted(case, rng)
    wrt = _wrt(case)
    us = tuple(rng.standard_normal(np.shape(case.args[i])) for i in wrt)

    def along(*args):
        def g_wrt(*xs):
            full = list(args)
            for i, x in zip(wrt, xs):
                full[i] = x
            return g(*full)

        primals = tuple(args[i] for i in wrt)
        return (case.f(*args), fg.grad(g_wrt, argnums=tuple(range(len(wrt))))(*primals),
                fg.jvp(g_wrt, primals, us)[1])

    def check(result, how):
        value, grads, tangent = result
        _same(value, case.f(*case.args), f"{how} value")
        fd = numeric_grads(g, [np.asarray(a, np.float64) for a in case.args])
        for i, gr in zip(wrt, grads):
            assert_close(gr, fd[i], "fd", f"{how} gradient of argument {i}")
        assert_close(tangent, sum(np.vdot(u, fd[i]) for u, i in zip(us, wrt)), "fd",
                     f"{how} jvp")

    return along, check


@pytest.mark.parametrize("case", DIFF, ids=_ids(DIFF))
def test_grad_and_jvp_match_finite_differences(case):
    along, check = _along(case)
    check(along(*case.args), "interpreted")


def _batch(case):
    a0 = np.asarray(case.args[0])
    if a0.dtype.kind == "f":
        return np.stack([a0, a0[::-1] if a0.ndim == 1 else -a0, a0 * 0.5])
    return np.stack([a0, a0, a0])


def _vmapped(case):
    in_axes = (0, *(None for _ in case.args[1:]))
    return fg.vmap(case.f, in_axes=in_axes), (_batch(case), *case.args[1:])


def _vmap_want(case):
    batch, rest = _batch(case), case.args[1:]
    with np.errstate(all="ignore"):
        outs = [_outs(case.f(b, *rest)) for b in batch]
    want = [np.stack(ws) for ws in zip(*outs)]
    return want if isinstance(case.f(*case.args), list | tuple) else want[0]


VMAP = [c for c in CASES if c.vmap and np.ndim(c.args[0]) > 0]


@pytest.mark.parametrize("case", VMAP, ids=_ids(VMAP))
def test_vmap_matches_loop(case):
    f, args = _vmapped(case)
    _same(f(*args), _vmap_want(case), "vmap")


# --- compiled: one case per function, a few cases per compiled module -------------------


def _one_per_name(cases):
    """The first case of each function: compiling every case would take many minutes
    (the interpreter tests above cover them all)."""
    seen: dict = {}
    for c in cases:
        seen.setdefault(c.name, c)
    return list(seen.values())


#: cases per compiled module: Numba's compile time grows faster than the module
CHUNK = 4
COMPILED = _one_per_name(CASES)
COMPILED_VMAP = _one_per_name(VMAP)


@functools.cache
def _compiled_chunk(kind: str, start: int) -> dict:
    """Results of the compiled cases ``start .. start + CHUNK`` of ``kind``, by case id."""
    cases = (COMPILED if kind == "grad" else COMPILED_VMAP)[start : start + CHUNK]
    if kind == "grad":
        fns_args = [((_along(c)[0] if c.diff else c.f), c.args) for c in cases]
    else:
        fns_args = [_vmapped(c) for c in cases]
    counts = [len(a) for _, a in fns_args]

    def combined(*xs):
        res, k = [], 0
        for (f, _), n in zip(fns_args, counts):
            res.append(f(*xs[k : k + n]))
            k += n
        return res

    old = config.DISABLE_JIT
    config.DISABLE_JIT = False
    try:
        out = fg.jit(combined)(*(a for _, args in fns_args for a in args))
    finally:
        config.DISABLE_JIT = old
    return dict(zip((c.id for c in cases), out))


def _compiled(kind, case):
    cases = COMPILED if kind == "grad" else COMPILED_VMAP
    i = [c.id for c in cases].index(case.id)
    return _compiled_chunk(kind, i - i % CHUNK)[case.id]


@pytest.mark.compiled
@pytest.mark.parametrize("case", COMPILED, ids=_ids(COMPILED))
def test_compiled(case):
    """Compiled: the value, and for differentiable cases the gradient and jvp."""
    got = _compiled("grad", case)
    if case.diff:
        _along(case)[1](got, "compiled")
    else:
        with np.errstate(all="ignore"):
            _same(got, case.f(*case.args), "compiled")


@pytest.mark.compiled
@pytest.mark.parametrize("case", COMPILED_VMAP, ids=_ids(COMPILED_VMAP))
def test_compiled_vmap(case):
    _same(_compiled("vmap", case), _vmap_want(case), "compiled vmap")


def test_every_added_function_exists_and_has_cases():
    named = {c.name for c in CASES} | set(_SPECIFIC)
    for name in ADDED:
        assert hasattr(fnp, name), f"fnp.{name} is missing"
        assert name in named, f"no test case for {name!r}"


#: added functions tested by dedicated tests (test_lists_of_traced_values.py and below)
_SPECIFIC = ("array", "asarray", "full", "r_", "c_", "where", "real_if_close")


def test_real_if_close_of_complex_values():
    z = np.array([1.0 + 1e-15j, 2.0 - 3e-16j])
    x = np.array([0.5, 1.5])

    def f(x):  # nearly real: the real part, differentiable
        return fnp.sum(np.real_if_close(x * z) ** 2)

    assert_close(fg.grad(f)(x), 2 * x * z.real ** 2, "exact64")
    np.testing.assert_array_equal(fnp.real_if_close(z), np.real_if_close(z))
    far = np.array([1.0 + 1e-10j])
    assert fnp.real_if_close(far).dtype == np.complex128
    assert fnp.real_if_close(far, tol=1e-9).dtype == np.float64
    with pytest.raises(fg.TracerError, match="concrete value"):  # the choice reads values
        fg.jit(lambda z: np.real_if_close(z))(z)
