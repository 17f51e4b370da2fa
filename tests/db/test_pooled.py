"""The functions of migration 0011 (akadze.db.pooled): the migration holds today's statements,
and a worker connected directly never calls them. Through a real PgBouncer:
tests/faults/test_pooled_functions.py."""

from __future__ import annotations

import asyncio
import re

import asyncpg

from akadze.db.migrate import migrations
from akadze.db.pooled import POOLED, function_ddl, function_name
from tests.support import POOLED_JOBS, drain_through, function_calls, plain


def _blocks(sql: str) -> dict[str, str]:
    """A migration's functions by statement name: from each ``-- name(params)`` line to the
    next one."""
    parts = re.split(r"^(?=-- [a-z_]+\([a-z_, ]*\)$)", sql, flags=re.MULTILINE)
    found: dict[str, str] = {}
    for part in parts:
        match = re.match(r"-- ([a-z_]+)\(", part)
        if match:
            found[match[1]] = part.strip()
    return found


async def test_the_migrations_hold_the_functions_of_todays_statements(database_url: str) -> None:
    """The last migration that makes a function holds the statement's text of today: change a
    statement's SQL and this fails until a new migration replaces its function."""
    latest: dict[str, str] = {}
    for migration in migrations():
        latest.update(_blocks(migration.sql))
    assert sorted(latest) == sorted(POOLED)
    conn = await asyncpg.connect(plain(database_url))
    try:
        for name in POOLED:
            made = (await function_ddl(conn, name)).strip()
            assert latest[name] == made, (
                f"the function of {name} differs from its statement: add a migration with "
                f"`python -m akadze.db.pooled URL`'s CREATE OR REPLACE FUNCTION {function_name(name)}"
            )
    finally:
        await conn.close()


async def test_a_direct_worker_calls_no_function(database_url: str) -> None:
    admin = await asyncpg.connect(plain(database_url))
    try:
        name = await admin.fetchval("SELECT current_database()")
        await admin.execute(f"ALTER DATABASE \"{name}\" SET track_functions = 'pl'")
    finally:
        await admin.close()
    assert await drain_through(database_url) == ["succeeded"] * POOLED_JOBS
    await asyncio.sleep(1.0)  # what the workers' sessions counted has reached the server's statistics
    assert await function_calls(database_url) == {}
