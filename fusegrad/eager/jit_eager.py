"""``fg.jit`` over eager code: modules, optimizers and Tensors in a compiled function.

A PyTorch-style step

.. code-block:: python

    @fg.jit
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

is traced by running the eager engine itself on tracers: every tensor that
holds state (the parameters and buffers of the modules involved, their
``.grad``, the optimizers' state tensors, and the Tensor arguments) gets a
traced value in its storage for the duration of the trace. What the call
changed (new parameter values, new gradients, new or updated optimizer state,
tensors written in place) becomes the outputs of the compiled function, and
each later call writes them back into the same objects. The objects are found
by looking at the function (a module, its arguments, the globals and closure
cells it names) and by recording which modules and optimizers the trace calls
(``eager.capture``); a trace that meets an object not seen before is redone
with it.

The cache key (the guard) is the arguments' structure, shapes and dtypes plus
everything the trace baked in as Python values: every module's ``training``
flag, every optimizer's hyper-parameters (``weight_decay``, ``eps``, ...; not
``lr``, a nonzero ``momentum`` or ``betas``, which are inputs of the compiled
step, so a scheduler changing them does not retrace) and the structure of its
state, which gradients are None, the default dtype and the
grad mode. Changing any of them retraces. Optimizer state that optimizers
create lazily on their first step is created by running the first call
eagerly (uncompiled) when an optimizer has none yet.

A function that changes no state and returns Tensors that require grad (a
module applied to an input, say) returns them with one ``CompiledFunctionBackward``
node (``eager.compiled_node``), so ``fg.jit(model)(x).sum().backward()``
fills the parameters' ``.grad`` with a compiled VJP. A step that updates state
returns its results without history (the backward already ran inside it).
"""

from __future__ import annotations

import numpy as np

from .. import config
from ..ir.bind import aval
from ..runtime import run
from ..runtime.compiled import executable
from ..tracer import trace_pytree
from ..tracer.core import _state as _trace_state
from ..tracer.pytree import tree_flatten, tree_unflatten
from ..transforms.jit_api import _split_static, _static_indices, register_route
from ..transforms.plan import GradError, _leaf, _Plan, _reason, vjp_pass, warn_effects
from . import capture, jit_state
from . import tensor_base as TB
from .compiled_node import CompiledFunction
from .grad_mode import is_grad_enabled
from .jit_state import Env, Snapshot, env_key, hashable, referenced, store, unbind_hypers


def for_jit(jit_obj, args, kwargs, leaves) -> EagerJit | None:
    """The ``EagerJit`` serving a ``fg.jit`` object, or None for plain array functions.

    Eager when ``f`` is a module, names modules or optimizers (globals, closure
    cells; looked at once, on the first call), or is called with Tensors,
    modules or optimizers (``leaves``: the call's arguments, flattened).
    """
    d = jit_obj.__dict__
    eager = d.get("_eager")
    if eager is not None:
        return eager
    f = jit_obj.f
    if "_names_objects" not in d:
        d["_names_objects"] = isinstance(f, jit_state.OBJECTS) or bool(referenced(f))
    if d["_names_objects"] or any(isinstance(x, (TB.TensorBase, *jit_state.OBJECTS))
                                  for x in leaves):
        name = getattr(f, "__name__", type(f).__name__)
        eager = d["_eager"] = EagerJit(f, name, jit_obj.static_argnums)
    return eager


class UnsupportedEagerJit(GradError):
    """A pattern ``fg.jit`` cannot compile over eager Tensors (the message says why)."""


# --- the compiled plan -------------------------------------------------------------------


class _EagerPlan:
    """One trace: the compiled Function and how to read its outputs back into objects."""

    def __init__(self):
        self.plan: _Plan | None = None
        self.out_tree = None
        self.out_kinds: list = []  # per output leaf: None (array) or requires_grad of a Tensor
        # per state output: ("slot", index in the state tensors) | ("grad", p)
        # | ("buffer", module, name) | ("state", optimizer, p, key)
        self.changes: list = []
        self.cleared: list = []  # ("grad", p) -> None, ("state", o, p, k) -> deleted
        self.new_objects = False
        self.array_idx: list = []  # argument leaves passed as arrays, after the tensors
        # differentiable plans (no state change, outputs that require grad)
        self.wrt: tuple = ()
        self.seeds: tuple = ()
        self.vjp_function = None
        self._vjp_exe = None

    @property
    def differentiable(self) -> bool:
        return self.vjp_function is not None

    # runner protocol of CompiledFunction
    @property
    def free(self):
        return self.plan.traced.free

    @property
    def num_outputs(self) -> int:
        return len(self.plan.fn.results)

    def forward(self, arrays):
        return list(self.plan(arrays))

    def vjp(self, arrays, cts):
        args = (*arrays, *self.free, *cts)
        if config.DISABLE_JIT:
            return run(self.vjp_function, *args)
        if self._vjp_exe is None:
            self._vjp_exe = executable(self.vjp_function, "backward of a jitted eager function")
        return self._vjp_exe(*args)


def _trace(f, args, kwargs, env: Env, name: str, reason: str) -> _EagerPlan:
    leaves, tree = tree_flatten((args, kwargs))
    arg_tensors = [x for x in leaves if isinstance(x, TB.TensorBase)]
    tensors = env.tensors(arg_tensors)
    array_idx = [i for i, x in enumerate(leaves)
                 if not isinstance(x, (TB.TensorBase, *jit_state.OBJECTS)) and _is_array_like(x)]
    ep = _EagerPlan()
    ids = {id(t) for t in tensors}

    def body(state_vals, array_vals):
        snap = Snapshot(env, tensors)
        written: list = []
        hypers = env.bind_hypers()
        try:
            for t, v in zip(tensors, state_vals):
                t._cell.value = v
            full = list(leaves)
            for i, v in zip(array_idx, array_vals):
                full[i] = v
            a, kw = tree_unflatten(tree, full)
            with capture.capturing(tracing=True) as cap:
                out = f(*a, **kw)
            ep.new_objects = env.add([*cap.modules.values(), *cap.optimizers.values()])
            vals = _outputs(ep, out)
            vals += _changes(ep, env, tensors, state_vals, snap)
            for t, before, version in cap.written.values():
                if id(t) not in ids and id(t) not in cap.created and TB.is_concrete(before):
                    # a tensor that existed before the call, written in place: state too
                    env.extra.setdefault(id(t), t)
                    ep.new_objects = True
                    written.append((t, before, version))
            return vals
        finally:
            unbind_hypers(hypers)
            snap.restore(written)

    traced = trace_pytree(body, ([_leaf(t) for t in tensors],
                                 [_leaf(leaves[i]) for i in array_idx]), name=name)
    ep.plan = _Plan(traced.function, traced, reason=reason, kept=True)
    warn_effects("jit", f, traced, jit=True)
    ep.array_idx = array_idx
    if not ep.changes and any(ep.out_kinds) and is_grad_enabled():
        _make_differentiable(ep, tensors)
    return ep


def _is_array_like(x) -> bool:
    return isinstance(x, np.ndarray | np.generic | float | int | bool) or (
        hasattr(x, "shape") and hasattr(x, "dtype"))


def _outputs(ep: _EagerPlan, out) -> list:
    out_leaves, ep.out_tree = tree_flatten(out)
    vals = []
    for o in out_leaves:
        if isinstance(o, TB.TensorBase):
            ep.out_kinds.append(o._rg)
            vals.append(o._data)
        elif isinstance(o, jit_state.OBJECTS):
            raise UnsupportedEagerJit(f"fg.jit: the function returned a {type(o).__name__}; "
                                      "return Tensors, arrays or scalars")
        else:
            ep.out_kinds.append(None)
            vals.append(o)
    return vals


def _changes(ep: _EagerPlan, env: Env, tensors, state_vals, snap: Snapshot) -> list:
    """The state the call changed, as (recorded change, traced value) pairs."""
    vals = []
    for i, (t, v) in enumerate(zip(tensors, state_vals)):
        if t._cell.value is not v:
            ep.changes.append(("slot", i))
            vals.append(t._cell.value)
    for p, g0 in snap.grads:
        g1 = p._grad
        if g1 is g0:
            continue
        if g1 is None:
            ep.cleared.append(("grad", p))
        else:
            ep.changes.append(("grad", p))
            vals.append(g1._data)
    for m, before in snap.buffers:
        for name, b in m._buffers.items():
            if b is not before.get(name):  # a buffer assigned a new Tensor (running stats)
                if b is None:
                    raise UnsupportedEagerJit(f"fg.jit: buffer {name!r} of a "
                                              f"{type(m).__name__} was set to None in the call")
                ep.changes.append(("buffer", m, name))
                vals.append(b._data)
    for o, before in snap.states:
        for p, st in o.state.items():
            st0 = before.get(p, {})
            for k, v in st.items():
                if v is st0.get(k):
                    continue
                if not isinstance(v, TB.TensorBase):
                    raise UnsupportedEagerJit(
                        f"fg.jit: optimizer {type(o).__name__} stored a {type(v).__name__} "
                        f"in its state ({k!r}); compiled steps keep only Tensors there")
                ep.changes.append(("state", o, p, k))
                vals.append(v._data)
            ep.cleared += [("state", o, p, k) for k in st0 if k not in st]
    return vals


def _make_differentiable(ep: _EagerPlan, tensors) -> None:
    fn = ep.plan.fn
    ep.wrt = tuple(i for i, t in enumerate(tensors)
                   if t._rg and np.issubdtype(t._data.dtype, np.floating))
    ep.seeds = tuple(i for i, k in enumerate(ep.out_kinds) if k)
    if ep.wrt:
        ep.vjp_function = vjp_pass(fn, list(ep.wrt), seeds=ep.seeds, name=f"{fn.name}_vjp")


def _apply(ep: _EagerPlan, tensors, outs) -> None:
    """Write a compiled call's state outputs back into the objects."""
    held = {id(t._cell.value) for t in tensors}

    def own(v):
        if id(v) in held:
            v = v.copy()
        held.add(id(v))
        return v

    for change, v in zip(ep.changes, outs):
        kind = change[0]
        if kind == "slot":
            store(tensors[change[1]], v)
        elif kind == "grad":
            change[1]._grad = TB.make(own(v))
        elif kind == "buffer":
            change[1]._buffers[change[2]] = TB.make(own(v))
        else:
            _, o, p, k = change
            o.state[p][k] = TB.make(own(v))
    for change in ep.cleared:
        if change[0] == "grad":
            change[1]._grad = None
        else:
            _, o, p, k = change
            o.state[p].pop(k, None)


# --- the entry point ---------------------------------------------------------------------


class EagerJit:
    """The eager side of one ``fg.jit`` object: its objects, guards and plans."""

    def __init__(self, f, name: str, static_argnums: tuple = ()):
        self.f, self.name, self.static_argnums = f, name, static_argnums
        self.env = Env()
        self.env.add(referenced(f))
        self.cache: dict = {}
        self.calls = 0

    def _key(self, args, kwargs, static=()):
        """The cache key of a call, and the state tensors (in input order)."""
        leaves, tree = tree_flatten((args, kwargs))
        arg_keys = []
        for x in leaves:
            if isinstance(x, TB.TensorBase):
                arg_keys.append(("T", x._data.shape, x._data.dtype.str, x._rg))
            elif isinstance(x, jit_state.OBJECTS):
                arg_keys.append(("O", id(x)))
            elif _is_array_like(x):
                arg_keys.append(aval(_leaf(x)))
            else:
                arg_keys.append(("static", hashable(x)))
        tensors = self.env.tensors([x for x in leaves if isinstance(x, TB.TensorBase)])
        return (tree, tuple(arg_keys), static, env_key(self.env, tensors)), tensors

    def __call__(self, args, kwargs):
        if _trace_state.stack or capture.tracing():
            raise UnsupportedEagerJit(
                f"fg.jit({self.name}) over eager Tensors, modules or optimizers cannot run "
                "inside another transform's trace; call it at the top level")
        self.env.add(x for x in tree_flatten((args, kwargs))[0] if isinstance(x, jit_state.OBJECTS))
        self.calls += 1
        if self.calls == 1 and self._lazy_state():
            return self._eager(self.f, args, kwargs)
        fun, args, static = self._split_static(args)
        self.env.begin()
        key, tensors = self._key(args, kwargs, static)
        ep = self.cache.get(key)
        if ep is None:
            ep, tensors = self._compile(fun, args, kwargs, key, static)
        return self._run(ep, tensors, args, kwargs)

    def _split_static(self, args):
        """``(function of the dynamic arguments, dynamic arguments, static values)``."""
        if not self.static_argnums:
            return self.f, args, ()
        static = _static_indices(self.static_argnums, len(args), f"jit({self.name})")
        try:
            svals = tuple((i, args[i]) for i in static)
            hash(svals)
        except TypeError:
            raise TypeError(f"jit: static arguments {static} must be hashable") from None
        fun, dyn = _split_static(self.f, args, self.static_argnums, "jit")
        return fun, dyn, svals

    def _lazy_state(self) -> bool:
        """Some optimizer has a parameter with a gradient but no state yet (or no object is
        known): the first call runs eagerly so that state exists before tracing."""
        if not self.env.modules and not self.env.optimizers:
            return True
        return any(not o.state.get(p) for o in self.env.optimizers.values()
                   for g in o.param_groups for p in g["params"])

    def _eager(self, f, args, kwargs):
        with capture.capturing() as cap:
            out = f(*args, **kwargs)
        self.env.add([*cap.modules.values(), *cap.optimizers.values()])
        if cap.optimizers or cap.written:  # a step: results without history, as compiled
            leaves, tree = tree_flatten(out)
            out = tree_unflatten(tree, [x.detach() if isinstance(x, TB.TensorBase) else x
                                        for x in leaves])
        return out

    def _compile(self, f, args, kwargs, key, static):
        for _ in range(3):
            ep = _trace(f, args, kwargs, self.env, self.name, _reason(self.cache, key))
            if not ep.new_objects:
                break
            key = self._key(args, kwargs, static)[0]
        else:
            raise UnsupportedEagerJit(f"fg.jit({self.name}): the objects the function touches "
                                      "keep changing between traces")
        self.cache[key] = ep
        return ep, self._key(args, kwargs, static)[1]

    def _run(self, ep: _EagerPlan, tensors, args, kwargs):
        leaves = tree_flatten((args, kwargs))[0]
        arrays = [_leaf(leaves[i]) for i in ep.array_idx]
        n = len(ep.out_kinds)
        if ep.differentiable:
            outs = [o._data if k is None else o for o, k in zip(
                CompiledFunction.apply(ep, *tensors, *map(TB.make, arrays)), ep.out_kinds)]
        else:
            raw = ep.plan([*(t._cell.value for t in tensors), *arrays])
            _apply(ep, tensors, raw[n:])
            outs = [o if k is None else TB.make(o) for o, k in zip(raw[:n], ep.out_kinds)]
        return tree_unflatten(ep.out_tree, outs)


register_route(for_jit)
