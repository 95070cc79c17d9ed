"""Rewrites of matrix products, added to ``simplify``'s ``REWRITES``.

Nested derivatives of a network are full of products that are not worth a GEMM, or
that are the same product seen through a transposition:

- a product with a contracted dimension of 1 is an outer product:
  ``matmul(a[m,1], b[1,n]) -> a * b`` (each element is one product, as in BLAS: exact);
- a product with one row or one column is a reduction of an elementwise product:
  ``matmul(a[m,k], b[k,1]) -> sum(a * b.T, axis 1)`` and
  ``matmul(a[1,k], b[k,n]) -> sum(a.T * b, axis 0)``; both fuse into the loops of
  their producers and consumers (the summation order is a loop's, not BLAS's: equal
  up to rounding); not where the matrix is a Function input multiplied both as it is
  and transposed (a generalised linear model's data: both products stay BLAS calls,
  the transposed one reading the stored matrix through gemm's transpose flag);
- a row-wise dot with a product by a transposed matrix moves the matrix to the other
  side: ``sum((a @ w.T) * f, axis=-1) == sum(a * (f @ w), axis=-1)`` (both are
  ``sum_jk a_ik w_jk f_ij``). The cofactor ``f`` is collected through a chain of
  ``add``/``sub``/``neg``/``mul`` ops the product reaches linearly (terms not
  involving it stay as they are), so ``sum(((a @ w.T) + c) * s * t, axis=-1)`` becomes
  ``sum(c * s * t, axis=-1) + sum(a * ((s * t) @ w), axis=-1)``. Forward-mode
  derivatives are products by ``w`` of tangents, reverse-mode ones by ``w.T`` of
  cotangents; in ``u'' = d/dx (du/dx)`` by reverse over reverse, this turns the
  reverse-mode products into forward-mode ones, which common-subexpression elimination
  then shares with the forward pass. It fires only where the product and every value
  on the chain have no other use (so no product is added) and the product's right
  operand is a ``transpose`` (so it never undoes itself). Equal up to rounding.
"""

from __future__ import annotations

from ..ir import Value
from .simplify import REWRITES, Rule

_LINEAR = ("add", "sub", "neg", "mul")


def _outer(b, op, emit):
    """matmul(a[m,1], c[1,n]) -> a * c."""
    a, c = b["a"], b["c"]
    if a.type.ndim != 2 or c.type.ndim != 2 or a.type.shape[1] != 1:
        return None
    return emit("mul", (a, c), {})


def _streamed(b, m: Value) -> bool:
    """Whether matrix ``m`` (or the matrix it transposes) is a Function input that is
    multiplied both as it is and transposed: ``X @ w`` and ``X.T @ r`` of a generalised
    linear model. Those products stay products (BLAS calls)."""
    producer, uses = b.get("_producer"), b.get("_uses")
    if producer is None or uses is None:
        return False
    op = producer(m)
    if op is not None and op.name == "transpose":
        m, op = op.operands[0], producer(op.operands[0])
    return op is None and uses.get(m, 0) >= 2


def _matvec(b, op, emit):
    """matmul(a[m,k], c[k,1]) -> reshape(sum(a * c[:, 0], axis=1), [m, 1])."""
    a, c = b["a"], b["c"]
    if a.type.ndim != 2 or c.type.ndim != 2 or c.type.shape[1] != 1 or a.type.shape[1] == 1:
        return None
    if _streamed(b, a):
        return None
    col = emit("reshape", (c,), {"shape": (c.type.shape[0],)})
    s = emit("reduce_sum", (emit("mul", (a, col), {}),), {"axes": (1,)})
    return emit("reshape", (s,), {"shape": op.results[0].type.shape})


def _vecmat(b, op, emit):
    """matmul(a[1,k], c[k,n]) -> reshape(sum(a.T * c, axis=0), [1, n])."""
    a, c = b["a"], b["c"]
    if a.type.ndim != 2 or c.type.ndim != 2 or a.type.shape[0] != 1 or a.type.shape[1] == 1:
        return None
    if _streamed(b, c):
        return None
    col = emit("reshape", (a,), {"shape": (a.type.shape[1], 1)})
    s = emit("reduce_sum", (emit("mul", (col, c), {}),), {"axes": (0,)})
    return emit("reshape", (s,), {"shape": op.results[0].type.shape})


class _RowDot:
    """The state of one ``_row_dot`` attempt: the chain from the reduced value down to
    the product, found by ``find``, then undone by ``rest`` and ``coef``."""

    def __init__(self, b, emit, shape):
        self.producer, self.uses, self.emit, self.shape = b["_producer"], b["_uses"], emit, shape
        self.side: dict[Value, int] = {}  # chain value -> operand index leading to the product
        self.product: Value | None = None

    def single_use(self, v: Value) -> bool:
        return self.uses.get(v, 0) == 1 and v.type.shape == self.shape

    def find(self, v: Value) -> bool:
        op = self.producer(v)
        if op is None or not self.single_use(v):
            return False
        if op.name == "matmul":
            t = self.producer(op.operands[1])
            if t is not None and t.name == "transpose" and op.operands[0].type.ndim == 2:
                self.product = v
                return True
            return False
        if op.name not in _LINEAR or (op.name != "neg" and op.operands[0] is op.operands[1]):
            return False
        for i, u in enumerate(op.operands):
            if self.find(u):
                self.side[v] = i
                return True
        return False

    def full(self, v: Value) -> Value:
        if v.type.shape == self.shape:
            return v
        return self.emit("broadcast_to", (v,), {"shape": self.shape})

    def rest(self, v: Value) -> Value | None:
        """``v`` without its term linear in the product (None: nothing is left)."""
        if v is self.product:
            return None
        op = self.producer(v)
        i = self.side[v]
        r = self.rest(op.operands[i])
        if op.name == "neg":
            return None if r is None else self.emit("neg", (r,), {})
        other = op.operands[1 - i]
        if op.name == "mul":
            return None if r is None else self.emit("mul", _order(r, other, i), {})
        if r is None:
            if op.name == "sub" and i == 0:
                return self.full(self.emit("neg", (other,), {}))
            return self.full(other)
        return self.emit(op.name, _order(r, other, i), {})

    def coef(self, v: Value) -> tuple[Value | None, bool]:
        """``(f, negated)``: the term of ``v`` linear in the product is ``+-product * f``
        (``f`` None: 1)."""
        if v is self.product:
            return None, False
        op = self.producer(v)
        i = self.side[v]
        f, neg = self.coef(op.operands[i])
        if op.name == "neg" or (op.name == "sub" and i == 1):
            return f, not neg
        if op.name == "mul":
            other = op.operands[1 - i]
            return (other if f is None else self.emit("mul", (f, other), {})), neg
        return f, neg


def _order(r, other, i):
    return (r, other) if i == 0 else (other, r)


def _row_dot(b, op, emit):
    """sum(F(a @ transpose(w)), axis=-1) with F linear in the product -> see the module doc."""
    x = b["x"]
    uses = b.get("_uses")
    if uses is None or x.type.ndim != 2 or tuple(op.attrs["axes"]) != (1,):
        return None
    if not x.type.is_inexact:
        return None
    rd = _RowDot(b, emit, x.type.shape)
    if not rd.find(x):
        return None
    prod_op = rd.producer(rd.product)
    a, t = prod_op.operands
    w = rd.producer(t).operands[0]
    if w.type.ndim != 2:
        return None
    f, neg = rd.coef(x)
    if f is None:  # sum(a @ w.T, -1): nothing to share, the product stays
        return None
    fw = emit("matmul", (rd.full(f), w), {})
    term = emit("reduce_sum", (emit("mul", (a, fw), {}),), {"axes": (1,)})
    r = rd.rest(x)
    if r is None:
        return emit("neg", (term,), {}) if neg else term
    rest = emit("reduce_sum", (r,), {"axes": (1,)})
    return emit("sub" if neg else "add", (rest, term), {})


MATMUL_REWRITES: list[Rule] = [
    Rule(("matmul", "a", "c"), _outer),             # a[m,1] @ c[1,n] -> a * c
    Rule(("matmul", "a", "c"), _matvec),            # a[m,k] @ c[k,1] -> sum(a * c.T, 1)
    Rule(("matmul", "a", "c"), _vecmat),            # a[1,k] @ c[k,n] -> sum(a.T * c, 0)
    Rule(("reduce_sum", "x"), _row_dot),            # sum((a @ w.T) * f, -1) -> sum(a * (f @ w), -1)
]  # fmt: skip

REWRITES.extend(MATMUL_REWRITES)

__all__ = ["MATMUL_REWRITES"]
