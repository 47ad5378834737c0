"""No import cycle inside a package, lazy imports included; the server kit never imports the client.

A function-level import hides a cycle from Python (it runs after both modules exist),
not from a reader. So each package's modules, with every import they run at any level
(``if TYPE_CHECKING:`` blocks aside), must form a graph without a cycle: a
function-level import stays only for start-up speed, and then it closes no cycle.
An edge is what an import statement names (``from a import b`` is ``a.b`` when that is
a module, else ``a``); the parent packages Python imports on the way are not edges, so a
package may import its submodules lazily (the harness's drivers, chosen by name).

The server kit (``ahp_protocol.server`` and all it imports, type-only imports included)
depends on nothing of ``ahp_protocol.client``: a backend is not a harness.

Static: the sources are parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = sorted(path.name for path in (REPO / "packages").glob("*/src/ahp_*"))


def _modules(top: str) -> dict[str, Path]:
    src = next((REPO / "packages").glob(f"*/src/{top}")).parent
    found = {}
    for path in sorted((src / top).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(
    nodes: Iterable[ast.AST], *, typing_too: bool
) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth; ``if TYPE_CHECKING:`` bodies only if asked."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _type_checking(node.test) and not typing_too:
            yield from _imports(node.orelse, typing_too=False)
        else:
            yield from _imports(ast.iter_child_nodes(node), typing_too=typing_too)


def import_graph(top: str, *, typing_too: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of the same package its import statements name."""
    modules = _modules(top)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _imports([tree], typing_too=typing_too):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in modules else base)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while (member := stack.pop()) != module:
                component.append(member)
            if component:
                found.append(sorted([module, *component]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


@pytest.mark.parametrize("top", PACKAGES)
def test_no_package_has_an_import_cycle(top: str) -> None:
    assert cycles(import_graph(top)) == []


def test_the_server_kit_imports_nothing_of_the_client() -> None:
    graph = import_graph("ahp_protocol", typing_too=True)
    reached = {module for module in graph if module.startswith("ahp_protocol.server")}
    todo = list(reached)
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert sorted(m for m in reached if m.startswith("ahp_protocol.client")) == []


def test_the_check_sees_a_cycle_a_lazy_import_hides() -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}  # b imports a inside a function
    assert cycles(graph) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
