"""The command line answers at once: ``akadze --version`` and every help page load no
SQLAlchemy, asyncpg or pydantic (the groups import them inside the commands that use them), so
they cost a Python start and typer, not the library (docs/cli.md). No clock is read here: a
subprocess lists the modules each path leaves in ``sys.modules``."""

from __future__ import annotations

import json
import subprocess

import typer.main

from akadze.cli import app
from tests.support import PYTHON, ROOT

#: what a help page or --version must not import: the database stack and the argument models
HEAVY = ("sqlalchemy", "asyncpg", "pydantic", "pydantic_core", "libcst", "starlette", "uvicorn")

#: runs each argument list (one JSON array a line on stdin) through the CLI in one process,
#: then prints the heavy modules it holds
_WALK = """
import json, sys
from akadze.cli import app
for line in sys.stdin:
    try:
        app(json.loads(line), prog_name="akadze")
    except SystemExit as exc:
        assert exc.code in (0, None), (line, exc.code)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in json.loads(sys.argv[1]))
print(json.dumps(heavy))
"""


def _heavy_after(*commands: list[str]) -> list[str]:
    done = subprocess.run(
        [PYTHON, "-c", _WALK, json.dumps(HEAVY)],
        input="".join(json.dumps(args) + "\n" for args in commands),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def _every_help_page() -> list[list[str]]:
    """``--help`` of the root, of every group and of every command, walked from the real tree."""
    pages: list[list[str]] = [["--help"]]

    def walk(command: object, path: list[str]) -> None:
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            pages.append([*path, name, "--help"])
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return pages


def test_version_imports_no_database_stack_or_pydantic() -> None:
    assert _heavy_after(["--version"]) == []


def test_jobs_list_help_imports_no_database_stack_or_pydantic() -> None:
    assert _heavy_after(["jobs", "list", "--help"]) == []


def test_no_help_page_imports_the_database_stack_or_pydantic() -> None:
    pages = _every_help_page()
    assert ["jobs", "list", "--help"] in pages
    assert ["codegen", "generate", "--help"] in pages
    assert len(pages) > 20
    assert _heavy_after(*pages) == []


def test_a_command_that_runs_still_loads_what_it_needs() -> None:
    """The lazy imports are not lost: a command that reaches the database has loaded its stack."""
    done = subprocess.run(
        [
            PYTHON,
            "-c",
            "import sys; from akadze.cli import app\n"
            "try: app(['jobs', 'list', '--database-url', 'postgresql://nobody@127.0.0.1:1/none'])\n"
            "except SystemExit as exc: print(exc.code, 'sqlalchemy' in sys.modules)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["2", "True"], done.stderr
    assert "cannot reach the database" in done.stderr
