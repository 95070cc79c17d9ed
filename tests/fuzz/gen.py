"""Seeded random programs over the whole op table.

A program is a list of instructions; each is one Python expression over earlier
values (``ops.<name>(...)`` calls, plus ``fg.cond`` / ``fg.fori_loop``) whose main
op is an entry of ``fusegrad.ir.optable``. Ops with a restricted domain get their
operand mapped into it by smooth ops written in the same expression (``log`` of
``x * x + 0.5``). Every instruction also carries a *guard*: a NumPy expression
over its concrete operands that is true when the instruction is far from a kink,
a discontinuity or a tie, so finite differences are valid there. The generator
evaluates each candidate on the program's concrete inputs and keeps it only if
its guard holds and every value stays finite and of moderate size; the shrinker
re-checks the same guards after every change.

The program's Python source is the program: ``Program.source()`` is executed to
obtain the function every transform is applied to, and is what a failure prints.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

import fusegrad as fg
from fusegrad.ir import ops
from fusegrad.ir.optable import OPS
from tests.fuzz.special_templates import (
    SPECIAL_BINARY_EXPR,
    SPECIAL_BINARY_GUARD,
    SPECIAL_UNARY_EXPR,
    SPECIAL_UNARY_GUARD,
)

#: Shapes inputs are drawn from; all broadcast against (3, 4) except (2, 1, 4)'s batch axis.
SHAPES = [(), (3, 1), (1, 4), (3, 4), (4,), (3, 4), (2, 1, 4)]
#: Distance the guarded quantities keep from a kink, tie or discontinuity.
MARGIN = 0.05
#: Largest magnitude any value may reach (keeps finite differences well conditioned).
MAX_MAGNITUDE = 50.0
#: Ops the generator does not draw: constants and region ops other than the control
#: flow covered by dedicated templates (cond, fori_loop -> scan), and the integer hash
#: behind fg.random (no derivative; tests/random checks it bit for bit in every executor).
SKIPPED = frozenset({"constant", "custom_vjp_call", "fused", "while_grad", "checkpoint",
                     "while_grad_vjp", "threefry2x32",
                     "argsort",  # fnp.sort / argsort: tests/numpy/test_more_functions.py
                     # matrix factorisations need well-conditioned inputs the generator does not
                     # draw: tests/passes/linalg_cases.py and tests/numpy/test_linalg.py
                     "cholesky", "triangular_solve", "solve", "slogdet", "eigh", "svd", "qr",
                     "eig", "sqrtm", "sylvester",  # and tests/complex/test_complex_linalg.py
                     # complex values: the generated programs are real (tests/complex)
                     "complex", "real", "imag", "conj",
                     "conv",  # tests/passes/conv_cases.py; random programs draw conv1d_same
                     # windows over trailing axes: tests/passes/pool_cases.py and
                     # tests/nn/test_pool_ops.py; random programs draw avg_pool1d
                     "max_pool", "max_pool_grad", "max_pool_take", "max_pool_argmax",
                     "sum_pool", "sum_pool_transpose",
                     "fft",  # complex results: tests/numpy/test_fft.py
                     "count",  # no operands: not drawn on its own (tests/passes/count_cases.py)
                     # no second derivative in the shapes a, b: tests/scipy/test_incgamma.py
                     "betainc", "betaincc", "betainc_grad"})


@dataclass(frozen=True)
class Instr:
    """``expr`` and ``guard`` are format strings over operand names ``{0}``, ``{1}``, ..."""

    op: str
    expr: str
    args: tuple[int, ...]
    guard: str = "True"

    def render(self, names) -> str:
        return self.expr.format(*(names[i] for i in self.args))


@dataclass(frozen=True)
class Program:
    seed: int
    dtype: str  # "f64" or "f32": the dtype of every input
    shapes: tuple[tuple[int, ...], ...]
    instrs: tuple[Instr, ...]

    @property
    def n_inputs(self) -> int:
        return len(self.shapes)

    def names(self) -> list[str]:
        return [f"x{i}" for i in range(self.n_inputs)] + [
            f"v{self.n_inputs + k}" for k in range(len(self.instrs))]

    def sinks(self) -> list[int]:
        used = {j for ins in self.instrs for j in ins.args}
        return [k for k in range(self.n_inputs, self.n_inputs + len(self.instrs))
                if k not in used]

    def source(self) -> str:
        """Python text defining ``f`` (sum of every unused value) and ``f_vec`` (the
        last floating unused value, unreduced). Every check asks for it: it is made once
        per program (``_source``)."""
        return _source(self)

    def _make_source(self) -> str:
        names = self.names()
        params = ", ".join(names[: self.n_inputs])
        body = [f"    {names[self.n_inputs + k]} = {ins.render(names)}"
                for k, ins in enumerate(self.instrs)]
        vals = self.values()
        kinds = [_kind(v) for v in vals]
        terms = []
        for k in self.sinks():
            v = names[k]
            if kinds[k] != "f":
                v = f"ops.convert({v}, dtype={self.dtype!r})"
            terms.append(f"ops.reduce_sum({v}, axes={tuple(range(np.ndim(vals[k])))})")
        total = terms[0] if terms else f"ops.reduce_sum({names[0]}, axes=())"
        for t in terms[1:]:
            total = f"ops.add({total}, {t})"
        vec = [k for k in self.sinks() if kinds[k] == "f"] or [0]
        lines = [f"def f({params}):", *body, f"    return {total}", "",
                 f"def f_vec({params}):", *body, f"    return {names[vec[-1]]}", ""]
        return "\n".join(lines)

    def functions(self):
        """``(f, f_vec)`` compiled from :meth:`source`."""
        return _compile(self.source())

    def reference(self):
        """``(f, f_vec)`` for finite differences: every ``stop_gradient`` returns its value
        at the program's inputs, a constant, so differences see no change through it (the
        gradient of ``stop_gradient`` is zero at every order)."""
        rec = _StopGradients()
        ns = {"ops": rec, "fg": fg, "np": np}
        exec(compile(self.source(), "<fuzz program>", "exec"), ns)
        ns["f"](*self.inputs())
        rec.frozen = rec.seen
        f, fv = ns["f"], ns["f_vec"]

        def f_ref(*a):
            rec.i = 0
            return f(*a)

        def fv_ref(*a):
            rec.i = 0
            return fv(*a)

        return f_ref, fv_ref

    def inputs(self) -> list[np.ndarray]:
        return make_inputs(self.seed, self.shapes, self.dtype)

    def values(self) -> list[np.ndarray]:
        """Every value of the program on its inputs, by the NumPy reference (no tracing)."""
        return evaluate(self, self.inputs())

    def kinds(self) -> list[str]:
        return [_kind(v) for v in self.values()]

    def value_shapes(self) -> list[tuple]:
        return [np.shape(v) for v in self.values()]

    def describe(self) -> str:
        xs = self.inputs()
        head = (f"# seed {self.seed}: {len(self.instrs)} op(s), inputs "
                + ", ".join(f"{self.dtype}{list(np.shape(x))}" for x in xs))
        try:
            ir = str(fg.make_ir(self.functions()[0])(*xs))
        except Exception as e:  # the IR is a diagnostic; a program that fails to trace
            ir = f"(tracing failed: {type(e).__name__}: {e})"
        return f"{head}\n{self.source()}\n# inputs = tests.fuzz.gen.make_inputs" \
               f"({self.seed}, {self.shapes}, {self.dtype!r})\n{ir}"


class _StopGradients:
    """``ops`` with ``stop_gradient`` recording its results, then replaying them."""

    def __init__(self):
        self.seen, self.frozen, self.i = [], None, 0

    def __getattr__(self, name):
        return getattr(ops, name)

    def stop_gradient(self, x):
        if self.frozen is None:
            self.seen.append(np.array(ops.stop_gradient(x)))
            return self.seen[-1]
        self.i += 1
        return self.frozen[self.i - 1]


@functools.lru_cache(maxsize=4096)
def _source(program: Program) -> str:
    return program._make_source()


@functools.lru_cache(maxsize=4096)
def _compile(src: str):
    ns = {"ops": ops, "fg": fg, "np": np}
    exec(compile(src, "<fuzz program>", "exec"), ns)
    return ns["f"], ns["f_vec"]


def make_inputs(seed: int, shapes, dtype: str) -> list[np.ndarray]:
    """Input ``k`` of shape ``s``: uniform in [-2, 2], a function of (seed, k, s) only, so
    the shrinker can change one input's shape without moving the others."""
    out = []
    for k, s in enumerate(shapes):
        rng = np.random.default_rng([seed, k, len(s), *s])
        out.append(rng.uniform(-2.0, 2.0, s).astype(np.float32 if dtype == "f32"
                                                     else np.float64))
    return out


def _kind(v) -> str:
    dt = np.asarray(v).dtype
    return "f" if dt.kind == "f" else "b" if dt.kind == "b" else "i"


# --- guards --------------------------------------------------------------------------


def _ties(x, axes) -> bool:
    """True when the largest and smallest entries over ``axes`` are unique by MARGIN."""
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(axes)
    moved = np.moveaxis(x, axes, tuple(range(-len(axes), 0)))
    flat = moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,))
    if flat.shape[-1] < 2:
        return True
    s = np.sort(flat, axis=-1)
    return bool(min((s[..., -1] - s[..., -2]).min(), (s[..., 1] - s[..., 0]).min()) > MARGIN)


def _frac_far(x, offset=0.0) -> bool:
    """True when ``x - offset`` is MARGIN away from every integer."""
    r = np.asarray(x, dtype=np.float64) - offset
    return bool(np.abs(r - np.round(r)).min(initial=1.0) > MARGIN)


GUARD_NS = {"np": np, "M": MARGIN, "_ties": _ties, "_frac_far": _frac_far}


def guard_holds(ins: Instr, vals) -> bool:
    names = [f"a{i}" for i in range(len(vals))]
    ns = dict(GUARD_NS, **dict(zip(names, (np.asarray(v) for v in vals))))
    try:
        return bool(eval(ins.guard.format(*(names[i] for i in ins.args)), ns))
    except Exception:
        return False


def evaluate(program: Program, inputs) -> list[np.ndarray]:
    """The values of every instruction, by the NumPy reference implementation."""
    names = program.names()
    vals = list(inputs)
    ns = {"ops": ops, "fg": fg, "np": np}
    for k, ins in enumerate(program.instrs):
        ns.update(zip(names[: program.n_inputs + k], vals))
        vals.append(np.asarray(eval(ins.render(names), ns)))
    return vals


def valid(program: Program) -> bool:
    """Every guard holds and every floating value is finite and moderate."""
    try:
        vals = program.values()
    except Exception:
        return False
    for k, ins in enumerate(program.instrs):
        if not guard_holds(ins, vals):
            return False
        v = vals[program.n_inputs + k]
        if v.dtype.kind == "f" and (not np.isfinite(v).all()
                                    or np.abs(v).max(initial=0.0) > MAX_MAGNITUDE):
            return False
    return True


# --- templates: one per op ------------------------------------------------------------
# A template is ``make(rng, vals, kinds, dt) -> Instr | None`` choosing its operands among
# the earlier values; ``dt`` is the program's float dtype name.


def _pick(rng, vals, kinds, kind="f", pred=lambda s: True):
    cands = [i for i, v in enumerate(vals) if kinds[i] == kind and pred(np.shape(v))]
    return int(rng.choice(cands)) if cands else None


def _bcast(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


TEMPLATES: dict[str, object] = {}


def template(*names):
    def deco(f):
        for n in names:
            TEMPLATES[n] = functools.partial(f, n)
        return f
    return deco


_UNARY_EXPR = {
    "exp": "ops.exp({0})",
    "log": "ops.log(ops.add(ops.mul({0}, {0}), 0.5))",
    "log1p": "ops.log1p(ops.mul({0}, {0}))",
    "expm1": "ops.expm1({0})",
    "sin": "ops.sin({0})", "cos": "ops.cos({0})",
    "tan": "ops.tan(ops.tanh({0}))",
    "arcsin": "ops.arcsin(ops.mul(ops.tanh({0}), 0.9))",
    "arccos": "ops.arccos(ops.mul(ops.tanh({0}), 0.9))",
    "arctan": "ops.arctan({0})",
    "sinh": "ops.sinh({0})", "cosh": "ops.cosh({0})", "tanh": "ops.tanh({0})",
    "arcsinh": "ops.arcsinh({0})",
    "arccosh": "ops.arccosh(ops.add(ops.mul({0}, {0}), 1.5))",
    "arctanh": "ops.arctanh(ops.mul(ops.tanh({0}), 0.9))",
    "sqrt": "ops.sqrt(ops.add(ops.mul({0}, {0}), 0.25))",
    "cbrt": "ops.cbrt({0})",
    "erf": "ops.erf({0})", "logistic": "ops.logistic({0})",
    "neg": "ops.neg({0})", "abs": "ops.abs({0})", "sign": "ops.sign({0})",
    "floor": "ops.floor({0})", "ceil": "ops.ceil({0})", "round": "ops.round({0})",
    "stop_gradient": "ops.stop_gradient({0})",
    "isnan": "ops.isnan({0})", "isfinite": "ops.isfinite({0})",
}
_UNARY_GUARD = {
    "cbrt": "np.abs({0}).min() > 0.2", "abs": "np.abs({0}).min() > M",
    "sign": "np.abs({0}).min() > M", "floor": "_frac_far({0})", "ceil": "_frac_far({0})",
    "round": "_frac_far({0}, 0.5)",
}

_UNARY_EXPR |= SPECIAL_UNARY_EXPR
_UNARY_GUARD |= SPECIAL_UNARY_GUARD


@template(*_UNARY_EXPR)
def _unary(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    return Instr(name, _UNARY_EXPR[name], (i,), _UNARY_GUARD.get(name, "True"))


@template("logical_not")
def _not(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, "b")
    return None if i is None else Instr(name, "ops.logical_not({0})", (i,))


@template("convert")
def _convert(name, rng, vals, kinds, dt):
    src = [i for i, k in enumerate(kinds) if k in "bi"]
    if dt == "f64":
        src += [i for i, v in enumerate(vals) if np.asarray(v).dtype == np.float64]
    if not src:
        return None
    i = int(rng.choice(src))
    if kinds[i] == "f":  # f64 -> f32 -> f64 would lose precision: go through an int64 floor
        return Instr(name, "ops.convert(ops.convert(ops.floor({0}), dtype='i64'), "
                           f"dtype={dt!r})", (i,), "_frac_far({0})")
    return Instr(name, f"ops.convert({{0}}, dtype={dt!r})", (i,))


_BINARY_EXPR = {
    "add": "ops.add({0}, {1})", "sub": "ops.sub({0}, {1})", "mul": "ops.mul({0}, {1})",
    "div": "ops.div({0}, ops.add(ops.mul({1}, {1}), 0.5))",
    "pow": "ops.pow(ops.add(ops.mul({0}, {0}), 0.5), ops.mul(ops.tanh({1}), 2.0))",
    "maximum": "ops.maximum({0}, {1})", "minimum": "ops.minimum({0}, {1})",
    "floor_divide": "ops.floor_divide({0}, ops.add(ops.mul({1}, {1}), 0.5))",
    "remainder": "ops.remainder({0}, ops.add(ops.mul({1}, {1}), 0.5))",
    "atan2": "ops.atan2({0}, {1})",
    "lt": "ops.lt({0}, {1})", "le": "ops.le({0}, {1})", "gt": "ops.gt({0}, {1})",
    "ge": "ops.ge({0}, {1})", "eq": "ops.eq({0}, {1})", "ne": "ops.ne({0}, {1})",
}
_QUOT = "{0} / ({1} * {1} + 0.5)"
_BINARY_GUARD = {
    "maximum": "np.abs({0} - {1}).min() > M", "minimum": "np.abs({0} - {1}).min() > M",
    "floor_divide": f"_frac_far({_QUOT})", "remainder": f"_frac_far({_QUOT})",
    "atan2": "(np.abs({0}) + np.maximum({1}, 0)).min() > 0.2",
    **{c: "np.abs({0} - {1}).min() > M" for c in ("lt", "le", "gt", "ge", "eq", "ne")},
}

_BINARY_EXPR |= SPECIAL_BINARY_EXPR
_BINARY_GUARD |= SPECIAL_BINARY_GUARD


@template(*_BINARY_EXPR)
def _binary(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    if name in ("eq", "ne") and rng.random() < 0.5:  # equal operands: a true comparison
        return Instr(name, _BINARY_EXPR[name], (i, i))
    j = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, np.shape(vals[i])))
    return Instr(name, _BINARY_EXPR[name], (i, j), _BINARY_GUARD.get(name, "True"))


@template("logical_and", "logical_or", "logical_xor")
def _logical(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, "b")
    if i is None:
        return None
    j = _pick(rng, vals, kinds, "b", lambda s: _bcast(s, np.shape(vals[i])))
    return Instr(name, f"ops.{name}({{0}}, {{1}})", (i, j))


@template("select")
def _select(name, rng, vals, kinds, dt):
    c = _pick(rng, vals, kinds, "b")
    if c is None:
        return None
    sc = np.shape(vals[c])
    a = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, sc))
    b = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, sc) and _bcast(s, np.shape(vals[a])))
    return Instr(name, "ops.select({0}, {1}, {2})", (c, a, b))


@template("clamp")
def _clamp(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    j = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, np.shape(vals[i])))
    sj = np.broadcast_shapes(np.shape(vals[i]), np.shape(vals[j]))
    k = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, sj))
    return Instr(name, "ops.clamp({0}, ops.sub({1}, 0.5), ops.add({2}, 0.5))", (i, j, k),
                 "(np.abs({0} - {1} + 0.5).min() > M) & (np.abs({0} - {2} - 0.5).min() > M)"
                 " & (np.abs({1} - {2} - 1.0).min() > M)")


def _axes(rng, ndim):
    n = int(rng.integers(1, ndim + 1))
    return tuple(sorted(int(a) for a in rng.choice(ndim, n, replace=False)))


@template("reduce_sum", "reduce_max", "reduce_min")
def _reduce(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    axes = _axes(rng, np.ndim(vals[i]))
    guard = "True" if name == "reduce_sum" else f"_ties({{0}}, {axes})"
    return Instr(name, f"ops.{name}({{0}}, axes={axes})", (i,), guard)


@template("argmax", "argmin")
def _argreduce(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    axis = int(rng.integers(np.ndim(vals[i])))
    return Instr(name, f"ops.{name}({{0}}, axis={axis})", (i,), f"_ties({{0}}, ({axis},))")


@template("cumsum")
def _cumsum(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    return Instr(name, f"ops.cumsum({{0}}, axis={int(rng.integers(np.ndim(vals[i])))})", (i,))


@template("iota")
def _iota(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    n = (np.shape(vals[i]) or (1,))[-1]
    return Instr(name, f"ops.mul({{0}}, ops.add(ops.iota(n={n}, dtype={dt!r}), 0.5))", (i,))


def _reshape_targets(shape):
    size = int(np.prod(shape))
    options = {12: [(12,), (4, 3), (2, 6), (2, 2, 3)], 8: [(8,), (2, 4), (4, 2)],
               4: [(4,), (2, 2), (1, 4), (4, 1)], 3: [(3,), (3, 1), (1, 3)],
               1: [(), (1,), (1, 1)], 24: [(24,), (4, 6), (2, 3, 4)],
               6: [(6,), (2, 3)], 2: [(2,), (2, 1)]}.get(size, [(size,)])
    return [t for t in options if t != tuple(shape)] or [(size,)]


@template("reshape")
def _reshape(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    targets = _reshape_targets(np.shape(vals[i]))
    shape = targets[int(rng.integers(len(targets)))]
    return Instr(name, f"ops.reshape({{0}}, shape={shape})", (i,))


@template("transpose")
def _transpose(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 1)
    if i is None:
        return None
    perm = tuple(int(p) for p in rng.permutation(np.ndim(vals[i])))
    return Instr(name, f"ops.transpose({{0}}, perm={perm})", (i,))


@template("broadcast_to")
def _broadcast_to(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    s = np.shape(vals[i])
    shape = tuple(3 if d == 1 and rng.random() < 0.7 else d for d in s)
    if rng.random() < 0.5 or shape == s:
        shape = (2, *shape)
    return Instr(name, f"ops.broadcast_to({{0}}, shape={shape})", (i,))


def _random_slice(rng, shape):
    starts, stops, steps = [], [], []
    for d in shape:
        step = int(rng.choice([1, 1, 2, -1]))
        if step > 0:
            a = int(rng.integers(0, d))
            b = int(rng.integers(a + 1, d + 1))
        else:
            a = int(rng.integers(0, d))
            b = int(rng.integers(-1, a))
        starts.append(a)
        stops.append(b)
        steps.append(step)
    out = tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps))
    return tuple(starts), tuple(stops), tuple(steps), out


@template("slice")
def _slice(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    a, b, c, _ = _random_slice(rng, np.shape(vals[i]))
    return Instr(name, f"ops.slice({{0}}, starts={a}, stops={b}, steps={c})", (i,))


@template("update_slice")
def _update_slice(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    a, b, c, out = _random_slice(rng, np.shape(vals[i]))
    j = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, out) and
              np.broadcast_shapes(s, out) == out)
    return Instr(name, f"ops.update_slice({{0}}, ops.broadcast_to({{1}}, shape={out}), "
                       f"starts={a}, stops={b}, steps={c})", (i, j))


@template("concatenate")
def _concatenate(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    s = np.shape(vals[i])
    axis = int(rng.integers(len(s)))
    j = _pick(rng, vals, kinds, pred=lambda t: len(t) == len(s) and all(
        x == y for k, (x, y) in enumerate(zip(s, t)) if k != axis))
    return Instr(name, f"ops.concatenate({{0}}, {{1}}, axis={axis})", (i, j))


def _indices(rng, n, unique):
    if unique:
        m = int(rng.integers(1, n + 1))
        idx = rng.choice(n, m, replace=False)
    else:
        idx = rng.integers(0, n, int(rng.integers(1, 5)))
    idx = np.where(rng.random(idx.shape) < 0.3, idx - n, idx)  # some negative indices
    return [int(v) for v in idx]


@template("take")
def _take(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    axis = int(rng.integers(np.ndim(vals[i])))
    idx = _indices(rng, np.shape(vals[i])[axis], unique=False)
    return Instr(name, f"ops.take({{0}}, np.array({idx}), axis={axis})", (i,))


@template("index_add", "index_set")
def _index_update(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    s = np.shape(vals[i])
    axis = int(rng.integers(len(s)))
    idx = _indices(rng, s[axis], unique=name == "index_set")
    vs = (*s[:axis], len(idx), *s[axis + 1:])
    j = _pick(rng, vals, kinds, pred=lambda t: _bcast(t, vs) and np.broadcast_shapes(t, vs) == vs)
    return Instr(name, f"ops.{name}({{0}}, np.array({idx}), ops.broadcast_to({{1}}, "
                       f"shape={vs}), axis={axis})", (i, j))


@template("matmul")
def _matmul(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 1)
    if i is None:
        return None
    s = np.shape(vals[i])

    def fits(t):
        return len(t) > 1 and t[-2] == s[-1] and _bcast(s[:-2], t[:-2])

    j = _pick(rng, vals, kinds, pred=fits)
    if j is None or rng.random() < 0.3:
        perm = (*range(len(s) - 2), len(s) - 1, len(s) - 2)
        return Instr(name, f"ops.matmul({{0}}, ops.transpose({{0}}, perm={perm}))", (i,))
    return Instr(name, "ops.matmul({0}, {1})", (i, j))


_BRANCHES = [
    ("lambda p, q: ops.mul(ops.sin(p), q)", "lambda p, q: ops.sub(ops.cos(p), q)"),
    ("lambda p, q: ops.add(ops.tanh(ops.mul(p, q)), p)",
     "lambda p, q: ops.add(ops.mul(q, q), ops.mul(p, 0.25))"),
    ("lambda p, q: ops.exp(ops.tanh(ops.add(p, q)))", "lambda p, q: ops.add(p, ops.mul(q, 0.5))"),
]


@template("cond")
def _cond(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    j = _pick(rng, vals, kinds, pred=lambda s: _bcast(s, np.shape(vals[i])))
    t, f = _BRANCHES[int(rng.integers(len(_BRANCHES)))]
    if rng.random() < 0.5:
        t, f = f, t
    axes = tuple(range(np.ndim(vals[i])))
    return Instr(name, f"fg.cond(ops.gt(ops.reduce_sum({{0}}, axes={axes}), 0.0), {t}, {f}, "
                       "{0}, {1})", (i, j), "np.abs(np.sum({0})) > M")


@template("fori_loop")
def _fori(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    s = np.shape(vals[i])
    j = _pick(rng, vals, kinds, pred=lambda t: _bcast(s, t) and np.broadcast_shapes(s, t) == s)
    n = int(rng.integers(0, 4))
    return Instr(name, f"fg.fori_loop(0, {n}, lambda i, c: ops.add(ops.mul(ops.sin(c), 0.5), "
                       f"ops.mul({{1}}, ops.convert(i, dtype={dt!r}))), {{0}})", (i, j))


@template("scan")
def _scan(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds, pred=lambda s: len(s) > 0)
    if i is None:
        return None
    s = np.shape(vals[i])
    j = _pick(rng, vals, kinds, pred=lambda t: _bcast(s[1:], t) and
              np.broadcast_shapes(s[1:], t) == s[1:])
    part = int(rng.integers(2))  # the final carry, or the stacked per-step outputs
    reverse = bool(rng.random() < 0.3)
    return Instr(name, "fg.scan(lambda c, x: (ops.add(ops.mul(ops.tanh(c), 0.5), ops.sin(x)), "
                       "ops.mul(c, x)), ops.add(ops.mul(ops.reduce_sum({0}, axes=(0,)), 0.1), "
                       f"{{1}}), {{0}}, reverse={reverse})[{part}]", (i, j))


@template("while_loop")
def _while(name, rng, vals, kinds, dt):
    i = _pick(rng, vals, kinds)
    if i is None:
        return None
    s = np.shape(vals[i])
    j = _pick(rng, vals, kinds, pred=lambda t: _bcast(s, t) and np.broadcast_shapes(s, t) == s)
    axes = tuple(range(len(s)))
    # a traced trip count (the number of positive entries, at most 3): a while_loop
    trips = f"ops.minimum(ops.reduce_sum(ops.convert(ops.gt({{0}}, 0.0), dtype='i64'), " \
            f"axes={axes}), 3)"
    return Instr(name, f"fg.fori_loop(0, {trips}, lambda i, c: ops.add(ops.mul(ops.sin(c), "
                       f"0.5), {{1}}), {{0}})", (i, j),
                 "np.abs({0}).min(initial=1.0) > M")


@functools.lru_cache(maxsize=1024)
def program(seed: int) -> Program:
    """``generate(seed)``, made once per process: the tests that go over the default
    sample (each program's checks, the template coverage) share it. A Program is
    immutable."""
    return generate(seed)


def covered_ops() -> set[str]:
    """Op-table entries the templates draw (``fori_loop`` stands for ``scan``)."""
    return {n for n in TEMPLATES if n in OPS}


# --- the generator --------------------------------------------------------------------


def generate(seed: int, n_ops: tuple[int, int] = (3, 10)) -> Program:
    """The program of ``seed``: 3-10 instructions over 1-3 inputs (float32 for ~1 seed in 10)."""
    rng = np.random.default_rng(seed)
    dtype = "f32" if rng.random() < 0.1 else "f64"
    shapes = tuple(SHAPES[int(rng.integers(len(SHAPES)))] for _ in range(int(rng.integers(1, 4))))
    prog = Program(seed, dtype, shapes, ())
    vals = prog.values()
    kinds = [_kind(v) for v in vals]
    names = sorted(TEMPLATES)
    target = int(rng.integers(n_ops[0], n_ops[1] + 1))
    attempts = 0
    while len(prog.instrs) < target and attempts < 40 * target:
        attempts += 1
        ins = TEMPLATES[names[int(rng.integers(len(names)))]](rng, vals, kinds, dtype)
        if ins is None or None in ins.args:
            continue
        cand = replace(prog, instrs=(*prog.instrs, ins))
        try:
            new = evaluate(cand, prog.inputs())
        except Exception:
            continue
        out = new[-1]
        if not guard_holds(ins, new) or (out.dtype.kind == "f" and (
                not np.isfinite(out).all() or np.abs(out).max(initial=0) > MAX_MAGNITUDE)):
            continue
        prog, vals = cand, new
        kinds.append(_kind(out))
    return prog
