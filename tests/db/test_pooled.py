"""The functions of migration 0011 (akadze.db.pooled): the migration holds today's statements,
and a worker connected directly never calls them. Through a real PgBouncer:
tests/faults/test_pooled_functions.py."""

from __future__ import annotations

import asyncio
import re

import asyncpg

from akadze import Akadze, Limit
from akadze.db.migrate import migrations
from akadze.db.pooled import POOLED, function_ddl, function_name
from akadze.worker import Worker
from akadze.worker.fetcher import MANY_QUEUES
from tests.support import plain

JOBS = 300


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


async def _function_calls(url: str) -> dict[str, int]:
    """Calls of akadze's functions counted by the server (track_functions), by function name."""
    conn = await asyncpg.connect(plain(url))
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = await conn.fetch(
            "SELECT funcname, calls FROM pg_stat_user_functions WHERE funcname LIKE 'akadze\\_%'"
        )
        return {row["funcname"]: row["calls"] for row in rows}
    finally:
        await conn.close()


async def _drain_through(url: str, *, claim: str = "claim") -> list[str]:
    """Enqueue JOBS jobs and drain them with a worker on ``url``; the jobs' states. ``claim``
    picks the worker's claim statement: "claim" (one queue), "claim_many" (a worker of more
    than MANY_QUEUES queues), "claim_limited" (a task with a Limit)."""
    app = Akadze(database_url=url)
    ran: list[int] = []
    queues = [f"q{n}" for n in range(MANY_QUEUES + 1)] if claim == "claim_many" else ["default"]
    options = {"limit": Limit(concurrency=10)} if claim == "claim_limited" else {}

    @app.task("pooled.job", **options)  # type: ignore[call-overload]
    async def job(i: int) -> int:
        ran.append(i)
        return i

    try:
        for n, queue in enumerate(queues):
            share = range(n, JOBS, len(queues))
            await job.using(queue=queue).enqueue_many([{"i": i} for i in share])
        await Worker(app, queues=queues, slots=20).run(burst=True, handle_signals=False)
        async with app.engine.connect() as conn:
            result = await conn.exec_driver_sql("SELECT state FROM akadze_jobs ORDER BY id")
            states = [row[0] for row in result]
    finally:
        await app.dispose()
    assert sorted(ran) == list(range(JOBS))  # each once
    return states


async def test_a_direct_worker_calls_no_function(database_url: str) -> None:
    admin = await asyncpg.connect(plain(database_url))
    try:
        name = await admin.fetchval("SELECT current_database()")
        await admin.execute(f"ALTER DATABASE \"{name}\" SET track_functions = 'pl'")
    finally:
        await admin.close()
    assert await _drain_through(database_url) == ["succeeded"] * JOBS
    await asyncio.sleep(1.0)  # what the workers' sessions counted has reached the server's statistics
    assert await _function_calls(database_url) == {}
