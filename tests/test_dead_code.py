"""No dead code in akadze/ or akadze_codegen/: every module-level function and class is used
somewhere (by its own module, an import, or an attribute of its module), and every attribute a
class sets on ``self`` is read somewhere.

Uses count across the packages, tests/, examples/, bench/ and scripts/. Not counted as dead:
decorated functions (a decorator registers them), pytest hooks, names a module exports in
``__all__``, the modules users call (PUBLIC), the error classes, which are the public tree of
akadze/errors.py (each of those must be raised or subclassed somewhere: the last test), and the
values an error carries as attributes for its catcher.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tests.support import ROOT

PACKAGES = ("akadze", "akadze_codegen")
USERS = (*PACKAGES, "tests", "examples", "bench", "scripts")
#: modules whose every public name is for users (docs/), used or not inside the project
PUBLIC = {
    "akadze",
    "akadze.testing",
    "akadze.client",
    "akadze.testing.plugin",
    "akadze.alembic",
    "akadze.events.metrics",
    "akadze.events.tracing",
    "akadze_codegen",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parsed(folders: tuple[str, ...]) -> Iterator[tuple[str, Path, ast.Module]]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "golden" in path.parts or ".venvs" in path.parts:
                continue
            yield module_name(path), path, ast.parse(path.read_text(encoding="utf-8"))


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def uses() -> tuple[set[tuple[str, str]], Counter[str]]:
    """(module, name) pairs used from outside or inside their module; attribute names read."""
    used: set[tuple[str, str]] = set()
    read: Counter[str] = Counter()
    for module, path, tree in parsed(USERS):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    used.add((base, alias.name))
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add((module, node.id))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read[node.attr] += 1
                owner = _dotted(node.value)
                if owner:
                    head, _, rest = owner.partition(".")
                    resolved = aliases.get(head, head) + (f".{rest}" if rest else "")
                    used.add((resolved, node.attr))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                read[node.value] += 1  # getattr(obj, "name") and the like
    return used, read


def _exported(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {elt.value for elt in getattr(node.value, "elts", []) if isinstance(elt, ast.Constant)}
    return set()


def test_every_module_level_function_and_class_is_used() -> None:
    used, _ = uses()
    unused = []
    for module, _path, tree in parsed(PACKAGES):
        exported = _exported(tree)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if node.decorator_list or node.name.startswith("pytest_") or node.name in exported:
                continue
            if module in PUBLIC and not node.name.startswith("_"):
                continue
            if module.endswith("errors") and isinstance(node, ast.ClassDef):
                continue
            if (module, node.name) not in used:
                unused.append(f"{module}.{node.name}")
    assert unused == [], f"defined but never used: {unused}"


def _is_error(node: ast.ClassDef) -> bool:
    return any((_dotted(base) or "").endswith(("Error", "Exception", "Mismatch")) for base in node.bases)


def test_every_attribute_set_on_self_is_read() -> None:
    _, read = uses()
    unread = sorted(
        f"{module}.{cls.name}: self.{node.attr}"
        for module, _path, tree in parsed(PACKAGES)
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and not _is_error(cls)
        for node in ast.walk(cls)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and read[node.attr] == 0
    )
    assert unread == [], f"written but never read: {unread}"


def test_every_error_class_is_raised_or_subclassed() -> None:
    errors = ast.parse((ROOT / "akadze" / "errors.py").read_text(encoding="utf-8"))
    classes = [node for node in errors.body if isinstance(node, ast.ClassDef)]
    bases = {_dotted(base) for node in classes for base in node.bases}
    called: set[str] = set()
    for _module, _path, tree in parsed(PACKAGES):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (name := _dotted(node.func)):
                called.add(name.rpartition(".")[2])
            elif isinstance(node, ast.ClassDef):
                bases.update(_dotted(base) for base in node.bases)
    never = [node.name for node in classes if node.name not in called and node.name not in bases]
    assert never == [], f"error classes never raised: {never}"
