"""Contractions of ``fusegrad.numpy``: dot, inner, outer, tensordot, einsum.

All of them reduce to the one contraction primitive, batched ``matmul``, with
transposes and reshapes around it.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import array as A
from ..ir import ops
from ..ir.array import implements
from ..ir.bind import aval
from ..ir.errors import ShapeError

__all__ = ["dot", "einsum", "inner", "outer", "tensordot", "vdot"]


def _shape(x):
    return aval(x).shape


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """Sum over ``axes`` of ``a`` and ``b`` (NumPy's conventions), as one matmul."""
    a, b = A.asarray(a), A.asarray(b)
    sa, sb = _shape(a), _shape(b)
    if isinstance(axes, int):
        ax_a, ax_b = list(range(len(sa) - axes, len(sa))), list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
    ax_a = [i % len(sa) for i in ax_a]
    ax_b = [i % len(sb) for i in ax_b]
    for i, j in zip(ax_a, ax_b):
        if sa[i] != sb[j]:
            raise ShapeError(f"tensordot: shape mismatch for sum: axis {i} of {sa} has size "
                             f"{sa[i]}, axis {j} of {sb} has size {sb[j]}")
    free_a = [i for i in range(len(sa)) if i not in ax_a]
    free_b = [j for j in range(len(sb)) if j not in ax_b]
    k = math.prod(sa[i] for i in ax_a)
    m = math.prod(sa[i] for i in free_a)
    n = math.prod(sb[j] for j in free_b)
    a2 = A.reshape(A.transpose(a, free_a + ax_a), (m, k))
    b2 = A.reshape(A.transpose(b, ax_b + free_b), (k, n))
    out = ops.matmul(a2, b2)
    return A.reshape(out, tuple(sa[i] for i in free_a) + tuple(sb[j] for j in free_b))


@implements(np.dot)
def dot(a, b):
    """NumPy's ``dot``: scalars multiply, otherwise sum over a's last and b's second-to-last."""
    a, b = A.asarray(a), A.asarray(b)
    if not _shape(a) or not _shape(b):
        return ops.mul(a, b)
    if len(_shape(b)) <= 2:
        return A.matmul(a, b)
    return tensordot(a, b, ([-1], [-2]))


@implements(np.inner)
def inner(a, b):
    a, b = A.asarray(a), A.asarray(b)
    if not _shape(a) or not _shape(b):
        return ops.mul(a, b)
    return tensordot(a, b, ([-1], [-1]))


@implements(np.vdot)
def vdot(a, b):
    return dot(A.reshape(A.asarray(a), (-1,)), A.reshape(A.asarray(b), (-1,)))


@implements(np.outer)
def outer(a, b):
    a = A.reshape(A.asarray(a), (-1, 1))
    b = A.reshape(A.asarray(b), (1, -1))
    return ops.mul(a, b)


# --- einsum ------------------------------------------------------------------------


def _parse(subscripts: str, operands):
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        ins, out = spec.split("->")
    else:
        ins, out = spec, None
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operand subscripts for {len(operands)} operands")
    used = set(spec) - set(",->.")
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used)
    ell = ""  # the broadcast dimensions' labels; an operand's "..." takes the last ones
    fixed = []
    for t, x in zip(terms, operands):
        if "..." in t:
            n = len(_shape(x)) - (len(t) - 3)
            if n < 0:
                raise ShapeError(f"einsum: subscripts {t!r} name more axes than operand "
                                 f"shape {_shape(x)} has")
            if len(ell) < n:  # new leading labels: "..." dimensions align from the right
                ell = "".join(next(spare) for _ in range(n - len(ell))) + ell
            t = t.replace("...", ell[len(ell) - n:] if n else "")
        if len(t) != len(_shape(x)):
            raise ShapeError(f"einsum: subscripts {t!r} do not match operand shape {_shape(x)}")
        fixed.append(t)
    if out is None:
        counts = {c: "".join(fixed).count(c) for c in "".join(fixed)}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    elif "..." not in out and ell:
        raise ValueError("einsum: the operands have broadcast ('...') dimensions but the "
                         f"output subscripts {out!r} have no '...' to put them in")
    else:
        out = out.replace("...", ell)
    return fixed, out


def _diagonal(x, labels: str):
    """Take the diagonal over repeated labels within one operand (``ii->i``)."""
    while len(set(labels)) != len(labels):
        c = next(ch for ch in labels if labels.count(ch) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        s = _shape(x)
        if s[i] != s[j]:
            raise ShapeError(f"einsum: repeated label {c!r} with sizes {s[i]} and {s[j]}")
        rest = [k for k in range(len(s)) if k not in (i, j)]
        moved = A.reshape(A.transpose(x, rest + [i, j]), tuple(s[k] for k in rest) + (s[i] ** 2,))
        x = ops.take(moved, np.arange(s[i]) * (s[i] + 1), axis=len(rest))
        labels = "".join(labels[k] for k in rest) + c
    return x, labels


def _sum_out(x, labels: str, keep: set):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if axes:
        x = ops.reduce_sum(x, axes=axes)
        labels = "".join(c for c in labels if c in keep)
    return x, labels


def _contract(a, la, b, lb, keep: set):
    """Contract two operands; the result keeps the labels in ``keep``."""
    sizes = dict(zip(la, _shape(a))) | dict(zip(lb, _shape(b)))
    for c in set(la) & set(lb):
        da, db = _shape(a)[la.index(c)], _shape(b)[lb.index(c)]
        if da != db and 1 not in (da, db):
            raise ShapeError(f"einsum: label {c!r} has sizes {da} and {db}")
        sizes[c] = max(da, db)
    batch = [c for c in la if c in lb and c in keep]
    contr = [c for c in la if c in lb and c not in keep]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    a = A.transpose(a, [la.index(c) for c in batch + free_a + contr])
    b = A.transpose(b, [lb.index(c) for c in batch + contr + free_b])
    bs = tuple(sizes[c] for c in batch)
    a = A.broadcast_to(a, bs + _shape(a)[len(batch):])
    b = A.broadcast_to(b, bs + _shape(b)[len(batch):])
    m = math.prod(sizes[c] for c in free_a)
    k = math.prod(sizes[c] for c in contr)
    n = math.prod(sizes[c] for c in free_b)
    out = ops.matmul(A.reshape(a, bs + (m, k)), A.reshape(b, bs + (k, n)))
    labels = "".join(batch + free_a + free_b)
    return A.reshape(out, tuple(sizes[c] for c in labels)), labels


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_text(sub) -> str:
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, int | np.integer) and 0 <= s < len(_LETTERS):
            out.append(_LETTERS[int(s)])
        else:
            raise ValueError(f"einsum: sublist labels must be integers in [0, 52) or ..., "
                             f"got {s!r}")
    return "".join(out)


def _from_sublists(args):
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as ``("ab,bc->ac", a, b)``."""
    out = _sublist_text(args[-1]) if len(args) % 2 else None
    args = args[:-1] if len(args) % 2 else args
    operands, subs = list(args[0::2]), [_sublist_text(s) for s in args[1::2]]
    spec = ",".join(subs) + ("" if out is None else "->" + out)
    return spec, operands


@implements(np.einsum)
def einsum(subscripts, *operands, optimize=None, order=None, **unsupported):
    """Einstein summation, contracted pairwise left to right through ``matmul``.

    ``subscripts`` is a string, or the operands alternate with sublists of integer
    labels (NumPy's second form). ``optimize`` and ``order`` do not change values and
    are ignored.
    """
    A.refuse("einsum", unsupported)
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists((subscripts, *operands))
    operands = [A.asarray(x) for x in operands]
    terms, out = _parse(subscripts, operands)
    xs = []
    for i, (x, t) in enumerate(zip(operands, terms)):
        x, t = _diagonal(x, t)
        later = set(out) | set("".join(terms[:i] + terms[i + 1:]))
        xs.append(_sum_out(x, t, later))
    acc, la = xs[0]
    for i in range(1, len(xs)):
        b, lb = xs[i]
        keep = set(out) | set("".join(t for _, t in xs[i + 1:]))
        acc, la = _contract(acc, la, b, lb, keep)
    acc, la = _sum_out(acc, la, set(out))
    if sorted(la) != sorted(out):
        raise ValueError(f"einsum: output subscripts {out!r} name labels not in the inputs")
    return A.transpose(acc, [la.index(c) for c in out])
