"""Op-table cases of ``conv`` for the shared rule and lowering tests.

``conv_cases(Case, inputs, normal)`` returns cases that each trace to exactly one
``conv``: 1-d, 2-d and 3-d, strides, asymmetric and negative (cropping) padding,
input and kernel dilation, groups, and the shapes whose strided windows leave
input elements unread.
"""

from __future__ import annotations


def _attrs(nd, stride=None, padding=None, lhs=None, rhs=None, groups=1):
    return {"stride": tuple(stride or (1,) * nd), "padding": tuple(padding or (0,) * (2 * nd)),
            "lhs_dilation": tuple(lhs or (1,) * nd), "rhs_dilation": tuple(rhs or (1,) * nd),
            "groups": groups}


def conv_cases(Case, inputs, normal):
    return [
        Case("conv", inputs(normal(2, 3, 7), normal(4, 3, 3)), _attrs(1), "1d"),
        Case("conv", inputs(normal(2, 4, 9), normal(6, 2, 2)),
             _attrs(1, (2,), (1, 2), None, (2,), 2), "1d-stride-pad-dilate-groups"),
        Case("conv", inputs(normal(2, 3, 5, 6), normal(4, 3, 3, 2)), _attrs(2), "2d"),
        Case("conv", inputs(normal(2, 2, 7, 6), normal(3, 2, 3, 3)),
             _attrs(2, (2, 3), (1, 1, 0, 2)), "2d-stride-pad"),
        Case("conv", inputs(normal(1, 4, 6, 5), normal(4, 2, 2, 2)),
             _attrs(2, (1, 2), (1, 0, 0, 1), None, (2, 1), 2), "2d-dilate-groups"),
        Case("conv", inputs(normal(2, 2, 3, 4), normal(2, 2, 2, 2)),
             _attrs(2, (1, 1), (1, -1, 0, 1), (2, 2)), "2d-lhs-dilation-crop"),
        Case("conv", inputs(normal(1, 2, 4, 3, 4), normal(2, 1, 2, 2, 3)),
             _attrs(3, (2, 1, 1), (0, 1, 1, 0, 1, 1), None, None, 2), "3d"),
    ]
