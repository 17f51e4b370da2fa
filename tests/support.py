"""Small helpers shared by the test files: direct SQL on the test's database, job rows."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from akadze import Akadze, Limit
from akadze.app import normalize_url
from akadze.db.queries.runs import MANY_QUEUES
from akadze.worker import Worker
from tests.conftest import with_database

#: the checkout's root, for subprocesses that import akadze and tests.apps
ROOT = Path(__file__).resolve().parent.parent


def plain(url: str) -> str:
    """The asyncpg form (postgresql://...) of an akadze database URL."""
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


async def fetch(database_url: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(plain(database_url))
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def fetchval(database_url: str, query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(plain(database_url))
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def execute(database_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def seconds_until_run(database_url: str, job_id: int) -> float:
    """How far in the future (database clock) the job's run_at is."""
    value = await fetchval(
        database_url, "SELECT extract(epoch FROM run_at - now()) FROM akadze_jobs WHERE id = $1", job_id
    )
    return float(value)


def subprocess_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker subprocess: this checkout importable, the test's database."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["AKADZE_DATABASE_URL"] = database_url
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


PYTHON = sys.executable


_WITH_APP = """
import asyncio, sys
from akadze import Akadze
{imports}

async def main() -> None:
    app = Akadze(database_url=sys.argv[1])

    @app.task("t")
    async def t() -> None:
        return None

{body}
    await app.dispose()

asyncio.run(main())
"""


def words_with_app(database_url: str, body: str, imports: str = "") -> list[str]:
    """Run ``body`` in a fresh interpreter, in an async function with ``app`` (on the test's
    database) and its no-op task ``t``, and return the words it printed: for what a process
    can do once only (set the global tracer provider, gc.freeze)."""
    code = _WITH_APP.format(imports=imports, body=textwrap.indent(textwrap.dedent(body), "    "))
    args = [PYTHON, "-c", code, database_url]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


# -- one database per module, reset before each test ------------------------------------------
#
# Cloning the template costs about half a second here (fsync on), so modules with many short
# tests share one clone and start every test from the same empty, migrated state. A module
# opts in by overriding the database_url fixture:
#
#     @pytest.fixture
#     def database_url(request, server_url, template_db):
#         return module_database(request, server_url, template_db)

_RESET = r"""
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid();
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN
        SELECT tablename FROM pg_tables
        WHERE schemaname = 'public' AND tablename NOT LIKE 'akadze\_%'
    LOOP
        EXECUTE format('DROP TABLE %I CASCADE', name);
    END LOOP;
    FOR name IN
        SELECT tablename FROM pg_tables
        WHERE schemaname = 'public' AND tablename LIKE 'akadze\_%'
            AND tablename <> 'akadze_schema_migrations'
    LOOP
        EXECUTE format('TRUNCATE %I RESTART IDENTITY CASCADE', name);
    END LOOP;
END $$;
"""

_module_databases = itertools.count()


def module_database(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """The requesting module's clone of the migrated template (made on first use, dropped after
    the module), reset as a fresh clone would be: no jobs, no workers, no extra tables,
    identities restarted, and no session of an earlier test left."""
    module = request.node.getparent(pytest.Module)
    assert module is not None
    url: str | None = getattr(module, "_akadze_database_url", None)
    if url is None:
        name = f"akadze_m_{os.getpid()}_{next(_module_databases)}"
        asyncio.run(execute(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"'))
        url = with_database(server_url, name)
        module._akadze_database_url = url  # type: ignore[attr-defined]
        module.addfinalizer(
            lambda: asyncio.run(execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        )
    else:
        asyncio.run(execute(url, _RESET))
    return url


#: the jobs drain_through enqueues and drains
POOLED_JOBS = 300


async def function_calls(url: str) -> dict[str, int]:
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


async def drain_through(url: str, *, claim: str = "claim") -> list[str]:
    """Enqueue POOLED_JOBS jobs and drain them with a worker on ``url``; the jobs' states. ``claim``
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
            share = range(n, POOLED_JOBS, len(queues))
            await job.using(queue=queue).enqueue_many([{"i": i} for i in share])
        await Worker(app, queues=queues, slots=20).run(burst=True, handle_signals=False)
        async with app.engine.connect() as conn:
            result = await conn.exec_driver_sql("SELECT state FROM akadze_jobs ORDER BY id")
            states = [row[0] for row in result]
    finally:
        await app.dispose()
    assert sorted(ran) == list(range(POOLED_JOBS))  # each once
    return states
