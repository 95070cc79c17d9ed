"""Op-table cases of the sorting ops (``fusegrad.ir.sort_ops``) for the coverage tests.

``sort_cases(Case, inputs, normal, const)``: interpreter/compiled/batching cases
(ties, NaNs, integers, every axis); ``sort_nondiff(NonDiffCase, inputs, normal)``:
the non-differentiable cases (the permutation, used as a weight, passes no gradient).
"""

from __future__ import annotations

import numpy as np

from fusegrad.ir import bind

_TIES = [[3.0, 1.0, 3.0, -2.0], [0.5, 0.5, np.nan, -0.0], [0.0, np.inf, -np.inf, 0.0]]


def sort_cases(Case, inputs, normal, const):
    return [
        Case("argsort", inputs(normal(3, 4)), {"axis": 1}, "axis1"),
        Case("argsort", inputs(normal(3, 4)), {"axis": 0}, "axis0"),
        Case("argsort", inputs(normal(2, 3, 4)), {"axis": -2}, "axis-2"),
        Case("argsort", inputs(const(_TIES)), {"axis": -1}, "ties-nan"),
        Case("argsort", inputs(const([[4, 1, 4, -7, 1], [0, 0, 2, 2, 1]])), {"axis": 1}, "i64"),
        Case("argsort", inputs(const(np.array([2.5, -1.0, 2.5], np.float32))), {"axis": 0},
             "f32"),
    ]


def sort_nondiff(NonDiffCase, inputs, normal):
    return {
        "argsort": NonDiffCase(
            lambda x: bind("argsort", x, axis=1), inputs(normal(3, 4))
        ),
    }


__all__ = ["sort_cases", "sort_nondiff"]
