"""``Optimizer``: parameter groups, per-parameter state and their (de)serialisation.

As PyTorch's ``torch.optim.Optimizer``: ``param_groups`` is a list of dicts
(``"params"`` plus hyper-parameters, defaults filled in), ``state`` maps each
parameter to a dict of tensors, ``state_dict()`` replaces parameters by their
position (``{"state": {0: {...}}, "param_groups": [{..., "params": [0, 1]}]}``)
so it can be written with ``fg.save``.
"""

from __future__ import annotations

import collections
import itertools
import warnings

from ..eager import capture, jit_state
from ..eager import tensor_base as TB
from ..eager.grad_mode import enable_grad, no_grad
from ..nn.module import clear_grad

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


#: The default of a hyper-parameter every group must give.
required = _Required()


def _typename(obj) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class Optimizer:
    """Base class: subclasses set ``defaults`` and implement ``_update(p, group)``."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: collections.defaultdict = collections.defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, TB.TensorBase):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {_typename(params)}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own hyper-parameters (missing ones: defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {_typename(param_group)}")
        params = param_group["params"]
        if isinstance(params, TB.TensorBase):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, TB.TensorBase):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        param_group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "each is updated once per occurrence", UserWarning, stacklevel=3)
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken.intersection(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default), or to zeros in place."""
        capture.note_optimizer(self)
        for group in self.param_groups:
            for p in group["params"]:
                clear_grad(p, set_to_none)

    def step(self, closure=None):
        """Update every parameter in place (under ``no_grad``); returns ``closure()``'s loss."""
        capture.note_optimizer(self)
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict) -> None:
        """Update the group's parameters that have a gradient, in order."""
        for p in group["params"]:
            if p.grad is not None:
                self._update(p, group)

    def _update(self, p, group: dict) -> None:
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # --- state dict -------------------------------------------------------------------

    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [...]}`` with parameters replaced by
        their position across groups. The state tensors are the optimizer's own (not copies),
        as in PyTorch."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, TB.TensorBase) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyper-parameters and state saved by ``state_dict()`` (groups must match in
        number and size). State tensors are copied, floating ones cast to their parameter's
        dtype (except ``"step"``)."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(self.param_groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = dict(zip(itertools.chain.from_iterable(s["params"] for s in saved),
                            itertools.chain.from_iterable(g["params"]
                                                          for g in self.param_groups)))
        state: collections.defaultdict = collections.defaultdict(dict)
        for k, v in state_dict["state"].items():
            p = by_index.get(k)
            if p is None:
                state[k] = v
            else:
                state[p] = {name: _cast(p, name, value) for name, value in v.items()}
        self.state = state
        # a state dict saved before an option existed gets its default
        self.param_groups = [{**self.defaults, **s, "params": g["params"]}
                             for g, s in zip(self.param_groups, saved)]

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def _cast(param, name: str, value):
    if not isinstance(value, TB.TensorBase):
        return value
    value = value.detach()
    if name != "step" and param.is_floating_point() and value.is_floating_point():
        return value.to(param.dtype, copy=True)
    return value.clone()


jit_state.register_optimizer_type(Optimizer)  # fg.jit tracks optimizer state
