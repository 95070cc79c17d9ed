"""``transforms.export_sizes``: sizes tables as expressions of the argument shapes."""

from __future__ import annotations

from fusegrad.transforms.export_sizes import fit


def _build(table):
    def build(shapes):
        (n, m), (k,) = shapes
        return "same source", table(n, m, k)
    return build


def test_products_offsets_and_halves_fit_and_generalise():
    def table(n, m, k):
        return [n * m - m, n, 1, 0, n // 2 + 3, m * m * k, 5, (n + 1) // 2, (2 * k + 2) // 3]

    source, rule = fit(_build(table), [(6, 3), (4,)])
    assert source == "same source" and rule.generic
    for shapes in ([(6, 3), (4,)], [(11, 2), (9,)], [(100, 37), (2,)], [(2, 2), (3,)]):
        assert rule.evaluate(shapes) == table(shapes[0][0], shapes[0][1], shapes[1][0])
    assert rule.expression(0, lambda j: f"c{j}").count("c") >= 2
    classes = {"c0": 3, "c1": 4, "c2": 6}  # in order of size: m, k, n
    assert [eval(rule.expression(i, lambda j: f"c{j}"), classes)
            for i in range(9)] == table(6, 3, 4)


def test_tied_and_fixed_extents_are_recorded():
    def build(shapes):
        (n, m), (k, one) = shapes
        return "s", [n * m, k * one]

    _, rule = fit(build, [(5, 3), (3, 1)])
    assert rule.generic
    assert rule.tied == ((1, 0, 0),)  # the second argument's axis 0 is class 0 (size 3)
    assert rule.fixed == ((1, 1, 1),)


def test_sources_that_change_with_the_sizes_fix_the_shapes():
    def build(shapes):
        (n,) = shapes[0]
        return f"unrolled {n} times", [n]

    _, rule = fit(build, [(4,)])
    assert not rule.generic and rule.fixed == ((0, 0, 4),)


def test_an_entry_without_a_simple_form_fixes_the_shapes():
    def build(shapes):
        (n,) = shapes[0]
        return "s", [n ** 5 + 1]

    _, rule = fit(build, [(4,)])
    assert not rule.generic
