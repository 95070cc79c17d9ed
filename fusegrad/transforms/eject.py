"""A standalone module of plain ``@numba.njit`` functions: no fusegrad import needed.

(Here, not in ``codegen/``: every file there is part of the generated code's cache key.)

``eject(functions)`` takes Numba functions (the ``exported`` wrappers of generated
modules, see ``transforms.export``) and writes one module holding them and,
transitively, everything they call: the entries of their generated modules, the
math-library and ``rt`` helpers, the intrinsics and constants those use. Each
function's source text is copied (through ``ast``, so comments are dropped), with
every global or closure name it uses renamed to the one definition of that value in
the new module (the math library builds one closure per dtype: ``reduce`` for
float64 and float32 become ``reduce`` and ``reduce_2``). Constants are written as
literals, modules of NumPy, Numba, llvmlite (Numba's code generator) and the
standard library as imports; a reference to any other module, or to a value that
has no literal, is an error. Functions the math library marks for LLVM inlining
keep that mark (a copy of ``codegen.inline``'s dispatcher, without fusegrad's cache
key). Module-level values computed at import are written as this machine's values
(``HAS_FMA``: on a CPU without FMA the exact product then calls libm's ``fma``, which
is still exact, only slower).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types

import numpy as np

_PRELUDE = '''

class _InlineDispatcher(CPUDispatcher):
    """A Numba function whose LLVM definitions are marked ``alwaysinline`` when compiled
    or loaded, so loops that call it still vectorise."""

    def add_overload(self, cres):
        module = cres.library._get_module_for_linking()
        for fn in module.functions:
            if (not fn.is_declaration and not fn.name.startswith(("cpython.", "cfunc."))
                    and "alwaysinline" not in str(fn.attributes)):
                fn.add_function_attribute("alwaysinline")
        super().add_overload(cres)


def inline_njit(py_func):
    disp = _InlineDispatcher(py_func, targetoptions={"nopython": True, "error_model": "numpy"})
    disp.enable_caching()
    return disp
'''

_ALLOWED_MODULES = ("numpy", "numba", "llvmlite", "math", "cmath", "operator", "functools")


class EjectError(RuntimeError):
    """A value a function uses cannot be written into a standalone module."""


class _Ejector:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.keep: list = []  # objects named by id: kept alive while ejecting
        self.taken = {"numba", "np", "inline_njit", "CPUDispatcher", "_InlineDispatcher"}
        self.imports: list[str] = ["import numba", "import numpy as np",
                                   "from numba.core.registry import CPUDispatcher"]
        self.blocks: list[str] = []
        self.literals: dict[str, str] = {}
        self.inline_used = False

    def fresh(self, base: str) -> str:
        name, k = base, 2
        while name in self.taken or hasattr(builtins, name):
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def resolve(self, value, base: str, prefix: str = "") -> str:
        """The name of ``value`` in the new module, defining it there if new."""
        if value is np:
            return "np"
        if isinstance(value, types.ModuleType) and value.__name__ == "numba":
            return "numba"
        hit = self.names.get(id(value))
        if hit is not None:
            return hit
        if isinstance(value, types.ModuleType):
            return self._module(value, base)
        from numba.core.extending import _Intrinsic
        from numba.core.registry import CPUDispatcher

        if isinstance(value, CPUDispatcher):
            return self._function(value.py_func, base, prefix, dispatcher=value)
        if isinstance(value, _Intrinsic):
            return self._function(value._defn, base, prefix, obj=value)
        if isinstance(value, types.FunctionType):
            if value.__module__.startswith("fusegrad"):
                return self._function(value, base, prefix)
            return self._import_attr(value, base)
        if isinstance(value, type) or callable(value):
            return self._import_attr(value, base)
        return self._constant(value, base)

    def _remember(self, value, name: str) -> str:
        self.names[id(value)] = name
        self.keep.append(value)
        return name

    def _module(self, mod, base: str) -> str:
        root = mod.__name__.split(".")[0]
        if root not in _ALLOWED_MODULES:
            raise EjectError(f"eject: a function uses module {mod.__name__} as a value")
        name = self._remember(mod, self.fresh(base))
        self.imports.append(f"import {mod.__name__} as {name}")
        return name

    def _import_attr(self, value, base: str) -> str:
        module = getattr(value, "__module__", None) or ""
        qual = getattr(value, "__qualname__", getattr(value, "__name__", ""))
        if module.split(".")[0] not in _ALLOWED_MODULES or "." in qual or not qual:
            raise EjectError(f"eject: cannot import {value!r} ({module}.{qual})")
        name = self._remember(value, self.fresh(base))
        self.imports.append(f"from {module} import {qual} as {name}")
        return name

    def _constant(self, value, base: str) -> str:
        text = _literal(value)
        if text in self.literals:  # equal constants of several closures: one name
            return self._remember(value, self.literals[text])
        name = self.literals[text] = self._remember(value, self.fresh(base))
        self.blocks.append(f"{name} = {text}")
        return name

    def _function(self, fn, base: str, prefix: str, dispatcher=None, name=None,
                  obj=None) -> str:
        generated = fn.__module__.startswith("fusegrad_generated")
        obj = dispatcher if dispatcher is not None else fn if obj is None else obj
        name = self._remember(obj, name or self.fresh((prefix if generated else "") + base))
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
        if dispatcher is not None:  # its decorator is written from the dispatcher's options
            tree.decorator_list = []
        scope = dict(fn.__globals__)
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            scope[var] = cell.cell_contents
        local = _local_names(tree)
        sub_prefix = (prefix or f"{name}_") if generated else ""
        renamer = _Renamer(self, scope, local, sub_prefix)
        tree = renamer.visit(tree)
        tree.name = name
        if dispatcher is not None:
            tree.decorator_list = [self._decorator(dispatcher)]
        self.blocks.append(ast.unparse(tree))
        for impl in _overloads_of(fn):  # a Python function Numba compiles through @overload
            self._function(impl, impl.__name__, "")
        return name

    def _decorator(self, disp) -> ast.expr:
        from ..codegen.inline import InlineDispatcher

        if isinstance(disp, InlineDispatcher):
            self.inline_used = True
            return ast.Name("inline_njit", ast.Load())
        opts = {k: v for k, v in disp.targetoptions.items()
                if k in ("error_model", "parallel", "fastmath", "boundscheck") and v}
        args = ", ".join([*(f"{k}={v!r}" for k, v in opts.items()), "cache=True"])
        return ast.parse(f"numba.njit({args})", mode="eval").body

    def text(self, doc: str) -> str:
        parts = [f'"""{doc}"""', "", *self.imports]
        if self.inline_used:
            parts.append(_PRELUDE)
        return "\n".join(parts) + "\n\n\n" + "\n\n\n".join(self.blocks) + "\n"


class _Renamer(ast.NodeTransformer):
    def __init__(self, ej: _Ejector, scope: dict, local: set[str], prefix: str):
        self.ej, self.scope, self.local, self.prefix = ej, scope, local, prefix

    def _fusegrad_module(self, node) -> types.ModuleType | None:
        if isinstance(node, ast.Name) and node.id not in self.local:
            value = self.scope.get(node.id)
            if isinstance(value, types.ModuleType) and value.__name__.startswith("fusegrad"):
                return value
        return None

    def visit_Attribute(self, node):
        mod = self._fusegrad_module(node.value)
        if mod is not None:  # ml.exp_f64 -> exp_f64, defined in the new module
            return ast.copy_location(ast.Name(self.ej.resolve(
                getattr(mod, node.attr), node.attr, self.prefix), ast.Load()), node)
        return self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.local or node.id not in self.scope or not isinstance(
                node.ctx, ast.Load):
            return node
        return ast.copy_location(ast.Name(self.ej.resolve(self.scope[node.id], node.id,
                                                          self.prefix), ast.Load()), node)


def _local_names(tree) -> set[str]:
    """Names a function binds (parameters, assignments, loop targets, inner defs)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef) and node is not tree:
            out.add(node.name)
    return out


def _overloads_of(fn) -> list:
    """The functions of ``fn``'s module registered with ``@overload(fn ...)``."""
    if not fn.__module__.startswith("fusegrad"):
        return []
    found = []
    for value in list(fn.__globals__.values()):
        if isinstance(value, types.FunctionType) and value is not fn and (
                value.__module__ == fn.__module__):
            try:
                head = inspect.getsource(value).lstrip().split("\n", 1)[0]
            except (OSError, TypeError):
                continue
            if head.startswith(f"@overload({fn.__name__},") or head == f"@overload({fn.__name__})":
                found.append(value)
    return found


def _literal(value) -> str:
    if isinstance(value, bool | int | float | str | type(None) | np.generic):
        text = repr(value)
    elif isinstance(value, tuple):
        text = "(" + "".join(_literal(v) + ", " for v in value) + ")"
    elif isinstance(value, np.ndarray):
        v = np.ascontiguousarray(value)
        text = (f"np.frombuffer(bytes.fromhex({v.tobytes().hex()!r}), "
                f"np.dtype({v.dtype.str!r})).reshape({tuple(v.shape)!r}).copy()")
    else:
        raise EjectError(f"eject: no literal for a value of type {type(value).__name__}")
    if isinstance(value, float | np.floating) and not np.isfinite(value):
        text = f"np.{type(value).__name__}({str(float(value))!r})" if isinstance(
            value, np.floating) else f"float({text!r})"
    return text


def eject(functions: dict[str, object], doc: str) -> str:
    """The text of a standalone module defining ``functions`` (new name -> Numba
    dispatcher) and everything they use; ``doc`` is its docstring."""
    ej = _Ejector()
    ej.taken |= set(functions)
    for name, disp in functions.items():
        ej._function(disp.py_func, name, "", dispatcher=disp, name=name)
    return ej.text(doc)
