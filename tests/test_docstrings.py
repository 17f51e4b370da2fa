"""Every public definition of akadze/ and akadze_codegen/ says what it is for (STYLE.md, "Docstrings
and comments"): module-level classes and functions whose names do not start with ``_``, and the
methods (properties, overloads and typer commands included) and nested classes of public classes.
``__init__`` and other underscored names, and functions nested in functions, are not required.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support import ROOT

PACKAGES = ("akadze", "akadze_codegen")
Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def public_definitions(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, dotted name, has a docstring) for each public definition of one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scopes: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    while scopes:
        prefix, body = scopes.pop()
        for node in body:
            if not isinstance(node, Definition) or node.name.startswith("_"):
                continue
            yield node.lineno, f"{prefix}{node.name}", ast.get_docstring(node) is not None
            if isinstance(node, ast.ClassDef):
                scopes.append((f"{prefix}{node.name}.", node.body))


def missing_docstrings() -> list[str]:
    """``path:line name`` for every public definition without a docstring, in file order."""
    missing: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT)
            found = sorted(public_definitions(path))
            missing += [f"{where}:{line} {name}" for line, name, documented in found if not documented]
    return missing


def test_every_public_class_and_function_has_a_docstring() -> None:
    missing = missing_docstrings()
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(missing)


def test_the_walk_finds_methods_properties_and_overloads_but_not_nested_functions(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text(
        "from typing import overload\n"
        "class Shown:\n"
        '    """Documented."""\n'
        "    def __init__(self) -> None: ...\n"
        "    @property\n"
        "    def size(self) -> int: ...\n"
        "    @overload\n"
        "    def get(self, key: int) -> int: ...\n"
        "    def _private(self) -> None: ...\n"
        "class _Hidden:\n"
        "    def method(self) -> None: ...\n"
        "def command() -> None:\n"
        "    def inner() -> None: ...\n",
        encoding="utf-8",
    )
    found = {name: documented for _, name, documented in public_definitions(module)}
    assert found == {"Shown": True, "Shown.size": False, "Shown.get": False, "command": False}
