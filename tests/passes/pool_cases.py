"""Op-table cases of the pooling ops for the shared rule and lowering tests.

``pool_cases(Case, inputs, normal)``: gradient cases (each traces to exactly one
op): 1-d, 2-d and 3-d pooled axes, extra leading axes, strides, dilation,
asymmetric padding and windows that overlap. ``pool_interpreter_cases(Case,
inputs, const)``: ``max_pool_argmax`` and the ties / NaN / -inf windows.
``pool_nondiff(NonDiffCase, inputs, normal)``: ``max_pool_argmax`` passes no gradient.
"""

from __future__ import annotations

import numpy as np

from fusegrad.ir import bind


def geo(kernel, strides=None, dilation=None, pad_lo=None, pad_hi=None):
    nd = len(kernel)
    return {"kernel": tuple(kernel), "strides": tuple(strides or kernel),
            "dilation": tuple(dilation or (1,) * nd), "pad_lo": tuple(pad_lo or (0,) * nd),
            "pad_hi": tuple(pad_hi or (0,) * nd)}


#: (label, input shape, geometry)
GEOMETRIES = [
    ("1d", (2, 3, 7), geo((3,), (2,), None, (1,), (1,))),
    ("2d", (2, 3, 6, 5), geo((2, 2))),
    ("2d-overlap-dilate-pad", (1, 2, 7, 6), geo((3, 2), (2, 1), (1, 2), (1, 0), (1, 1))),
    ("3d", (2, 5, 4, 5), geo((2, 2, 3), (1, 2, 1), None, (0, 1, 1), (1, 0, 1))),
]


def _out(shape, g):
    from fusegrad.ir.pool_ops import pool_out_shape

    nd = len(g["kernel"])
    return shape[:len(shape) - nd] + pool_out_shape(shape[len(shape) - nd:], **g)


def pool_cases(Case, inputs, normal):
    cases = []
    for label, shape, g in GEOMETRIES:
        out = _out(shape, g)
        cases += [
            Case("max_pool", inputs(normal(*shape)), g, label),
            Case("max_pool_grad", inputs(normal(*shape), normal(*out)), g, label),
            Case("max_pool_take", inputs(normal(*shape), normal(*shape)), g, label),
            Case("sum_pool", inputs(normal(*shape)), g, label),
            Case("sum_pool_transpose", inputs(normal(*out)),
                 {**g, "size": shape[len(shape) - len(g["kernel"]):]}, label),
        ]
    return cases


_TIES = np.array([[[1.0, 3.0, 3.0, 0.0, 2.0],
                   [3.0, np.nan, 1.0, 2.0, 2.0],
                   [-np.inf, -np.inf, np.nan, np.nan, 0.5],
                   [-np.inf, -np.inf, 4.0, 4.0, 4.0]]])


def pool_interpreter_cases(Case, inputs, const):
    g2 = geo((2, 2), (1, 2), None, (1, 1), (0, 1))
    return [
        *(Case(op, inputs(const(_TIES)), geo((2, 2), (1, 1)), "ties-nan")
          for op in ("max_pool_argmax", "max_pool")),
        Case("max_pool_argmax", inputs(const(_TIES)), g2, "ties-nan-pad"),
        Case("max_pool_grad", inputs(const(_TIES), const(np.arange(12.0).reshape(1, 4, 3))),
             g2, "ties-nan-pad"),
        Case("max_pool_take", inputs(const(_TIES), const(np.arange(20.0).reshape(1, 4, 5))),
             g2, "ties-nan-pad"),
        Case("max_pool_argmax", inputs(const(np.arange(24.0).reshape(2, 3, 4) % 5)),
             geo((2, 3), (1, 1), (1, 1)), "2d-f64"),
        Case("max_pool", inputs(const(np.array([[2.5, -1.0, 2.5, 7.0]], np.float32))),
             geo((2,), (1,), None, (1,), (1,)), "f32"),
        *(Case(op, inputs(const(np.array([[4, -7, 4, 9, 9], [0, 0, -1, 3, 2]]))),
               geo((3,), (2,), None, (1,), (1,)), "i64") for op in ("max_pool_argmax", "max_pool")),
    ]


def pool_nondiff(NonDiffCase, inputs, normal):
    return {
        "max_pool_argmax": NonDiffCase(  # (3, 1): the index of each row's maximum
            lambda x: bind("max_pool_argmax", x, **geo((4,))), inputs(normal(3, 4))
        ),
    }


__all__ = ["GEOMETRIES", "geo", "pool_cases", "pool_interpreter_cases", "pool_nondiff"]
