"""No module of akadze/ or akadze_codegen/ over 400 lines (STYLE.md: a module reads in one
sitting), and every public class and function of akadze_codegen says what it is for."""

from __future__ import annotations

import ast

import pytest

from tests.support import ROOT

LIMIT = 400


@pytest.mark.parametrize("package", ["akadze", "akadze_codegen"])
def test_no_module_is_over_400_lines(package: str) -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert long == {}


def test_every_public_class_and_function_of_akadze_codegen_has_a_docstring() -> None:
    """Module-level and class-level definitions whose names do not start with ``_``."""
    missing: list[str] = []
    for path in sorted((ROOT / "akadze_codegen").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scopes: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
        while scopes:
            prefix, body = scopes.pop()
            for node in body:
                if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if node.name.startswith("_"):
                    continue
                name = f"{path.relative_to(ROOT)}:{prefix}{node.name}"
                if ast.get_docstring(node) is None:
                    missing.append(name)
                if isinstance(node, ast.ClassDef):
                    scopes.append((f"{prefix}{node.name}.", node.body))
    assert missing == []
