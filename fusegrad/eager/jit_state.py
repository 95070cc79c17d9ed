"""The state behind ``fg.jit`` over eager code (see ``jit_eager``): which modules,
optimizers and tensors a function touches, the cache key of what a trace baked in, and
snapshots that undo a trace's changes to them.
"""

from __future__ import annotations

import types

import numpy as np

from . import dtypes as D
from . import tensor_base as TB
from .grad_mode import is_grad_enabled

#: The classes of the objects whose state ``fg.jit`` tracks: ``fg.nn.Module`` and
#: ``fg.optim.Optimizer`` register themselves when imported (those surfaces sit above the
#: eager face). ``OBJECTS`` holds both kinds, ``MODULES`` the module classes.
MODULES: tuple[type, ...] = ()
OBJECTS: tuple[type, ...] = ()


def register_module_type(cls: type) -> None:
    """Track instances of ``cls`` as modules: ``modules()``, ``parameters()``,
    ``_parameters``, ``_buffers`` and ``training`` hold their state."""
    global MODULES, OBJECTS
    MODULES, OBJECTS = (*MODULES, cls), (*OBJECTS, cls)


def register_optimizer_type(cls: type) -> None:
    """Track instances of ``cls`` as optimizers: ``param_groups`` and ``state`` hold
    their state."""
    global OBJECTS
    OBJECTS = (*OBJECTS, cls)


# --- finding the objects ----------------------------------------------------------------


def referenced(f, depth: int = 3) -> list:
    """Modules, optimizers and Tensors ``f`` names (globals, closure cells, bound ``self``),
    recursively through the functions it names."""
    found, seen, todo = [], set(), [(f, depth)]
    while todo:
        obj, d = todo.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, (*OBJECTS, TB.TensorBase)):
            found.append(obj)
            continue
        if isinstance(obj, types.MethodType):
            todo.append((obj.__self__, d))
            todo.append((obj.__func__, d))
            continue
        if d == 0 or not isinstance(obj, types.FunctionType):
            continue
        code = obj.__code__
        names = set(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                names.update(c.co_names)
        for name in sorted(names):
            if name in obj.__globals__:
                todo.append((obj.__globals__[name], d - 1))
        for cell in obj.__closure__ or ():
            try:
                todo.append((cell.cell_contents, d - 1))
            except ValueError:
                continue
    return found


class Env:
    """The modules and optimizers a jitted function touches, and the tensors they hold."""

    def __init__(self):
        self.modules: dict[int, object] = {}
        self.optimizers: dict[int, object] = {}
        # other tensors: named by the function, or written in place by it
        self.extra: dict[int, object] = {}
        self._walked: dict = {}  # all_modules() and params() of the current call
        # (param group, key, 0-d Tensors): each group's learning rate (momentum, betas), an
        # input of the compiled step (made afresh by every ``tensors()`` call)
        self.hyper_inputs: list = []

    def begin(self) -> None:
        """Forget the walks of the previous call (modules may have changed since)."""
        self._walked.clear()

    def add(self, objs) -> bool:
        """Add modules, optimizers and named Tensors; True if any was new."""
        new = False
        for o in objs:
            reg = (self.modules if isinstance(o, MODULES) else self.extra
                   if isinstance(o, TB.TensorBase) else self.optimizers)
            if id(o) not in reg:
                reg[id(o)] = o
                new = True
        if new:
            self._walked.clear()
        return new

    def all_modules(self) -> list:
        if "modules" in self._walked:
            return self._walked["modules"]
        out: dict[int, object] = {}
        for m in self.modules.values():
            for sub in m.modules():
                out.setdefault(id(sub), sub)
        self._walked["modules"] = found = list(out.values())
        return found

    def params(self) -> list:
        """Parameters whose ``.grad`` is state, deduplicated, in a stable order."""
        if "params" in self._walked:
            return self._walked["params"]
        out: dict[int, object] = {}
        for m in self.modules.values():
            for p in m.parameters():
                out.setdefault(id(p), p)
        for o in self.optimizers.values():
            for g in o.param_groups:
                for p in g["params"]:
                    out.setdefault(id(p), p)
        self._walked["params"] = found = list(out.values())
        return found

    def tensors(self, args_tensors) -> list:
        """Every tensor whose storage is state: arguments, parameters, buffers, gradients,
        optimizer state (deduplicated by storage)."""
        out: dict[int, object] = {}
        cells: set[int] = set()

        def add(t):
            if isinstance(t, TB.TensorBase) and id(t._cell) not in cells:
                cells.add(id(t._cell))
                out[id(t)] = t

        for t in (*args_tensors, *self.extra.values()):
            add(t)
        for m in self.all_modules():
            for t in (*m._parameters.values(), *m._buffers.values()):
                add(t)
        for p in self.params():
            add(p)
            add(p._grad)
        for o in self.optimizers.values():
            for st in o.state.values():
                for v in st.values():
                    add(v)
        self.hyper_inputs = [(g, k, _as_inputs(g[k]))
                             for o in self.optimizers.values() for g in o.param_groups
                             for k in HYPER_INPUTS if dynamic_hyper(g, k)]
        return [*out.values(), *(t for _, _, ts in self.hyper_inputs for t in ts)]

    def bind_hypers(self) -> list:
        """While tracing: each group's ``lr`` (and nonzero ``momentum``, ``betas``) become
        their (traced) input Tensors. Returns what to give to ``unbind_hypers`` after."""
        before = [(g, k, g[k]) for g, k, _ in self.hyper_inputs]
        for g, k, ts in self.hyper_inputs:
            g[k] = ts if isinstance(g[k], tuple) else ts[0]
        return before


def unbind_hypers(before) -> None:
    for g, k, v in before:
        g[k] = v


#: Hyper-parameters passed to compiled steps as inputs, not baked into the trace: a
#: scheduler changes them every step (``lr``; ``OneCycleLR`` also cycles ``momentum`` or
#: Adam's ``betas``).
HYPER_INPUTS = ("lr", "momentum", "betas")


def _number(v) -> bool:
    return isinstance(v, float | int | np.floating | np.integer) and not isinstance(v, bool)


def dynamic_hyper(group: dict, key: str) -> bool:
    """A Python-number hyper-parameter the compiled step takes as an input: ``lr``, a
    nonzero ``momentum`` (zero changes what the step computes), ``betas``."""
    v = group.get(key)
    if key == "betas":
        return isinstance(v, tuple) and len(v) == 2 and all(_number(b) for b in v)
    return _number(v) and (key == "lr" or v != 0)


def _as_inputs(v) -> tuple:
    return tuple(TB.make(np.asarray(x, dtype=np.float64))
                 for x in (v if isinstance(v, tuple) else (v,)))


def hashable(v):
    if isinstance(v, list | tuple):
        return tuple(hashable(x) for x in v)
    if isinstance(v, TB.TensorBase):
        return ("tensor", id(v))
    hash(v)
    return v


def _state_key(v):
    if isinstance(v, TB.TensorBase):
        return ("T", tuple(v.shape), v._data.dtype.str)
    return hashable(v)


def env_key(env: Env, tensors) -> tuple:
    """Everything the trace baked in as Python values (see the module docstring); learning
    rates, momenta and betas are inputs, not part of the key."""
    parts: list = [is_grad_enabled(), str(D.get_default_dtype())]
    parts.append(tuple(m.training for m in env.all_modules()))
    for o in env.optimizers.values():
        for g in o.param_groups:
            parts.append(tuple((k, "input" if k in HYPER_INPUTS and dynamic_hyper(g, k)
                                else hashable(v))
                               for k, v in sorted(g.items()) if k != "params"))
            parts.append(tuple(id(p) for p in g["params"]))
        parts.append(tuple((id(p), tuple((k, _state_key(v)) for k, v in st.items()))
                           for p, st in o.state.items()))
    parts.append(tuple((id(p), p._grad is None) for p in env.params()))
    parts.append(tuple((t._data.shape, t._data.dtype.str, t._rg) for t in tensors))
    return tuple(parts)


# --- snapshots ---------------------------------------------------------------------------


class Snapshot:
    """Storage, versions, gradients and optimizer state before a trace, to restore after."""

    def __init__(self, env: Env, tensors):
        self.cells = [(t, t._cell.value, t._vc.n) for t in tensors]
        self.grads = [(p, p._grad) for p in env.params()]
        self.states = [(o, {p: dict(st) for p, st in o.state.items()})
                       for o in env.optimizers.values()]
        self.buffers = [(m, dict(m._buffers)) for m in env.all_modules()]

    def restore(self, written=()) -> None:
        for t, value, n in (*self.cells, *written):
            t._cell.value, t._vc.n = value, n
        for p, g in self.grads:
            p._grad = g
        for m, before in self.buffers:
            m._buffers.clear()
            m._buffers.update(before)
        for o, before in self.states:
            for p in [p for p in o.state if p not in before]:
                del o.state[p]
            for p, st in before.items():
                o.state[p].clear()
                o.state[p].update(st)


def store(t, value) -> None:
    """Write a compiled result into a tensor's storage (in its memory when possible)."""
    cur = t._cell.value
    if (TB.is_concrete(cur) and cur.shape == value.shape and cur.dtype == value.dtype
            and cur.flags.writeable):
        np.copyto(cur, value)
    else:
        t._cell.value = value
    t._vc.n += 1
