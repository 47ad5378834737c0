"""One meaning per name: each word of CONTRIBUTING.md's "Words" is defined in one module.

``Verdict`` is a requirement's verdict in a conformance report, ``Outcome`` a
diagnostic's outcome, ``Hook`` a registration's ``hooks[]`` entry (the wire's), ``Hooks``
the harness-facing client. A second class, type alias or import alias of that name
anywhere in ``packages/*/src`` fails here: give the new thing a name that says what it
is (``CallDecision``, ``RoundTrip``, ``NativeDecision``, ...). Importing the one
definition under its own name (a re-export) is no second meaning.

Static: the sources are parsed, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

ONE_MEANING = {
    "Verdict": "ahp_conformance.report",
    "Outcome": "ahp_protocol.client._result",
    "Hook": "ahp_protocol.wire.registration",
    "Hooks": "ahp_protocol.client.hooks",
}
"""Each guarded name -> the one module that defines it."""


def _module(path: Path) -> str:
    src = next(parent for parent in path.parents if parent.name == "src")
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def defined_names(tree: ast.AST) -> Iterator[str]:
    """Every name a class, function, assignment, type alias or ``as`` import defines."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id
        elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (3.12+)
            name = getattr(node, "name", None)
            if isinstance(name, ast.Name):
                yield name.id
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield from (alias.asname for alias in node.names if alias.asname)


def definitions() -> dict[str, list[str]]:
    """Guarded name -> the modules of ``packages/*/src`` that define it."""
    found: dict[str, list[str]] = {name: [] for name in ONE_MEANING}
    for path in sorted((REPO / "packages").glob("*/src/**/*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in set(defined_names(tree)) & found.keys():
            found[name].append(_module(path))
    return found


@pytest.mark.parametrize("name", sorted(ONE_MEANING))
def test_each_guarded_name_is_defined_in_one_module(name: str) -> None:
    assert definitions()[name] == [ONE_MEANING[name]]


def test_the_scan_sees_every_way_to_define_a_name() -> None:
    source = """
class Verdict: ...
Outcome = int
Hook: type = int
from x import y as Hooks
def f():
    class Verdict: ...
"""
    names = list(defined_names(ast.parse(source)))
    assert {"Verdict", "Outcome", "Hook", "Hooks"} <= set(names)
    assert names.count("Verdict") == 2
    assert "y" not in list(defined_names(ast.parse("from x import y")))
