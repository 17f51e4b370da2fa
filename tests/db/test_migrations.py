"""Schema migrations: idempotent, safe from two processes at once, printable for Alembic users,
pinned once shipped, and matching db/tables.py."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest

from akadze import Akadze
from akadze.db.migrate import SUPERSEDED, migrations, render_sql
from akadze.db.tables import metadata
from tests.conftest import with_database
from tests.support import PYTHON, ROOT, fetch, plain, subprocess_env

#: released migrations never change: (version, name) -> sha256 of the file as shipped
RELEASED = {
    (1, "initial"): "0c4c8a2d0d639f310b176f801be8bff4aa077f2d7b0221ebff033291e5f1c566",
    (2, "task_schemas"): "9f7e4c703ad9fee7541de0309efa3e8b60ba9ebaa5d9b2b71a20f14a99075573",
    (3, "queue_pauses"): "dd6012a1864621d47b884aa5e9606622a7f60ded8576ae64dc7a3fa441fdde58",
    (5, "trace_context"): "1c12cc3f11aa3cb77a23efdc59da142598e3575104387e80e43e5f494797b406",
    (4, "awaited_jobs"): "e2022b59d310c7172ce58c169b5302c06fea4055ac83392067168b494ef42965",
    (6, "flow_control"): "bde0258b6d8c91e1fa3a3f6e71e918661b09995904bfaa1ccb99a21ac11946d0",
    (7, "limit_groups"): "fef5ec7f5ddf8031a00121f2775f6b790761f8235b0af3481d8f6f5f651da10e",
    (8, "claim_many_queues"): "53b3524836cf187f38f962ea06ac22c5f524b994b645b5726244c65c2216c83d",
    (9, "listing_failures"): "b9de9116ac0cb8c7ed4f888582a6edf070da342c088d6190d756ebeb6bc60e17",
    (10, "trace_parent"): "8c45905f32eb94ce6ebc66cac880ee7695ea46c3d691a3d30592b82b7be62894",
    (11, "pooler_functions"): "e68fd14132830c07e706b217b0f480ce274393c0fb6e7e9326154f39cc451b5c",
    (12, "parked_jobs"): "69df0efa24d713b40d6e38c3cc71e424e926ef0077941e7a36e7c5d22ca5778e",
    (13, "web_secret"): "55a8d82401db8ba424d0750d5724a2470893bb40622c388c363398f77d4c58cc",
    (14, "job_trends"): "c652a2e8ce93f4fcd71ae8521b6665063e3c403847e6cf4edef3cb15585820e0",
    (15, "limit_parking"): "3292bbbefd7276324c59d83727df846ccd4bc7e8816ef8aa79f454a95e966f9d",
    (16, "workflows"): "bd57cf72c17d088e93b0fe13ab3b50c6eb36db0f73d294266fb281e5375261bf",
    (17, "workflow_step_indexes"): "97e083f03ab223b99056dd5aeab4f9e538c4fbabd617e2ce4582ca458ca90ece",
    (18, "limit_arrivals"): "5838fcdea79790799fa1475c90bef81c40989d315afa29bcde78f0dd97456866",
}
#: every shipped version, in order
VERSIONS = sorted(version for version, _ in RELEASED)

_names = itertools.count()


@pytest.fixture
async def empty_database(server_url: str) -> AsyncIterator[Callable[[], Any]]:
    """A factory of databases without any schema, dropped at the end."""
    made: list[str] = []

    async def make() -> str:
        name = f"akadze_empty_{os.getpid()}_{next(_names)}"
        admin = await asyncpg.connect(plain(server_url))
        try:
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        finally:
            await admin.close()
        made.append(name)
        return with_database(server_url, name)

    yield make
    admin = await asyncpg.connect(plain(server_url))
    try:
        for name in made:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def schema_of(database_url: str, *, with_defaults: bool = True) -> dict[str, list[tuple[Any, ...]]]:
    """What the catalog says about akadze's tables: columns, indexes, constraints."""
    default = "column_default" if with_defaults else "NULL"
    columns = await fetch(
        database_url,
        f"SELECT table_name, column_name, data_type, udt_name, is_nullable, {default} "
        "FROM information_schema.columns WHERE table_schema = 'public' AND table_name LIKE 'akadze%' "
        "ORDER BY 1, 2",
    )
    indexes = await fetch(
        database_url,
        "SELECT tablename, indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = 'public' AND tablename LIKE 'akadze%' ORDER BY 1, 2",
    )
    constraints = await fetch(
        database_url,
        "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
        "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public' "
        "AND c.conrelid::regclass::text LIKE 'akadze%' ORDER BY 1, 2",
    )
    return {
        "columns": [tuple(r) for r in columns],
        "indexes": [tuple(r) for r in indexes],
        "constraints": [tuple(r) for r in constraints],
    }


def cli(database_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "-m", "akadze.cli", "db", *args],
        cwd=ROOT,
        env=subprocess_env(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def finished(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = await asyncio.to_thread(process.communicate, timeout=60)
    return process.returncode, out, err


async def test_db_migrate_twice_applies_once_and_says_so(
    empty_database: Callable[[], Any], database_url: str
) -> None:
    url = await empty_database()
    every = ", ".join(str(m.version) for m in migrations())
    assert await finished(cli(url, "migrate")) == (0, f"applied migrations {every}\n", "")
    assert await finished(cli(url, "migrate")) == (0, "schema is up to date\n", "")
    assert await schema_of(url) == await schema_of(database_url)


async def test_db_migrate_from_two_processes_at_once_leaves_one_schema(
    empty_database: Callable[[], Any], database_url: str
) -> None:
    url = await empty_database()
    results = await asyncio.gather(*(finished(cli(url, "migrate")) for _ in range(2)))
    assert all(code == 0 and err == "" for code, _, err in results)
    # each migration applied exactly once, by one process or the other (they take turns per
    # migration, so one may apply 1 and the other 2)
    applied = [
        int(v) for _, out, _ in results if out.startswith("applied migrations ") for v in out[19:].split(", ")
    ]
    assert sorted(applied) == VERSIONS
    recorded = await fetch(url, "SELECT version, name FROM akadze_schema_migrations ORDER BY version")
    assert [tuple(r) for r in recorded] == sorted(RELEASED)
    assert await schema_of(url) == await schema_of(database_url)


async def test_app_migrate_is_idempotent_and_safe_when_run_concurrently(
    empty_database: Callable[[], Any],
) -> None:
    url = await empty_database()
    apps = [Akadze(database_url=url) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(app.migrate() for app in apps))
        assert sorted(v for versions in applied for v in versions) == VERSIONS
        assert await apps[0].migrate() == []
    finally:
        for app in apps:
            await app.dispose()


async def test_db_sql_prints_the_schema_that_migrate_builds(
    empty_database: Callable[[], Any], database_url: str
) -> None:
    code, printed, err = await finished(cli(database_url, "sql"))
    assert (code, err) == (0, "")
    assert printed == render_sql()
    assert "CREATE TABLE akadze_jobs" in printed
    url = await empty_database()
    conn = await asyncpg.connect(plain(url))
    try:
        await conn.execute(printed)
    finally:
        await conn.close()
    assert await schema_of(url) == await schema_of(database_url)
    # a database set up from the printed script counts as migrated
    async with Akadze(database_url=url) as app:
        assert await app.migrate() == []


def test_migrations_are_numbered_without_gaps_and_named_plainly() -> None:
    found = migrations()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(m.name.replace("_", "").isalnum() and m.name.islower() for m in found)


def test_released_migrations_never_change() -> None:
    """A released migration never changes, unless its release's checksum is kept in SUPERSEDED
    (0011 lost its copies of the statements: akadze.db.pooled), so that databases that applied
    it migrate on."""
    shipped = {(m.version, m.name): m.checksum for m in migrations()}
    for key, checksum in RELEASED.items():
        assert key in shipped, f"released migration {key} is missing"
        assert shipped[key] == checksum or checksum in SUPERSEDED.get(key[0], ()), (
            f"migration {key} was edited after release: add a new one instead"
        )


async def test_tables_py_matches_the_migrated_schema(
    empty_database: Callable[[], Any], database_url: str
) -> None:
    """Build db/tables.py into an empty database and compare the catalog with the migrated one:
    columns, types, nullability, primary keys and indexes (defaults and checks live only in SQL)."""
    url = await empty_database()
    async with Akadze(database_url=url) as app, app.engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    declared = await schema_of(url, with_defaults=False)
    migrated = await schema_of(database_url, with_defaults=False)
    migrated = {
        "columns": [c for c in migrated["columns"] if c[0] != "akadze_schema_migrations"],
        "indexes": [i for i in migrated["indexes"] if i[0] != "akadze_schema_migrations"],
        "constraints": [
            c
            for c in migrated["constraints"]
            if c[0] != "akadze_schema_migrations" and not c[2].startswith("CHECK")
        ],
    }
    assert declared == migrated
