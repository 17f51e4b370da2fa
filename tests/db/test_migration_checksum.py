"""An applied migration whose shipped file was edited stops the migration, naming the file."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from akadze import Akadze
from akadze.cli import app as cli
from akadze.db import migrate as migrate_module
from akadze.errors import MigrationEditedError


@pytest.fixture
def edited_first_migration(monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped 0001 as a later edit would leave it (one statement added); returns its file."""
    shipped = migrate_module.migrations()
    first = dataclasses.replace(
        shipped[0], sql=shipped[0].sql + "\nCREATE INDEX edited ON akadze_jobs (id);\n"
    )
    monkeypatch.setattr(migrate_module, "migrations", lambda: [first, *shipped[1:]])
    return f"{first.version:04d}_{first.name}.sql"


async def test_migrate_refuses_an_edited_applied_migration_naming_its_file(
    database_url: str, edited_first_migration: str
) -> None:
    async with Akadze(database_url=database_url) as app:
        with pytest.raises(MigrationEditedError) as raised:
            await app.migrate()
    assert raised.value.file_name == edited_first_migration == "0001_initial.sql"
    assert "0001_initial.sql" in str(raised.value) and "edited" in str(raised.value)


async def test_an_unchanged_schema_still_migrates_to_nothing(database_url: str) -> None:
    async with Akadze(database_url=database_url) as app:
        assert await app.migrate() == []


def test_db_migrate_says_which_file_in_one_line_and_exits_2(
    database_url: str, edited_first_migration: str
) -> None:
    result = CliRunner().invoke(cli, ["db", "migrate", "--database-url", database_url])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: migration 0001_initial.sql was applied with checksum")
