"""The claim cycle's functions (akadze.db.pooled): made by migrate from today's statement files,
named after their definition, declared with the types the server gives the statements; a
database that applied migration 0011's old text migrates on. A worker connected directly never
calls them. Through a real PgBouncer: tests/faults/test_pooled_functions.py."""

from __future__ import annotations

import asyncio

import asyncpg

from akadze import Akadze
from akadze.db.migrate import SUPERSEDED
from akadze.db.pooled import POOLED, function_name, parameter_types
from akadze.db.sql import statement
from tests.support import POOLED_JOBS, drain_through, function_calls, plain


async def _named(conn: asyncpg.Connection, oid: int) -> str:
    return str(await conn.fetchval("SELECT CAST(CAST(CAST($1 AS oid) AS regtype) AS text)", oid))


async def _spelled(conn: asyncpg.Connection, name: str) -> str:
    """A type name as the server spells it (int8 and bigint are one type)."""
    return str(await conn.fetchval("SELECT CAST(CAST($1 AS regtype) AS text)", name))


_DECLARED = """
SELECT a.name, CAST(CAST(a.type AS regtype) AS text) AS type, CAST(a.mode AS text) AS mode
FROM pg_proc AS p
CROSS JOIN LATERAL unnest(p.proargnames, p.proallargtypes, p.proargmodes) AS a(name, type, mode)
WHERE p.proname = $1
"""


async def test_migrate_makes_the_functions_of_todays_statements(database_url: str) -> None:
    """Each function runs its statement's text, takes the parameter types and returns the
    columns the server gives the statement itself."""
    conn = await asyncpg.connect(plain(database_url))
    try:
        for name in POOLED:
            stmt = statement(name)
            body = await conn.fetchval("SELECT prosrc FROM pg_proc WHERE proname = $1", function_name(name))
            assert body is not None, f"migrate made no {function_name(name)}"
            assert stmt.pg in body  # the statement's own text, read from its file
            described = await conn.prepare(stmt.pg)
            server = [await _named(conn, kind.oid) for kind in described.get_parameters()]
            assert [await _spelled(conn, kind) for kind in parameter_types(stmt)] == server, name
            declared = await conn.fetch(_DECLARED, function_name(name))
            columns = [(row["name"], row["type"]) for row in declared if row["mode"] == "t"]
            returned = [
                (column.name, await _named(conn, column.type.oid)) for column in described.get_attributes()
            ]
            assert columns == returned, name
    finally:
        await conn.close()


def test_a_function_is_named_after_its_statement_and_definition() -> None:
    names = [function_name(name) for name in POOLED]
    assert len(set(names)) == len(POOLED)
    for name, function in zip(POOLED, names, strict=True):
        assert function.startswith(f"akadze_{name}_")


async def test_a_database_that_applied_the_old_0011_migrates_on(database_url: str) -> None:
    """0011 held copies of the statements when it shipped; a database that recorded that text
    migrates without MigrationEditedError and gets today's functions."""
    made = function_name("claim_completing")
    conn = await asyncpg.connect(plain(database_url))
    try:
        [old] = SUPERSEDED[11]
        await conn.execute("UPDATE akadze_schema_migrations SET checksum = $1 WHERE version = 11", old)
        await conn.execute(f"DROP FUNCTION {made}")
    finally:
        await conn.close()
    app = Akadze(database_url=database_url)
    try:
        assert await app.migrate() == []
    finally:
        await app.dispose()
    conn = await asyncpg.connect(plain(database_url))
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_proc WHERE proname = $1", made) == 1
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
