"""The package layout: no import cycles between fusegrad's modules.

Every module under ``fusegrad/`` is parsed (not imported) and every import in it,
module-level or inside a function, becomes an edge of the module import graph;
only imports under ``if TYPE_CHECKING:`` are left out, as they never run. A cycle
(a strongly connected component of more than one module) fails the test unless it
is listed in ``ALLOWED_CYCLES``, which takes a cycle only together with a sentence
in one of its modules' docstrings saying why it is the clearest design. The layer
order between packages is import-linter's job (``lint-imports``, pyproject.toml).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fusegrad"

#: Cycles kept on purpose, each a frozenset of module names. None today.
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()


def modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's ``__init__``), for every file of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return found


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, at any depth, outside ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not _type_checking(c))


def _existing(name: str, mods) -> str:
    while name not in mods:
        name = name.rpartition(".")[0]
    return name


def import_graph(mods) -> dict[str, set[str]]:
    """Module -> the fusegrad modules it imports (``from pkg import mod`` is ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        base = name if is_pkg else name.rpartition(".")[0]
        targets = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {_existing(a.name, mods) for a in node.names
                            if a.name.split(".")[0] == "fusegrad"}
                continue
            if node.level:
                parts = base.split(".")
                src = ".".join(parts[: len(parts) - node.level + 1] + [node.module or ""])
                src = src.rstrip(".")
            else:
                src = node.module or ""
            if src.split(".")[0] != "fusegrad":
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                targets.add(sub if sub in mods else _existing(src, mods))
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            v, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(frozenset(comp))
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph(modules())


def test_the_graph_sees_module_level_and_function_level_imports(graph):
    assert "fusegrad.ir.bind" in graph["fusegrad.eager.record"]  # from ..ir.bind import ...
    assert "fusegrad.eager.capture" in graph["fusegrad.nn.module"]  # from ..eager import capture
    assert "fusegrad.codegen.mathlib.coeffs" in graph["fusegrad.codegen.mathlib.exp"]
    assert "fusegrad.ir.core" not in graph["fusegrad.ir.printer"]  # under TYPE_CHECKING only


def test_cycles_are_found_through_function_level_imports():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [frozenset("abc")]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles(graph):
    found = set(cycles(graph))
    unexpected = [sorted(c) for c in found - ALLOWED_CYCLES]
    assert not unexpected, (
        "import cycles between fusegrad modules (move the shared part into its own module, "
        f"split a module along a concept, or invert with a registration): {unexpected}")
    stale = [sorted(c) for c in ALLOWED_CYCLES - found]
    assert not stale, f"no longer cycles; remove them from ALLOWED_CYCLES: {stale}"


def test_every_package_says_what_it_holds():
    missing = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("__init__.py"))
               if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"packages without a docstring: {missing}"
