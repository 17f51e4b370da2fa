"""Schema versions (issue 17, point 1): db status, a worker on an older or newer schema, and a
producer on a database that was never migrated."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import AsyncIterator

import asyncpg
import pytest
from typer.testing import CliRunner

from akadze import Akadze, JobState
from akadze.client import RemoteTask
from akadze.db.migrate import migrations
from akadze.db.status import check_schema, schema_status
from akadze.errors import SchemaMissingError, SchemaVersionError
from akadze.testing import drain
from akadze.worker import Worker
from tests.conftest import with_database
from tests.support import PYTHON, ROOT, execute, fetchval, plain, subprocess_env

CODE_VERSION = migrations()[-1].version


@pytest.fixture
async def empty_database(server_url: str) -> AsyncIterator[str]:
    """A database on which akadze never ran."""
    name = f"akadze_empty_{os.getpid()}"
    await execute(
        server_url, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}" TEMPLATE template0'
    )
    yield with_database(server_url, name)
    await execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cli(*args: str, database_url: str) -> tuple[int, str, str]:
    from akadze.cli import app as command

    result = CliRunner().invoke(
        command, list(args), env={"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": ""}
    )
    return result.exit_code, result.stdout, result.stderr


# -- the status ----------------------------------------------------------------------------------


async def test_status_lists_applied_and_pending_migrations(app: Akadze, database_url: str) -> None:
    async with app.engine.connect() as conn:
        status = await schema_status(conn)
    assert [a.version for a in status.applied] == [m.version for m in migrations()]
    assert status.pending == [] and status.unknown == [] and status.up_to_date
    assert status.database_version == status.code_version == CODE_VERSION

    await execute(database_url, f"DELETE FROM akadze_schema_migrations WHERE version = {CODE_VERSION}")
    async with app.engine.connect() as conn:
        status = await schema_status(conn)
    assert [m.version for m in status.pending] == [CODE_VERSION]
    assert not status.up_to_date


async def test_status_of_a_database_never_migrated_lists_every_migration_pending(empty_database: str) -> None:
    app = Akadze(database_url=empty_database)
    try:
        async with app.engine.connect() as conn:
            status = await schema_status(conn)
    finally:
        await app.dispose()
    assert status.applied == [] and status.database_version == 0
    assert [m.version for m in status.pending] == [m.version for m in migrations()]


# -- a worker against an older or a newer schema --------------------------------------------------


async def test_a_worker_refuses_a_schema_older_than_its_code(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t() -> None: ...

    await t.enqueue()
    await execute(database_url, f"DELETE FROM akadze_schema_migrations WHERE version = {CODE_VERSION}")
    with pytest.raises(SchemaVersionError) as caught:
        await Worker(app).run(burst=True, handle_signals=False)
    message = str(caught.value)
    assert f"at version {CODE_VERSION - 1}" in message
    assert f"needs version {CODE_VERSION}" in message
    assert "akadze db migrate" in message
    # it refused before doing anything: no worker row, the job untouched
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workers") == 0
    assert await fetchval(database_url, "SELECT state FROM akadze_jobs") == "queued"


async def test_a_worker_on_a_database_never_migrated_names_version_0(empty_database: str) -> None:
    app = Akadze(database_url=empty_database)

    @app.task("t")
    async def t() -> None: ...

    try:
        with pytest.raises(
            SchemaVersionError, match=f"at version 0 and this akadze needs version {CODE_VERSION}"
        ):
            await Worker(app).run(burst=True, handle_signals=False)
    finally:
        await app.dispose()


def test_akadze_worker_exits_2_with_one_line_naming_both_versions(database_url: str) -> None:
    import asyncio

    asyncio.run(execute(database_url, f"DELETE FROM akadze_schema_migrations WHERE version = {CODE_VERSION}"))
    done = subprocess.run(
        [PYTHON, "-m", "akadze.cli", "worker", "tests.apps.basic:from_environment", "--burst"],
        cwd=ROOT,
        env=subprocess_env(database_url, BASIC_APP_DATABASE_URL=database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"version {CODE_VERSION - 1}" in lines[0] and f"version {CODE_VERSION}" in lines[0]
    assert "akadze db migrate" in lines[0]


async def test_a_worker_runs_on_a_newer_schema_and_says_so(
    app: Akadze, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A deploy rolled back after a newer akadze migrated: the older worker keeps serving."""

    @app.task("t")
    async def t() -> str:
        return "ran"

    job = await t.enqueue()
    newer = CODE_VERSION + 1
    await execute(
        database_url,
        f"INSERT INTO akadze_schema_migrations (version, name, checksum) VALUES ({newer}, 'future', 'x')",
    )
    with caplog.at_level(logging.WARNING, logger="akadze.db"):
        assert await drain(app) == 1
    done = await app.get_job(job.id)
    assert done is not None and done.state is JobState.SUCCEEDED
    warnings = [r.getMessage() for r in caplog.records if r.name == "akadze.db"]
    assert any(f"version {newer}" in w and f"(version {CODE_VERSION})" in w for w in warnings), warnings
    status = await check_schema(app.engine)
    assert [a.version for a in status.unknown] == [newer] and status.up_to_date


# -- a producer on a database never migrated ------------------------------------------------------

MIGRATE_LINE = "the akadze schema is missing in this database: run `akadze db migrate`"


async def test_enqueue_on_a_database_never_migrated_is_one_clear_error(empty_database: str) -> None:
    app = Akadze(database_url=empty_database)

    @app.task("t")
    async def t(n: int) -> None: ...

    try:
        for enqueue in (lambda: t.enqueue(n=1), lambda: t.enqueue_many([{"n": 1}, {"n": 2}])):
            with pytest.raises(SchemaMissingError) as caught:
                await enqueue()
            assert str(caught.value) == MIGRATE_LINE
            # no chain to the driver's error and its SQL
            assert caught.value.__cause__ is None and caught.value.__suppress_context__
        async with app.engine.begin() as conn:
            with pytest.raises(SchemaMissingError):
                await t.using(session=conn).enqueue(n=1)
            await conn.rollback()
        with pytest.raises(SchemaMissingError):
            await app.wait_for(1, timeout=5)
    finally:
        await app.dispose()


async def test_a_generated_client_on_a_database_never_migrated_is_one_clear_error(
    empty_database: str,
) -> None:
    import akadze.client
    from akadze.app import create_engine

    remote: RemoteTask[dict[str, int]] = RemoteTask(
        "t", queue="default", priority=0, max_attempts=3, args_fp="x", args_type=dict
    )
    engine = create_engine(empty_database)
    try:
        async with engine.begin() as conn:
            with pytest.raises(SchemaMissingError, match="run `akadze db migrate`"):
                await remote.using(session=conn)._enqueue({"n": 1})
        with pytest.raises(SchemaMissingError):
            await akadze.client.get_job(engine, 1)
    finally:
        await engine.dispose()


def test_enqueue_before_migrating_prints_a_short_traceback_ending_in_the_fix(empty_database: str) -> None:
    script = (
        "import asyncio, os\n"
        "from akadze import Akadze\n"
        "app = Akadze(database_url=os.environ['AKADZE_DATABASE_URL'])\n"
        "@app.task('t')\n"
        "async def t() -> None: ...\n"
        "asyncio.run(t.enqueue())\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", script],
        cwd=ROOT,
        env=subprocess_env(empty_database),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == f"akadze.errors.SchemaMissingError: {MIGRATE_LINE}"
    assert "akadze_jobs" not in done.stderr and "During handling" not in done.stderr
    assert len(lines) < 30, done.stderr  # was about 130 lines with the SQL


# -- akadze db status ------------------------------------------------------------------------------


def test_db_status_exits_0_when_every_migration_is_applied(database_url: str) -> None:
    code, out, err = cli("db", "status", database_url=database_url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["VERSION", "NAME", "STATE", "APPLIED_AT"]
    assert [line.split()[:3] for line in lines[1:-1]] == [
        [f"{m.version:04d}", m.name, "applied"] for m in migrations()
    ]
    assert lines[-1] == f"schema at version {CODE_VERSION}; this akadze needs version {CODE_VERSION}"


async def migrate_until(database_url: str, version: int) -> None:
    """Apply the shipped migrations up to ``version`` as `akadze db migrate` of that release would."""
    from akadze.db.migrate import _BOOTSTRAP

    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(_BOOTSTRAP)
        for m in migrations():
            if m.version <= version:
                async with conn.transaction():
                    await conn.execute(m.sql)
                    await conn.execute(
                        "INSERT INTO akadze_schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                        m.version,
                        m.name,
                        m.checksum,
                    )
    finally:
        await conn.close()


def test_db_status_exits_1_while_a_migration_is_pending_and_says_how_to_apply_it(empty_database: str) -> None:
    import asyncio

    asyncio.run(migrate_until(empty_database, CODE_VERSION - 1))
    code, out, err = cli("db", "status", database_url=empty_database)
    assert code == 1
    last = migrations()[-1]
    assert out.splitlines()[-2].split() == [f"{last.version:04d}", last.name, "pending", "-"]
    assert (
        out.splitlines()[-1]
        == f"schema at version {CODE_VERSION - 1}; this akadze needs version {CODE_VERSION}"
    )
    assert err.strip() == "1 migration(s) pending: run `akadze db migrate`"
    assert cli("db", "migrate", database_url=empty_database)[0] == 0
    assert cli("db", "status", database_url=empty_database)[0] == 0


def test_db_status_as_json_lists_a_newer_migration_too(database_url: str) -> None:
    import asyncio
    import json

    newer = CODE_VERSION + 1
    asyncio.run(
        execute(
            database_url,
            f"INSERT INTO akadze_schema_migrations (version, name, checksum) VALUES ({newer}, 'future', 'x')",
        )
    )
    code, out, _ = cli("db", "status", "--output", "json", database_url=database_url)
    assert code == 0
    found = json.loads(out)
    assert (found["database_version"], found["code_version"], found["pending"]) == (newer, CODE_VERSION, [])
    assert found["migrations"][-1]["version"] == newer
    assert found["migrations"][-1]["state"] == "newer than this akadze"


def test_db_status_on_a_database_never_migrated_lists_everything_pending(empty_database: str) -> None:
    code, out, err = cli("db", "status", database_url=empty_database)
    assert code == 1
    assert out.count("pending") == len(migrations())
    assert "run `akadze db migrate`" in err
