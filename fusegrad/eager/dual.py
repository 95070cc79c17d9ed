"""Eager forward-mode AD: tangents carried by Tensors inside a dual level.

A dual Tensor keeps its tangent (an eager Tensor of its shape and dtype) in its
``__dict__`` under ``_fw_tangent``. While a level is open (``ACTIVE[0]`` is 1),
``record.tensor_bind`` calls ``propagate`` for every IR op bound on Tensors: when
an operand carries a tangent, the op's JVP rule (``passes.autodiff.jvp_rules``)
runs on the eager operands, so the result's tangent is itself an eager Tensor,
recorded for reverse mode when it requires grad. The fast path and the in-place
arithmetic shortcut step aside while a level is open (one list read when none is).
The public surface is ``fusegrad.autograd.forward_ad``.
"""

from __future__ import annotations

import weakref

from ..ir.bind import bind
from ..passes.autodiff.jvp_rules import JVP_RULES
from ..passes.autodiff.vjp_rules import NON_DIFFERENTIABLE, load_families
from . import tensor_base as TB

load_families()  # every op's JVP rule: tangents are pushed by op name

#: 1 while a dual level is open (0 also while a JVP rule runs, so rules see plain values).
ACTIVE = [0]
#: The open level's index (-1: none), and the tensors given tangents in it.
LEVEL = [-1]
_DUALS: list = []
_KEY = "_fw_tangent"


def tangent(t):
    """The tangent of Tensor ``t`` at the open level, or None."""
    return t.__dict__.get(_KEY) if LEVEL[0] >= 0 else None


def set_tangent(t, tan) -> None:
    """Give ``t`` the tangent ``tan`` (None: drop it) at the open level."""
    if tan is None:
        t.__dict__.pop(_KEY, None)
        return
    t.__dict__[_KEY] = tan
    _DUALS.append(weakref.ref(t))


def clear() -> None:
    """Drop every tangent given at the level being closed."""
    for r in _DUALS:
        t = r()
        if t is not None:
            t.__dict__.pop(_KEY, None)
    _DUALS.clear()


class suspended:
    """``with suspended():`` ops bind without tangent propagation (JVP rules, custom
    ``Function.forward``)."""

    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = ACTIVE[0]
        ACTIVE[0] = 0

    def __exit__(self, *exc):
        ACTIVE[0] = self.prev


def fit(tan, like):
    """``tan`` broadcast to ``like``'s shape and cast to its dtype (rules return the natural
    shape of their formula)."""
    if tuple(tan.shape) != tuple(like.shape):
        tan = bind("broadcast_to", tan, shape=tuple(like.shape))
    if tan._data.dtype != like._data.dtype:
        tan = bind("convert", tan, dtype=like._data.dtype)
    return tan


def _inexact(t) -> bool:
    return t._data.dtype.kind in "fc"


def propagate(opdef, operands, attrs, regions, results) -> None:
    """Set the tangents of ``results`` of ``opdef`` from the operands' tangents."""
    tans = [x.__dict__.get(_KEY) if isinstance(x, TB.TensorBase) else None for x in operands]
    if all(t is None for t in tans) or opdef.name in NON_DIFFERENTIABLE:
        return  # (stop_gradient, comparisons, ...: no tangent, as the IR pass)
    if not any(_inexact(r) for r in results):
        return
    rule = JVP_RULES.get(opdef.name)
    if rule is None or regions:
        raise NotImplementedError(
            f"Trying to use forward AD with {opdef.name} that does not support it.")
    with suspended():
        if len(results) == 1:
            outs = (rule(tans, results[0], *operands, **attrs),)
        else:
            outs = rule(tans, tuple(results), *operands, **attrs)
        outs = [None if tan is None or not _inexact(r) else fit(_as_tensor(tan, r), r)
                for r, tan in zip(results, outs)]
    for r, tan in zip(results, outs):
        if tan is not None:
            set_tangent(r, tan)


def _as_tensor(tan, like):
    if isinstance(tan, TB.TensorBase):
        return tan
    import numpy as np

    return TB.make(np.asarray(tan, dtype=like._data.dtype))


def transfer(target, new) -> None:
    """After ``target`` was written in place with ``new``'s value: its tangent is ``new``'s."""
    tan = new.__dict__.get(_KEY)
    if tan is not None or _KEY in target.__dict__:
        set_tangent(target, tan)
