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


def _arrays(p, state: dict):
    """``(param, grad, exp_avg, exp_avg_sq, step)`` arrays when all are plain, else None."""
    pa = p._cell.value
    if type(pa) is not np.ndarray or pa.dtype != _F32 or not pa.flags.writeable:
        return None
    shape = pa.shape
    ga = _plain(p._grad, shape)
    ma, va = _plain(state["exp_avg"], shape), _plain(state["exp_avg_sq"], shape)
    sa = state["step"]._cell.value
    if (ga is None or ma is None or va is None or type(sa) is not np.ndarray
            or sa.shape != () or not sa.flags.writeable or sa.dtype.kind != "f"):
        return None
    return pa, ga, ma, va, sa


def _update(pa, ga, ma, va, t: float, group: dict):
    """The new ``(param, exp_avg, exp_avg_sq)`` arrays of Adam(W)'s step number ``t``
    (``pa`` is decayed in place first when AdamW's weight decay applies)."""
    lr, (beta1, beta2), eps, wd = (group["lr"], group["betas"], group["eps"],
                                   group["weight_decay"])
    g = -ga if group["maximize"] else ga
    if wd != 0:  # AdamW: p *= 1 - lr * weight_decay
        np.multiply(pa, 1 - lr * wd, out=pa)
    # m.lerp_(g, 1 - beta1)
    w = np.float32(1 - beta1)
    diff = g - ma
    if abs(float(w)) < 0.5:
        m = fma32(w, diff, ma)
    else:
        m = fma32(-diff, np.float32(1) - w, g)
    # v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    v = np.multiply(va, beta2)
    s = np.float32(1 - beta2)
    v = fma32(g if s == 1 else g * s, g, v)
    # p.addcdiv_(m, sqrt(v) / sqrt(1 - beta2**t) + eps, value=-lr / (1 - beta1**t))
    denom = np.sqrt(v) / ((1 - beta2**t) ** 0.5) + eps
    s = np.float32(-(lr / (1 - beta1**t)))
    return pa + (m if s == 1 else m * s) / denom, m, v


def _bump(p, state: dict, decayed: bool) -> None:
    """The version counters the in-place Tensor methods bump: the step's ``add_``, the
    decay's ``mul_`` and the update's ``add_``, ``exp_avg``'s ``copy_``, ``exp_avg_sq``'s
    ``mul_`` and ``copy_``."""
    state["step"]._vc.n += 1
    p._vc.n += 2 if decayed else 1
    state["exp_avg"]._vc.n += 1
    state["exp_avg_sq"]._vc.n += 2


def adam_step(p, state: dict, group: dict) -> bool:
    """One Adam(W) step of ``p`` on its arrays; False (nothing written) when ``p``, its
    gradient or its state is not plain float32 arrays."""
    arrays = _arrays(p, state)
    if arrays is None:
        return False
    pa, ga, ma, va, sa = arrays
    with np.errstate(all="ignore"):
        np.add(sa, 1, out=sa)
        new_p, new_m, new_v = _update(pa, ga, ma, va, float(sa), group)
        np.copyto(ma, new_m)
        np.copyto(va, new_v)
        np.copyto(pa, new_p)
    _bump(p, state, group["weight_decay"] != 0)
    return True


def adam_group(params: list, states: list, group: dict) -> list:
    """Adam(W)'s step of every parameter in ``params`` (distinct tensors) whose arrays are
    plain, computed once over their concatenation per step count (elementwise, so each
    element gets the bits of its own step); returns the others, not yet updated."""
    rest, by_step = [], {}
    for p, state in zip(params, states):
        arrays = _arrays(p, state)
        if arrays is None:
            rest.append(p)
        else:
            by_step.setdefault(float(arrays[4]) + 1, []).append((p, state, arrays))
    decayed = group["weight_decay"] != 0
    with np.errstate(all="ignore"):
        for t, items in by_step.items():
            flat = [np.concatenate([a[k].reshape(-1) for _, _, a in items]) if len(items) > 1
                    else items[0][2][k].reshape(-1) for k in range(4)]
            if len(items) == 1:
                flat[0] = flat[0].copy()  # pa is decayed in place: keep it a copy
            new_p, new_m, new_v = _update(*flat, t, group)
            off = 0
            for p, state, (pa, _, ma, va, sa) in items:
                n = pa.size
                shape = pa.shape
                np.add(sa, 1, out=sa)
                np.copyto(ma, new_m[off:off + n].reshape(shape))
                np.copyto(va, new_v[off:off + n].reshape(shape))
                np.copyto(pa, new_p[off:off + n].reshape(shape))
                off += n
                _bump(p, state, decayed)
    return rest
