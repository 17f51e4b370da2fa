"""No import cycle in akadze/ or akadze_codegen/, and each command-line module imports first.

The walk reads every module's source: an import anywhere in it (at the top or inside a
function, where a deferred import hides a cycle rather than removes it) is an edge, except
under ``if TYPE_CHECKING:`` (never run); so is a module named by a string in a module that
calls ``importlib.import_module``. A package's ``__init__`` importing its own
submodules is not a cycle: Python runs a package before its submodules by design, so the
parent-package step of an import is not an edge.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGES = ("akadze", "akadze_codegen")


def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _under_type_checking(node):
            yield from (i for child in node.orelse for i in _imports(child))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from a import b` imports module a.b when b is a module, else a
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        edges.update(target for target in targets if target in known and target != name)
    edges.update(_named_for_importlib(tree, known) - {name})
    return edges


def _named_for_importlib(tree: ast.AST, known: set[str]) -> set[str]:
    """In a module that calls ``importlib.import_module``, every string naming a module of
    ``known``: the modules it imports by name (akadze.cli's table of lazy command groups)."""
    calls = any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        for node in ast.walk(tree)
    )
    if not calls:
        return set()
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known
    }


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def test_the_walk_sees_the_imports_it_must() -> None:
    graph = import_graph()
    assert "akadze.cli.common" in graph["akadze.cli.jobs"]
    # by name: akadze.cli mounts its command groups through importlib.import_module
    assert "akadze_codegen.cli" in graph["akadze.cli"]
    # deferred imports count: the codegen group reaches the shared helpers inside a function
    assert "akadze.cli.common" in graph["akadze_codegen.cli"]


def test_the_walk_finds_a_cycle_when_there_is_one() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_akadze_or_akadze_codegen() -> None:
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles (each list imports itself round): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize(
    "module",
    sorted(
        name
        for name in module_files()
        if name.startswith(("akadze.cli", "akadze_codegen.cli")) and not name.endswith("__main__")
    ),
)
def test_each_command_line_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    """An import order a cycle through a package's __init__ would break (the walk cannot see it)."""
    done = subprocess.run(
        [sys.executable, "-c", f"import importlib; importlib.import_module({module!r})"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_event_bus_reaches_no_subscriber() -> None:
    """The bus knows events and nothing that listens to them: the log line, metrics and tracing
    subscribe to it as a user's subscriber does, so none of them is reachable from it."""
    graph = import_graph()
    reached: set[str] = set()
    todo = ["akadze.events.bus"]
    while todo:
        for name in graph[todo.pop()] - reached:
            reached.add(name)
            todo.append(name)
    subscribers = {
        name
        for name in graph
        if name.startswith("akadze.events.") and name not in {"akadze.events.bus", "akadze.events.kinds"}
    }
    assert {"akadze.events.logs", "akadze.events.metrics", "akadze.events.tracing"} <= subscribers
    assert reached & subscribers == set(), reached
