"""akadze inside a real Alembic project (async env.py on asyncpg, made by `alembic init -t
async`): autogenerate leaves akadze's tables alone, a revision written by `akadze db revision
--alembic` builds the schema under the lock and record of `akadze db migrate`, and downgrade
refuses."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from akadze.app import normalize_url
from akadze.db.locks import MIGRATE
from akadze.db.migrate import migrations
from tests.conftest import with_database
from tests.support import ROOT, execute, fetch, plain

pytest.importorskip("alembic")

ENV_PATCH = """
import os

from akadze.alembic import include_name, include_object
from models import metadata

config.set_main_option("sqlalchemy.url", os.environ["APP_DATABASE_URL"].replace("%", "%%"))
target_metadata = metadata
HOOKS = {} if os.environ.get("WITHOUT_AKADZE_HOOKS") else {
    "include_object": include_object,
    "include_name": include_name,
}
"""

MODELS = """
from sqlalchemy import Column, Integer, MetaData, Table, Text

metadata = MetaData()
orders = Table("orders", metadata, Column("id", Integer, primary_key=True), Column("note", Text))
"""

FIRST = '''"""orders

Revision ID: 0a0a0a0a0a0a
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0a0a0a0a0a0a"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("orders", sa.Column("id", sa.Integer, primary_key=True), sa.Column("note", sa.Text))


def downgrade() -> None:
    op.drop_table("orders")
'''


def run(folder: Path, *args: str, database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        **os.environ,
        "APP_DATABASE_URL": normalize_url(database_url) if database_url else "",
        "AKADZE_DATABASE_URL": database_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)]),
        **env,
    }
    return subprocess.run(args, cwd=folder, env=full, capture_output=True, text=True, timeout=120)


@pytest.fixture
def empty_database(server_url: str) -> Iterator[str]:
    name = f"akadze_alembic_{os.getpid()}"
    asyncio.run(execute(server_url, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    yield with_database(server_url, name)
    asyncio.run(execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def project(tmp_path: Path, empty_database: str) -> Path:
    """A project made by Alembic's own async template, with one revision of its own."""
    done = run(
        tmp_path,
        sys.executable,
        "-m",
        "alembic",
        "init",
        "-t",
        "async",
        "migrations",
        database_url=empty_database,
    )
    assert done.returncode == 0, done.stderr
    env = tmp_path / "migrations" / "env.py"
    source = env.read_text()
    source = source.replace("target_metadata = None\n", ENV_PATCH)
    source = source.replace(
        "context.configure(connection=connection, target_metadata=target_metadata)",
        "context.configure(connection=connection, target_metadata=target_metadata, **HOOKS)",
    )
    assert "**HOOKS" in source and "include_object" in source
    env.write_text(source)
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "migrations" / "versions" / "0a0a0a0a0a0a_orders.py").write_text(FIRST)
    return tmp_path


def alembic(project: Path, *args: str, database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run(project, sys.executable, "-m", "alembic", *args, database_url=database_url, **env)


def akadze(project: Path, *args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    return run(project, sys.executable, "-m", "akadze.cli", *args, database_url=database_url)


async def recorded(database_url: str) -> list[int]:
    return [
        r["version"]
        for r in await fetch(database_url, "SELECT version FROM akadze_schema_migrations ORDER BY 1")
    ]


def test_a_revision_builds_akadze_schema_and_everything_agrees(project: Path, empty_database: str) -> None:
    url = empty_database
    versions = project / "migrations" / "versions"
    written = akadze(project, "db", "revision", "--alembic", str(versions), database_url=url)
    assert written.returncode == 0, written.stderr
    revision = Path(written.stdout.strip())
    assert revision.parent == versions and 'down_revision = "0a0a0a0a0a0a"' in revision.read_text().replace(
        "'", '"'
    )

    assert akadze(project, "db", "status", database_url=url).returncode == 1
    up = alembic(project, "upgrade", "head", database_url=url)
    assert up.returncode == 0, up.stderr
    assert asyncio.run(recorded(url)) == [m.version for m in migrations()]
    status = akadze(project, "db", "status", database_url=url)
    assert status.returncode == 0, status.stdout + status.stderr
    assert akadze(project, "db", "migrate", database_url=url).stdout.strip() == "schema is up to date"

    # autogenerate sees the project's tables only: nothing to do
    check = alembic(project, "check", database_url=url)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No new upgrade operations detected" in check.stdout + check.stderr
    # without the hooks it would drop akadze's tables: the hooks are what keeps them
    unguarded = alembic(project, "check", database_url=url, WITHOUT_AKADZE_HOOKS="1")
    assert unguarded.returncode != 0
    assert "akadze_jobs" in unguarded.stdout + unguarded.stderr

    # forward-only: going back through akadze's revision refuses, and changes nothing
    down = alembic(project, "downgrade", "-1", database_url=url)
    assert down.returncode != 0
    assert "akadze's migrations are forward-only" in down.stderr
    assert asyncio.run(recorded(url)) == [m.version for m in migrations()]


def test_upgrade_after_akadze_db_migrate_applies_nothing_twice(project: Path, empty_database: str) -> None:
    url = empty_database
    assert akadze(project, "db", "migrate", database_url=url).returncode == 0
    before = asyncio.run(fetch(url, "SELECT version, applied_at FROM akadze_schema_migrations ORDER BY 1"))
    versions = project / "migrations" / "versions"
    assert akadze(project, "db", "revision", "--alembic", str(versions), database_url=url).returncode == 0
    up = alembic(project, "upgrade", "head", database_url=url)
    assert up.returncode == 0, up.stderr
    after = asyncio.run(fetch(url, "SELECT version, applied_at FROM akadze_schema_migrations ORDER BY 1"))
    assert [tuple(r) for r in after] == [tuple(r) for r in before]


def test_the_revision_waits_for_the_lock_akadze_db_migrate_takes(project: Path, empty_database: str) -> None:
    url = empty_database
    versions = project / "migrations" / "versions"
    assert akadze(project, "db", "revision", "--alembic", str(versions), database_url=url).returncode == 0

    async def scenario() -> None:
        holder = await asyncpg.connect(plain(url))
        try:
            transaction = holder.transaction()
            await transaction.start()
            await holder.execute("SELECT pg_advisory_xact_lock($1)", MIGRATE)
            env = {
                **os.environ,
                "APP_DATABASE_URL": normalize_url(url),
                "PYTHONPATH": os.pathsep.join([str(ROOT), str(project)]),
            }
            upgrade = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "alembic",
                "upgrade",
                "head",
                cwd=project,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # until the upgrade waits for the lock
                waiting = await holder.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                )
                if waiting:
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the upgrade never waited for the lock")
            assert upgrade.returncode is None
            assert await holder.fetchval("SELECT to_regclass('akadze_jobs')") is None
            await transaction.commit()
            _, err = await asyncio.wait_for(upgrade.communicate(), 60)
            assert upgrade.returncode == 0, err.decode()
        finally:
            await holder.close()

    asyncio.run(scenario())
    assert asyncio.run(recorded(url)) == [m.version for m in migrations()]


def test_db_revision_refuses_a_missing_folder_or_several_heads(project: Path, empty_database: str) -> None:
    missing = akadze(
        project, "db", "revision", "--alembic", str(project / "nope"), database_url=empty_database
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith("error:") and len(missing.stderr.strip().splitlines()) == 1
    versions = project / "migrations" / "versions"
    (versions / "0b0b0b0b0b0b_other.py").write_text(FIRST.replace("0a0a0a0a0a0a", "0b0b0b0b0b0b"))
    several = akadze(project, "db", "revision", "--alembic", str(versions), database_url=empty_database)
    assert several.returncode == 2
    assert "several heads" in several.stderr and "--down-revision" in several.stderr
    chosen = akadze(
        project,
        "db",
        "revision",
        "--alembic",
        str(versions),
        "--down-revision",
        "0b0b0b0b0b0b",
        database_url=empty_database,
    )
    assert chosen.returncode == 0, chosen.stderr
