"""Every db/sql/*.sql file is used by exactly one Queries method of the same name, starts with
its header, and reads the same in both placeholder forms.

Queries is composed of one class per area (akadze/db/queries/); the methods are read from the
source of every class in its MRO, so a statement added to any of them is held to the same rules.
"""

from __future__ import annotations

import ast
import importlib.resources
import inspect
import re
from collections import Counter

import asyncpg
import pytest

from akadze.db.queries import Queries
from akadze.db.sql import JOB_COLUMNS, JSON_COLUMNS, statements
from akadze.job import Job
from tests.support import module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


SQL_FILES = sorted(
    entry.name.removesuffix(".sql")
    for entry in (importlib.resources.files("akadze.db") / "sql").iterdir()
    if entry.name.endswith(".sql")
)


def statement_uses() -> dict[str, list[str]]:
    """Queries method name -> the statement names it passes to statement(...)."""
    uses: dict[str, list[str]] = {}
    for area in Queries.__mro__[:-1]:  # every class but object
        [area_class] = ast.parse(inspect.getsource(area)).body
        assert isinstance(area_class, ast.ClassDef)
        for method in area_class.body:
            if not isinstance(method, ast.AsyncFunctionDef | ast.FunctionDef):
                continue
            assert method.name not in uses, f"Queries.{method.name} is defined twice"
            uses[method.name] = [
                call.args[0].value
                for call in ast.walk(method)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "statement"
                and call.args
                and isinstance(call.args[0], ast.Constant)
            ]
    return uses


def test_the_sql_folder_is_not_empty() -> None:
    assert {"claim_completing", "enqueue", "enqueue_batch"} <= set(SQL_FILES)


def test_every_sql_file_is_used_by_exactly_one_queries_method_of_its_name() -> None:
    uses = statement_uses()
    counts = Counter(name for names in uses.values() for name in names)
    for name in SQL_FILES:
        assert counts[name] == 1, f"{name}.sql is used {counts[name]} times"
        assert uses.get(name) == [name], f"Queries.{name} must run {name}.sql, and only it"


def test_every_statement_a_method_names_has_its_file() -> None:
    named = {name for names in statement_uses().values() for name in names}
    assert named <= set(SQL_FILES)


def test_no_other_module_executes_a_statement_file() -> None:
    root = importlib.resources.files("akadze")
    offenders = []
    for path in sorted(str(p) for p in root.rglob("*.py")):  # type: ignore[attr-defined]
        if "/db/queries/" in path or path.endswith("db/sql.py"):
            continue
        if path.endswith("db/pooled.py"):
            continue  # describes the statements to make their functions (a migration's text); runs none
        with open(path, encoding="utf-8") as source:
            if "statement(" in source.read():
                offenders.append(path)
    assert offenders == []


def test_job_row_is_every_field_a_job_reads_from_its_row() -> None:
    assert set(JOB_COLUMNS) == set(Job.__struct_fields__) - {"duplicate"}
    assert JSON_COLUMNS <= set(JOB_COLUMNS)


#: every statement: one per file
STATEMENTS = SQL_FILES


@pytest.mark.parametrize("name", STATEMENTS)
def test_every_fragment_a_sql_file_names_is_expanded_at_load(name: str) -> None:
    assert re.search(r"\{\w+\}", statements()[name].source) is None


@pytest.mark.parametrize("name", SQL_FILES)
def test_every_sql_file_starts_with_a_header_naming_it(name: str) -> None:
    source = (importlib.resources.files("akadze.db") / "sql" / f"{name}.sql").read_text(encoding="utf-8")
    first = source.splitlines()[0]
    assert first.startswith(f"-- {name}:"), first
    assert len(first) > len(f"-- {name}:") + 10, "the header says what the statement does"


async def test_both_placeholder_forms_of_every_statement_take_the_same_parameters(database_url: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        for name in STATEMENTS:
            stmt = statements()[name]
            prepared = await conn.prepare(stmt.pg)
            assert len(prepared.get_parameters()) == len(stmt.params), name
            assert set(stmt.clause._bindparams) == set(stmt.params), name
    finally:
        await conn.close()
