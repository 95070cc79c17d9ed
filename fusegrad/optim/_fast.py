"""Adam's and AdamW's step on concrete float32 arrays, without the Tensor dispatch.

When nothing records (no ``fg.jit`` capture, no forward-mode level) and the parameter,
its gradient and its moments are plain writable float32 NumPy arrays of one shape, the
update writes the arrays in place with the same operations, in the same order and with
the same roundings as the Tensor code of ``adam.Adam._adam`` and ``_fused`` (so the bits
PyTorch's single-tensor step gives), and bumps each written tensor's version counter as
the in-place Tensor methods do. Anything else (a traced hyper-parameter, AMSGrad, L2
weight decay, float64) takes the Tensor code.
"""

from __future__ import annotations

import numpy as np

from ..eager import dual
from ..eager import tensor_base as TB
from ..eager.capture import _state as _capture
from ._fused import fma32

_F32 = np.dtype(np.float32)


def _plain(t, shape) -> np.ndarray | None:
    """``t``'s array when it is a writable float32 NumPy array of ``shape``."""
    a = t._cell.value
    if type(a) is np.ndarray and a.dtype == _F32 and a.shape == shape and a.flags.writeable:
        return a
    return None


def eligible(group: dict) -> bool:
    """The group's settings allow the array step."""
    if _capture.stack or dual.ACTIVE[0] or group["amsgrad"]:
        return False
    if group["weight_decay"] != 0 and not group["decoupled_weight_decay"]:
        return False
    beta1, beta2 = group["betas"]
    return not any(isinstance(v, TB.TensorBase)
                   for v in (group["lr"], beta1, beta2, group["eps"], group["weight_decay"]))


def adam_step(p, state: dict, group: dict) -> bool:
    """One Adam(W) step of ``p`` on its arrays; False (nothing written) when ``p``, its
    gradient or its state is not plain float32 arrays."""
    pa = p._cell.value
    if type(pa) is not np.ndarray or pa.dtype != _F32 or not pa.flags.writeable:
        return False
    shape = pa.shape
    ga = _plain(p._grad, shape)
    m, v, step = state["exp_avg"], state["exp_avg_sq"], state["step"]
    ma, va = _plain(m, shape), _plain(v, shape)
    sa = step._cell.value
    if (ga is None or ma is None or va is None or type(sa) is not np.ndarray
            or sa.shape != () or not sa.flags.writeable or sa.dtype.kind != "f"):
        return False
    lr, (beta1, beta2), eps, wd = (group["lr"], group["betas"], group["eps"],
                                   group["weight_decay"])
    with np.errstate(all="ignore"):
        np.add(sa, 1, out=sa)
        step._vc.n += 1
        t = float(sa)
        g = -ga if group["maximize"] else ga
        if wd != 0:  # AdamW: p *= 1 - lr * weight_decay
            np.multiply(pa, 1 - lr * wd, out=pa)
            p._vc.n += 1
        # m.lerp_(g, 1 - beta1)
        w = np.float32(1 - beta1)
        diff = g - ma
        if abs(float(w)) < 0.5:
            new = fma32(w, diff, ma)
        else:
            new = fma32(-diff, np.float32(1) - w, g)
        np.copyto(ma, new)
        m._vc.n += 1
        # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        np.multiply(va, beta2, out=va)
        s = np.float32(1 - beta2)
        new = fma32(g if s == 1 else g * s, g, va)
        np.copyto(va, new)
        v._vc.n += 2
        # p.addcdiv_(m, sqrt(v) / sqrt(1 - beta2**t) + eps, value=-lr / (1 - beta1**t))
        denom = np.sqrt(va) / ((1 - beta2**t) ** 0.5) + eps
        s = np.float32(-(lr / (1 - beta1**t)))
        np.add(pa, (ma if s == 1 else ma * s) / denom, out=pa)
        p._vc.n += 1
    return True
