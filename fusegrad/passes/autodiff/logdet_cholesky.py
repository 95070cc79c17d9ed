"""Before reverse mode: ``slogdet(K)`` from an existing ``L = cholesky(K)`` of a symmetric ``K``.

A program that factors ``K`` by Cholesky and also takes ``slogdet(K)`` (a Gaussian
log-likelihood) pays for an LU factorisation forwards and a full inverse backwards
(``slogdet``'s cotangent is ``glog * inv(K).T``). When ``K`` is symmetric, a successful
``cholesky`` (it reads ``K``'s lower triangle) proves it positive definite, and
``slogdet(K) = (1, 2 * sum(log(diag(L))))``: the gradient then flows through the
Cholesky factor, whose VJP the program computes anyway.

The rewrite must keep every derivative exact, so ``K`` has to be symmetric *as a
function of the differentiated inputs*, not merely at the point: the two forms agree
on symmetric matrices only, and so do their derivatives along symmetric directions.
``symmetry`` proves it structurally from the ops that build ``K`` (``SYMMETRIC``):

- an elementwise op of symmetric operands and per-matrix scalars (broadcasting);
- a commutative elementwise op of a column and a row of the same vector
  (``u[:, None] + u[None, :]``), or of ``x`` and ``x.T``;
- ``x @ x.T`` and ``x.T @ x``; a transpose or broadcast of a symmetric matrix.

A value no rule proves but that does not depend on the differentiated inputs (a
captured constant such as ``np.eye(n)``, a data matrix) is checked at run time:
``all(c == c.T)``. The rewritten ``slogdet`` is then a ``cond`` on those checks whose
other branch is the original ``slogdet`` (NaNs fail the check, so they keep NumPy's
behaviour). A ``cholesky`` that fails raises as before: it still runs, first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ir import Function, Value, bind, ops
from ...ir.bind import aval as _type
from ...ir.location import at
from ...ir.matrix import T, diag
from ...ir.optable import OPS
from ...ir.types import TensorType, dtype_name
from ...tracer import Trace, trace_pytree

#: commutative elementwise ops: ``op(x, x.T)`` is symmetric
COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "eq", "ne", "logical_and",
                         "logical_or", "logical_xor", "hypot"})


def _square(t: TensorType) -> bool:
    return t.ndim >= 2 and t.shape[-1] == t.shape[-2]


def _swaps_last(perm) -> bool | None:
    """True if ``perm`` swaps the last two axes, False if it keeps them, None otherwise."""
    n = len(perm)
    if n < 2:
        return None
    tail = tuple(perm[-2:])
    if tail == (n - 1, n - 2):
        return True
    if tail == (n - 2, n - 1):
        return False
    return None


class _Prover:
    """``symmetric(v)``: proves ``v``'s matrices symmetric, collecting the inactive values
    that must be checked at run time; None if it cannot."""

    def __init__(self, fn: Function, active: set):
        self.producer = {r: op for op in fn.ops for r in op.results}
        self.active = active
        self.memo: dict[Value, frozenset | None] = {}

    def transpose_of(self, a: Value, b: Value) -> bool:
        """``b`` is ``a`` with its last two axes swapped (or the other way round)."""
        for x, y in ((a, b), (b, a)):
            op = self.producer.get(y)
            if op is not None and op.name == "transpose" and op.operands[0] is x and (
                    _swaps_last(op.attrs["perm"])) and tuple(op.attrs["perm"][:-2]) == tuple(
                    range(len(op.attrs["perm"]) - 2)):
                return True
        return False

    def mirror(self, a: Value, b: Value) -> bool:
        """``a`` and ``b`` broadcast to ``M`` and ``M.T``: ``u[..., :, None]`` and
        ``u[..., None, :]`` of one vector stack ``u``, or ``x`` and ``x.T``."""
        if self.transpose_of(a, b):
            return True
        pa, pb = self.producer.get(a), self.producer.get(b)
        if pa is None or pb is None or pa.name != "reshape" or pb.name != "reshape":
            return False
        u = pa.operands[0]
        if pb.operands[0] is not u or u.type.ndim < 1:
            return False
        *batch, n = u.type.shape
        return (a.type.shape == (*batch, n, 1) and b.type.shape == (*batch, 1, n)) or (
            a.type.shape == (*batch, 1, n) and b.type.shape == (*batch, n, 1))

    def symmetric(self, v: Value) -> frozenset | None:
        if v not in self.memo:
            self.memo[v] = None  # no cycles in SSA; guards re-entry all the same
            self.memo[v] = self._prove(v)
        return self.memo[v]

    def _prove(self, v: Value) -> frozenset | None:
        if not _square(v.type):
            return None
        op = self.producer.get(v)
        proof = None
        if op is not None:
            rule = SYMMETRIC.get(op.name) or SYMMETRIC.get(OPS[op.name].kind)
            proof = rule(self, op, v) if rule is not None else None
        if proof is None and v not in self.active:
            return frozenset({v})  # checked at run time
        return proof

    def operand(self, x: Value, out: TensorType) -> frozenset | None:
        """An operand of an elementwise op with result ``out``: a per-matrix scalar
        (its last two axes broadcast from 1 x 1) or a symmetric matrix."""
        shape = (1,) * max(0, out.ndim - x.type.ndim) + x.type.shape
        if shape[-2:] == (1, 1):
            return frozenset()
        if shape[-2:] != out.shape[-2:]:
            return None
        return self.symmetric(x)


def _all(proofs) -> frozenset | None:
    out = frozenset()
    for p in proofs:
        if p is None:
            return None
        out |= p
    return out


def _elementwise(pr: _Prover, op, v) -> frozenset | None:
    if op.name in COMMUTATIVE and len(op.operands) == 2 and pr.mirror(*op.operands):
        return frozenset()
    return _all(pr.operand(x, v.type) for x in op.operands)


def _matmul(pr: _Prover, op, v) -> frozenset | None:
    a, b = op.operands
    return frozenset() if pr.transpose_of(a, b) else None


def _transpose(pr: _Prover, op, v) -> frozenset | None:
    if _swaps_last(op.attrs["perm"]) is None:
        return None
    return pr.symmetric(op.operands[0])


def _broadcast(pr: _Prover, op, v) -> frozenset | None:
    return pr.operand(op.operands[0], v.type)


#: how each op (by name, else by kind) proves its result symmetric: ``(prover, op,
#: result) -> frozenset of values to check at run time``, or None
SYMMETRIC = {
    "elementwise": _elementwise,
    "matmul": _matmul,
    "transpose": _transpose,
    "broadcast_to": _broadcast,
}


def _active(fn: Function, wrt: Sequence[int]) -> set:
    """Values that depend on the parameters ``wrt`` (through any op)."""
    active = {fn.params[i] for i in wrt}
    for op in fn.ops:
        if any(v in active for v in op.operands):
            active.update(op.results)
    return active


def _plan(fn: Function, wrt: Sequence[int]) -> dict:
    """``{slogdet op: (cholesky result, values to check)}`` for the slogdets to rewrite: a
    ``cholesky`` of ``K`` (or of ``K.T``, the same matrix once ``K`` is symmetric) comes
    earlier in the program."""
    producer = {r: op for op in fn.ops for r in op.results}
    factors: dict[Value, Value] = {}  # K -> L, for the cholesky ops seen so far
    plan: dict = {}
    prover = None
    for op in fn.ops:
        if op.name == "cholesky":
            (k,), (lo,) = op.operands, op.results
            factors.setdefault(k, lo)
            src = producer.get(k)
            if src is not None and src.name == "transpose" and _swaps_last(
                    src.attrs["perm"]) and tuple(src.attrs["perm"][:-2]) == tuple(
                    range(k.type.ndim - 2)):
                factors.setdefault(src.operands[0], lo)
        elif op.name == "slogdet" and op.operands[0] in factors:
            if prover is None:
                prover = _Prover(fn, _active(fn, wrt))
            k = op.operands[0]
            proof = prover.symmetric(k)
            if proof is not None:
                plan[op] = (factors[k], tuple(proof))
    return plan


def _from_factor(lo, k):
    """``(1, 2 * sum(log(diag(L))))`` over each matrix of the stack."""
    t = _type(lo)
    batch = t.shape[:-2]
    one = ops.constant(value=1.0, dtype=dtype_name(t.dtype))
    sign = ops.broadcast_to(one, shape=batch) if batch else one
    return sign, 2.0 * ops.reduce_sum(ops.log(diag(lo)), axes=(t.ndim - 2,))


def _is_symmetric(c):
    """Scalar bool: every matrix of ``c`` equals its transpose (False if any is NaN)."""
    n = _type(c).ndim
    bad = ops.convert(ops.ne(c, T(c)), dtype="i64")
    return ops.eq(ops.reduce_sum(bad, axes=tuple(range(n))), 0)


def _logdet(lo, k, checks):
    if not checks:
        return _from_factor(lo, k)
    pred = None
    for c in checks:
        p = _is_symmetric(c)
        pred = p if pred is None else ops.logical_and(pred, p)
    types = (_type(lo), _type(k))
    yes = trace_pytree(lambda a, b: _from_factor(a, b), types, name="logdet_cholesky")
    no = trace_pytree(lambda a, b: tuple(ops.slogdet(b)), types, name="logdet_lu")
    return tuple(ops.cond(pred, lo, k, regions=(yes.function, no.function)))


def logdet_via_cholesky(fn: Function, wrt: Sequence[int]) -> Function:
    """``fn`` with each ``slogdet(K)`` that ``_plan`` allows computed from the Cholesky
    factor of ``K`` (see the module's doc); ``fn`` itself when there is none."""
    plan = _plan(fn, wrt)
    if not plan:
        return fn
    with Trace(fn.name) as t:
        env = {p: t.new_arg(p.type, p.hint) for p in fn.params}
        for op in fn.ops:
            with at(op.loc):
                if op in plan:
                    lo, checks = plan[op]
                    out = _logdet(env[lo], env[op.operands[0]], [env[c] for c in checks])
                else:
                    out = bind(op.name, *(env[v] for v in op.operands), regions=op.regions,
                               **op.attrs)
            env.update(zip(op.results, out if len(op.results) > 1 else (out,)))
        return t.builder.build([t.to_value(t.wrap(env[r])) for r in fn.results])
