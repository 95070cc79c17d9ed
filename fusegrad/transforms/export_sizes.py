"""The sizes table ``d`` of a generated module, as expressions of its arguments' shapes.

A generated entry reads every size other than 1 (loop extents, shapes, slice
bounds) from the int64 table ``d``, which the code generator fills with the
concrete sizes of one trace. Code exported to Numba (``transforms.export``) must
build ``d`` itself, inside compiled code, for any argument shapes of the example's
rank: this module finds how each entry depends on the shapes.

Method: the distinct argument extents other than 0 and 1 are the *classes* (extents
equal in the example are taken to be the same size: the function may need them
equal, as a matrix product does). The function is traced again at six other
sizes per class; if every trace generates the same source, each entry of ``d`` is
fitted, exactly over the seven traces, as ``a1 * m1 + a2 * m2 + b`` (one or two
terms) with ``m`` products of classes (degree at most 3), ``a`` fractions with a
small denominator and ``b`` an integer, or as one term rounded down,
``a * m2 * ((p * n + c) // q) + b`` with ``n`` a class and ``m2`` a product of classes
or 1 (a strided slice has ``(n + 1) // 2`` elements, a real FFT's result ``n // 2 + 1``,
``rows`` of it take ``16 * rows * ((n + 2) // 2)`` bytes). Extents of 0
or 1 stay fixed (they decide broadcasting and are written into the source).
When the traces differ (the structure depends on the sizes) or an entry fits no
such form, the export is for the example's shapes only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

#: how a class's extent is changed in each extra trace: ``c -> k * c + j``
_PROBES = ((2, 1), (3, 0), (4, 3), (5, 2), (3, 7), (7, 4))
_MAX_CLASSES = 6
_MAX_DEN = 8


@dataclass(frozen=True)
class SizeRule:
    """How to compute the sizes table from argument shapes.

    ``classes[j]`` is ``(arg, axis)`` of the first extent of class ``j``;
    ``tied`` lists ``(arg, axis, j)`` for every other extent of that class (must be
    equal at run time); ``fixed`` lists ``(arg, axis, n)`` extents that must be ``n``
    (0 or 1, or every extent when ``generic`` is false); ``entries[k]`` is
    ``(terms, b)``: ``d[k] = sum(mult * outer * ((num * inner + c) // den)) + b`` over
    the ``(num, den, exponents, c, mult, outer exponents)`` of ``terms``, ``inner`` and
    ``outer`` the products ``prod(class_j ** e_j)`` of their exponents.
    """

    generic: bool
    classes: tuple[tuple[int, int], ...]
    tied: tuple[tuple[int, int, int], ...]
    fixed: tuple[tuple[int, int, int], ...]
    entries: tuple[tuple[tuple[tuple[int, int, tuple[int, ...], int], ...], int], ...]

    def expression(self, k: int, name: Callable[[int], str]) -> str:
        """Python text for ``d[k]``; ``name(j)`` is the variable holding class ``j``."""
        terms, b = self.entries[k]
        parts = []
        for num, den, exps, c, mult, outer in terms:
            term = " * ".join([*([str(num)] if num != 1 else []), *_names(exps, name)])
            inner = f"{term} + {c}" if c else term
            part = f"({inner}) // {den}" if den != 1 else term
            factors = [*([str(mult)] if mult != 1 else []), *_names(outer, name)]
            parts.append(" * ".join([*factors, f"({part})"]) if factors else part)
        if b or not parts:
            parts.append(str(b))
        return " + ".join(parts)

    def evaluate(self, shapes) -> list[int]:
        """The sizes table for argument ``shapes`` (a check of the rule, used by tests)."""
        vals = [shapes[a][ax] for a, ax in self.classes]
        return [_apply(rule, vals) for rule in self.entries]


def _names(exps, name) -> list[str]:
    return [name(j) for j, e in enumerate(exps) for _ in range(e)]


def fit(build: Callable, shapes: list[tuple[int, ...]]) -> tuple[str, SizeRule]:
    """``(source, rule)`` for arguments of ``shapes``; ``build(shapes)`` returns the
    generated ``(source, dims)`` of the function traced at those shapes."""
    source, dims = build(shapes)
    classes = sorted({n for s in shapes for n in s if n > 1})
    fixed_only = _fixed_rule(shapes, dims)
    if not classes or len(classes) > _MAX_CLASSES:
        return source, fixed_only if classes else _generic_const(shapes, dims)
    points = [(classes, dims)]
    for k, j in _PROBES:
        mapping = {c: k * c + j for c in classes}
        probe = [tuple(mapping.get(n, n) for n in s) for s in shapes]
        try:
            src, d = build(probe)
        except Exception:  # the function refuses other sizes: keep the example's
            return source, fixed_only
        if src != source or len(d) != len(dims):
            return source, fixed_only
        points.append(([mapping[c] for c in classes], d))
    entries = []
    for idx in range(len(dims)):
        found = _fit_entry([p[0] for p in points], [p[1][idx] for p in points])
        if found is None:
            return source, fixed_only
        entries.append(found)
    first: dict[int, tuple[int, int]] = {}
    tied, fixed = [], []
    for a, s in enumerate(shapes):
        for ax, n in enumerate(s):
            if n <= 1:
                fixed.append((a, ax, n))
            elif n in first:
                tied.append((a, ax, classes.index(n)))
            else:
                first[n] = (a, ax)
    return source, SizeRule(True, tuple(first[c] for c in classes), tuple(tied), tuple(fixed),
                            tuple(entries))


def _generic_const(shapes, dims) -> SizeRule:
    """Every extent is 0 or 1: the table is constant."""
    fixed = tuple((a, ax, n) for a, s in enumerate(shapes) for ax, n in enumerate(s))
    return SizeRule(True, (), (), fixed, tuple(((), int(v)) for v in dims))


def _fixed_rule(shapes, dims) -> SizeRule:
    fixed = tuple((a, ax, n) for a, s in enumerate(shapes) for ax, n in enumerate(s))
    return SizeRule(False, (), (), fixed, tuple(((), int(v)) for v in dims))


def _monomials(k: int):
    """Exponent vectors over ``k`` classes of degree 1 to 3, lowest degree first."""
    vecs = [e for e in itertools.product(range(4), repeat=k) if 0 < sum(e) <= 3]
    return sorted(vecs, key=lambda e: (sum(e), [-x for x in e]))


def _value(vals, exps) -> int:
    m = 1
    for v, e in zip(vals, exps):
        m *= v ** e
    return m


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]):
    """The exact solution of a small square system, or None if it is singular."""
    n = len(rows)
    a = [[*r, y] for r, y in zip(rows, rhs)]
    for c in range(n):
        p = next((r for r in range(c, n) if a[r][c] != 0), None)
        if p is None:
            return None
        a[c], a[p] = a[p], a[c]
        for r in range(n):
            if r != c and a[r][c] != 0:
                f = a[r][c] / a[c][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [a[r][n] / a[r][r] for r in range(n)]


def _fit_entry(xs: list[list[int]], ys: list[int]):
    """``((num, den, exps, c, mult), ...), b)``: ``ys[t] == sum(mult * ((num * m_t + c) //
    den)) + b`` at every point ``t``, with one or two monomials ``m`` (the fewest that
    fit)."""
    if len(set(ys)) == 1:
        return ((), int(ys[0]))
    monos = _monomials(len(xs[0]))
    values = {e: [_value(v, e) for v in xs] for e in monos}
    for terms in itertools.chain(((e,) for e in monos), itertools.combinations(monos, 2)):
        k = len(terms) + 1
        rows = [[Fraction(values[e][t]) for e in terms] + [Fraction(1)] for t in range(k)]
        sol = _solve(rows, [Fraction(int(y)) for y in ys[:k]])
        if sol is None or sol[-1].denominator != 1 or any(
                c == 0 or c.denominator > _MAX_DEN for c in sol[:-1]):
            continue
        one = (0,) * len(xs[0])
        rule = (tuple((c.numerator, c.denominator, e, 0, 1, one) for c, e in zip(sol, terms)),
                int(sol[-1]))
        if all(_apply(rule, x) == y for x, y in zip(xs, ys)):
            return rule
    # one term rounded down: (n + 1) // 2, rows * (n // 2 + 1) (an exact solve misses it)
    return _fit_floor(xs, [int(y) for y in ys], monos)


def _fit_floor(xs: list[list[int]], ys: list[int], monos):
    """``(((num, den, e, c, mult, outer),), b)``: ``ys == mult * outer * ((num * e + c) //
    den) + b`` at every point (``e``, ``outer``: monomials over the classes ``xs``), or
    None."""
    one = (0,) * len(xs[0])
    for e in monos:  # (num * m + c) // den + b, num from the data
        ms = [_value(x, e) for x in xs]
        i = next((t for t in range(1, len(ms)) if ms[t] != ms[0]), None)
        for den in range(2, _MAX_DEN + 1) if i is not None else ():
            num = round((ys[i] - ys[0]) * den / (ms[i] - ms[0]))
            for c in range(den):
                rule = (((num, den, e, c, 1, one),), ys[0] - (num * ms[0] + c) // den)
                if num and all(_apply(rule, x) == y for x, y in zip(xs, ys)):
                    return rule
    outers = [one, *(o for o in monos if sum(o) <= 2)]
    for e in (o for o in monos if sum(o) == 1):  # mult * outer * ((num * n + c) // den) + b
        ms = [_value(x, e) for x in xs]
        for den, outer in itertools.product(range(2, _MAX_DEN + 1), outers):
            scale = [_value(x, outer) for x in xs]
            for num, c in itertools.product(range(1, den), range(2 * den + 1)):
                feat = [s * ((num * m + c) // den) for s, m in zip(scale, ms)]
                j = next((t for t in range(1, len(feat)) if feat[t] != feat[0]), None)
                if j is None or (ys[j] - ys[0]) % (feat[j] - feat[0]):
                    continue
                mult = (ys[j] - ys[0]) // (feat[j] - feat[0])
                rule = (((num, den, e, c, mult, outer),), ys[0] - mult * feat[0])
                if mult and all(_apply(rule, x) == y for x, y in zip(xs, ys)):
                    return rule
    return None


def _apply(rule, vals) -> int:
    """The entry ``rule`` gives for class values ``vals``."""
    terms, b = rule
    return sum(mult * _value(vals, outer) * ((num * _value(vals, e) + c) // den)
               for num, den, e, c, mult, outer in terms) + b
