"""Op-table cases of ``count`` (an element count as a float scalar), for the shared rule and
lowering tests: ``count_nondiff(NonDiffCase, inputs, normal)`` is its case showing that no
gradient flows through it, ``count_cases(Case, inputs)`` its interpreter/compiled cases."""

from __future__ import annotations

from fusegrad.ir import bind


def count_nondiff(NonDiffCase, inputs, normal) -> dict:
    return {"count": NonDiffCase(lambda x: bind("count", n=12, dtype="f64"),
                                 inputs(normal(3, 4)))}


def count_cases(Case, inputs) -> list:
    return [
        Case("count", inputs(), {"n": 0, "dtype": "f64"}, "empty"),
        Case("count", inputs(), {"n": 7, "dtype": "f32"}, "f32"),
        Case("count", inputs(), {"n": 2**40 + 1, "dtype": "f64"}, "f64"),  # exact in f64
    ]


__all__ = ["count_cases", "count_nondiff"]
