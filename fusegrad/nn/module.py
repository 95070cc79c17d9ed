"""``nn.Module``: the base class of layers, as PyTorch's ``torch.nn.Module``.

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it, in
assignment order; ``parameters()``, ``named_parameters()``, ``children()``,
``modules()``, ``state_dict()`` and ``load_state_dict()`` walk what was
registered. ``module(x)`` calls ``forward(x)``.

>>> import fusegrad as fg
>>> class Net(fg.nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc = fg.nn.Linear(2, 1)
...     def forward(self, x):
...         return self.fc(x)
>>> [name for name, _ in Net().named_parameters()]
['fc.weight', 'fc.bias']
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping

from ..eager import capture, jit_state
from ..eager import tensor_base as TB
from ..eager.grad_mode import no_grad
from .parameter import Parameter

_IncompatibleKeysBase = collections.namedtuple("IncompatibleKeys",
                                               ["missing_keys", "unexpected_keys"])


class _IncompatibleKeys(_IncompatibleKeysBase):
    """What ``load_state_dict`` returns: the keys it did not find and did not expect."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _typename(obj) -> str:
    if isinstance(obj, TB.TensorBase):
        return f"fusegrad.{obj.type().rsplit('.', 1)[-1]}"
    return type(obj).__name__


def _check_name(kind: str, name) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of neural-network layers: override ``__init__`` (call ``super().__init__()``
    first) and ``forward``."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", collections.OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args, **kwargs):
        capture.note_module(self)
        return self.forward(*args, **kwargs)

    # --- registration -------------------------------------------------------------

    def _registry(self, what: str) -> dict:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        return self.__dict__

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` (a Parameter, or None for an absent one) under ``name``."""
        d = self._registry("parameter")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in d["_parameters"]:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(fusegrad.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             "parameters must be created explicitly. To express "
                             f"'{name}' as a function of another Tensor, compute the value "
                             "in the forward() method.")
        d["_parameters"][name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Add a Tensor that is state but not a parameter (in ``state_dict`` if persistent)."""
        d = self._registry("buffer")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in d["_buffers"]:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, TB.TensorBase):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(fusegrad Tensor or None required)")
        d["_buffers"][name] = tensor
        if persistent:
            d["_non_persistent_buffers_set"].discard(name)
        else:
            d["_non_persistent_buffers_set"].add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name`` (``self.name = module`` does the same)."""
        d = self._registry("module")
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in d["_modules"]:
            raise KeyError(f"attribute '{name}' already exists")
        d["_modules"][name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._registry("parameters")
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(fusegrad.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self._registry("child modules")
            self._forget(name)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(fusegrad.nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, TB.TensorBase):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(fusegrad Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str) -> None:
        """Drop ``name`` from every registry and the instance dict (before re-registering)."""
        d = self.__dict__
        d.pop(name, None)
        for reg in ("_parameters", "_buffers", "_modules"):
            d[reg].pop(name, None)
        d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg in d and name in d[reg]:
                return d[reg][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            if reg in d and name in d[reg]:
                del d[reg][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # --- walking ------------------------------------------------------------------

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and all below it, depth first, in order.

        A module reachable twice is yielded once unless ``remove_duplicate=False``.
        """
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if remove_duplicate:
                if id(m) in memo:
                    continue
                memo.add(id(m))
            yield name, m
            children = [(name + ("." if name else "") + k, c)
                        for k, c in m._modules.items() if c is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if (
            recurse) else [(prefix, self)]
        seen = set()
        for mod_prefix, m in mods:
            for k, v in getattr(m, registry).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs, names dotted by module path (``"0.weight"``);
        a parameter shared by two modules is yielded once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters ``named_parameters`` yields, in its order (without the names)."""
        seen = set()
        for m in self._unique_modules() if recurse else (self,):
            for v in m._parameters.values():
                if v is not None and id(v) not in seen:
                    seen.add(id(v))
                    yield v

    def _unique_modules(self) -> Iterator[Module]:
        """``named_modules()``'s modules, in its order, without building their names."""
        memo = set()
        stack = [self]
        while stack:
            m = stack.pop()
            if id(m) in memo:
                continue
            memo.add(id(m))
            yield m
            stack.extend(reversed([c for c in m._modules.values() if c is not None]))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def apply(self, fn):
        """Call ``fn(m)`` on every submodule (children first, as PyTorch) and on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # --- modes and gradients --------------------------------------------------------

    def train(self, mode: bool = True):
        """Set training mode (``self.training``) here and in every submodule; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' gradients: to None (default), or to zeros in place."""
        for p in self.parameters():
            clear_grad(p, set_to_none)

    # --- dtype ------------------------------------------------------------------------

    def _apply(self, fn):
        """Replace every parameter's, gradient's and buffer's data by ``fn(data)`` in place
        (the Parameter objects stay, so optimizers holding them keep working)."""
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    p.data = fn(p.detach())
                    if p.grad is not None:
                        p.grad.data = fn(p.grad.detach())
                for k, b in m._buffers.items():
                    if b is not None:
                        m._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)`` converts floating parameters and buffers; ``to("cpu")`` is a no-op."""
        return self._apply(lambda t: t.to(*args, **kwargs) if t.is_floating_point() else t)

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def cpu(self):
        return self

    # --- state dict -------------------------------------------------------------------

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of every parameter and persistent buffer by dotted name.

        The values are detached tensors sharing memory with the module's
        (``keep_vars=True`` gives the Parameters themselves), as in PyTorch.
        """
        out = collections.OrderedDict() if destination is None else destination
        for mod_prefix, m in self.named_modules(prefix=prefix, remove_duplicate=False):
            dot = mod_prefix + ("." if mod_prefix else "")
            for k, p in m._parameters.items():
                if p is not None:
                    out[dot + k] = p if keep_vars else p.detach()
            for k, b in m._buffers.items():
                if b is not None and k not in m._non_persistent_buffers_set:
                    out[dot + k] = b if keep_vars else b.detach()
        return out

    def _local_state(self) -> dict:
        d = {k: p for k, p in self._parameters.items() if p is not None}
        d.update((k, b) for k, b in self._buffers.items()
                 if b is not None and k not in self._non_persistent_buffers_set)
        return d

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers.

        As in PyTorch: with ``strict=True`` missing and unexpected keys are a
        ``RuntimeError`` listing them; a value that is not a Tensor or whose
        shape differs is an error in either mode; values are cast to the
        parameter's dtype. With ``assign=True`` the state dict's tensors
        themselves become the parameters and buffers (keeping their dtype and
        memory; a plain Tensor is wrapped in a ``Parameter`` with the old
        parameter's ``requires_grad``). Returns ``(missing_keys,
        unexpected_keys)``. Unlike PyTorch, nothing is loaded when there is an
        error (no half-loaded model).
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors, copies = [], [], [], []
        for mod_prefix, m in self.named_modules(remove_duplicate=False):
            dot = mod_prefix + ("." if mod_prefix else "")
            local = m._local_state()
            for k, target in local.items():
                key = dot + k
                if key not in state_dict:
                    missing.append(key)
                    continue
                value = state_dict[key]
                if not isinstance(value, TB.TensorBase):
                    errors.append(f'While copying the parameter named "{key}", expected '
                                  "fusegrad.Tensor from checkpoint but received "
                                  f"{type(value)}")
                elif tuple(value.shape) != tuple(target.shape):
                    errors.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{value.shape} from checkpoint, the shape in current model "
                                  f"is {target.shape}.")
                else:
                    copies.append((m, k, target, value))
            for key in state_dict:
                if not isinstance(key, str) or not key.startswith(dot):
                    continue
                head, sep, _ = key[len(dot):].partition(".")
                if (sep and head not in m._modules) or (not sep and head not in local):
                    unexpected.append(key)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        with no_grad():
            for m, k, target, value in copies:
                if assign:
                    setattr(m, k, _assigned(target, value))
                else:
                    target.copy_(value)
        return _IncompatibleKeys(missing, unexpected)

    # --- printing -----------------------------------------------------------------------

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override it)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def clear_grad(p, set_to_none: bool) -> None:
    """PyTorch's per-parameter ``zero_grad``: drop the gradient or zero it in place."""
    if p.grad is None:
        return
    if set_to_none:
        p.grad = None
        return
    if p.grad.grad_fn is not None:
        p.grad.detach_()
    else:
        p.grad.requires_grad_(False)
    p.grad.zero_()


def _assigned(target, value):
    """What ``load_state_dict(assign=True)`` stores in place of ``target``."""
    if not isinstance(target, Parameter):
        return value
    if isinstance(value, Parameter):
        return value.requires_grad_(target.requires_grad)
    return Parameter(value, requires_grad=target.requires_grad)


jit_state.register_module_type(Module)  # fg.jit tracks modules' parameters and buffers
