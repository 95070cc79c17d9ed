"""VJP and JVP rules of ``conv`` (registered into ``VJP_RULES`` / ``JVP_RULES``).

``conv`` is bilinear, so its JVP is ``conv(tx, w) + conv(x, tw)``. Both cotangents
are convolutions again (so every order of derivative stays a ``conv``):

- the input's is the cotangent convolved with the spatially flipped weight whose
  in/out channel axes are swapped within each group, ``lhs_dilation`` and
  ``stride`` exchanged (a transposed convolution), padded so that the result
  has the input's extents;
- the weight's is the input, with batch and channel axes exchanged (channels of
  one group side by side), convolved with the cotangent used as a kernel: the
  kernel's taps are ``stride`` apart and it moves ``rhs_dilation`` at a time.
"""

from __future__ import annotations

from ...ir import ops
from ...ir.bind import aval
from ...ir.conv_ops import dilated
from .jvp_rules import JVP_RULES
from .vjp_rules import VJP_RULES


def _conv(x, w, stride, padding, lhs_dilation, rhs_dilation, groups):
    return ops.conv(x, w, stride=tuple(stride), padding=tuple(padding),
                    lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(rhs_dilation),
                    groups=int(groups))


def _reshape(x, shape):
    shape = tuple(shape)
    return x if aval(x).shape == shape else ops.reshape(x, shape=shape)


def _flip_spatial(w):
    s = aval(w).shape
    nd = len(s) - 2
    return ops.slice(w, starts=(0, 0) + tuple(k - 1 for k in s[2:]),
                     stops=(s[0], s[1]) + (-1,) * nd, steps=(1, 1) + (-1,) * nd)


def conv_input_grad(g, w, xshape, *, stride, padding, lhs_dilation, rhs_dilation, groups):
    """The cotangent of ``conv``'s input ``x`` of shape ``xshape``."""
    ws, gs = aval(w).shape, aval(g).shape
    nd = len(ws) - 2
    pads = []
    for i in range(nd):
        ld = dilated(xshape[2 + i], lhs_dilation[i])
        kd = dilated(ws[2 + i], rhs_dilation[i])
        qd = dilated(gs[2 + i], stride[i])
        before = kd - padding[2 * i] - 1
        pads += [before, ld + kd - 1 - qd - before]
    o, cg = ws[:2]
    ksp = ws[2:]
    wt = _reshape(w, (groups, o // groups, cg, *ksp))
    wt = ops.transpose(wt, perm=(0, 2, 1, *range(3, 3 + nd)))
    wt = _flip_spatial(_reshape(wt, (groups * cg, o // groups, *ksp)))
    return _conv(g, wt, lhs_dilation, pads, stride, rhs_dilation, groups)


def conv_weight_grad(g, x, wshape, *, stride, padding, lhs_dilation, rhs_dilation, groups):
    """The cotangent of ``conv``'s weight ``w`` of shape ``wshape``."""
    xs, gs = aval(x).shape, aval(g).shape
    nd = len(xs) - 2
    pads = []
    for i in range(nd):
        ld = dilated(xs[2 + i], lhs_dilation[i])
        kd = dilated(wshape[2 + i], rhs_dilation[i])
        qd = dilated(gs[2 + i], stride[i])
        lo = padding[2 * i]
        pads += [lo, qd - ld + kd - lo - 1]
    n, c = xs[:2]
    cg = c // groups
    sp = xs[2:]
    xt = _reshape(x, (n, groups, cg, *sp))
    xt = _reshape(ops.transpose(xt, perm=(2, 1, 0, *range(3, 3 + nd))), (cg, groups * n, *sp))
    gt = ops.transpose(g, perm=(1, 0, *range(2, 2 + nd)))
    r = _conv(xt, gt, rhs_dilation, pads, lhs_dilation, stride, groups)
    return ops.transpose(r, perm=(1, 0, *range(2, 2 + nd)))


def conv_vjp(g, out, x, w, **attrs):
    return (conv_input_grad(g, w, aval(x).shape, **attrs),
            conv_weight_grad(g, x, aval(w).shape, **attrs))


def conv_jvp(tangents, out, x, w, **attrs):
    tx, tw = tangents
    terms = [ops.conv(tx, w, **attrs) if tx is not None else None,
             ops.conv(x, tw, **attrs) if tw is not None else None]
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


VJP_RULES["conv"] = conv_vjp
JVP_RULES["conv"] = conv_jvp
