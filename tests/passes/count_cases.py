"""Op-table cases of ``count`` (an element count as a float scalar), for the shared rule and
lowering tests: ``count_nondiff(NonDiffCase, inputs, normal)`` is its case showing that no
gradient flows through it, ``count_cases(Case, inputs)`` its interpreter/compiled cases."""

from __future__ import annotations

from fusegrad.ir import bind


def count_nondiff(NonDiffCase, inputs, normal) -> dict:
    return {"count": NonDiffCase(lambda x: bind("count", shape=(3, 4), axes=(0, 1), dtype="f64"),
                                 inputs(normal(3, 4)))}


def count_cases(Case, inputs) -> list:
    return [
        Case("count", inputs(), {"shape": (3, 0, 2), "axes": (1, 2), "dtype": "f64"}, "empty"),
        Case("count", inputs(), {"shape": (7, 5), "axes": (0,), "dtype": "f32"}, "f32"),
        Case("count", inputs(), {"shape": (2**20, 3, 2**20 + 1), "axes": (0, 2),
                                 "dtype": "f64"}, "f64"),  # 2**40 + 2**20: exact in f64
    ]


__all__ = ["count_cases", "count_nondiff"]
