"""Tasks with Unique and Limit for worker subprocesses and codegen (tests/faults/test_flow.py,
tests/test_unique.py). The database comes from AKADZE_DATABASE_URL.

Each run writes its span (job id, task, key, start and end on the database's clock, the
worker's pid) into the ``flow_spans`` table (the test creates it), on a connection of its own,
so the test measures overlaps from what the runs did, not from what the queue says.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from sqlalchemy import text

from akadze import Akadze, Limit, Unique, current

SPANS_DDL = (
    "CREATE TABLE IF NOT EXISTS flow_spans (job_id bigint, run integer, task text, key text, "
    "started_at timestamptz, ended_at timestamptz, pid integer, claimed_at timestamptz)"
)


def create_app(database_url: str) -> Akadze:
    app = Akadze(database_url=database_url)

    async def span(key: str, ms: int) -> None:
        job = current().job
        async with app.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO flow_spans (job_id, run, task, key, started_at, pid, claimed_at) "
                    "VALUES (:id, :run, :task, :key, clock_timestamp(), :pid, :claimed_at)"
                ),
                {
                    "id": job.id,
                    "run": job.run,
                    "task": job.task,
                    "key": key,
                    "pid": os.getpid(),
                    # the claim's clock: the one a rate limit counts starts with
                    "claimed_at": job.started_at,
                },
            )
        await asyncio.sleep(ms / 1000)
        async with app.engine.begin() as conn:
            await conn.execute(
                text("UPDATE flow_spans SET ended_at = clock_timestamp() WHERE job_id = :id AND run = :run"),
                {"id": job.id, "run": job.run},
            )

    @app.task("flow.two", queue="flow", limit=Limit(concurrency=2))
    async def two(n: int, ms: int = 200) -> None:
        await span("", ms)

    @app.task("flow.per_key", queue="flow", limit=Limit(concurrency=1, key="account"))
    async def per_key(account: str, n: int, ms: int = 150) -> None:
        await span(account, ms)

    @app.task("flow.rate", queue="flow", limit=Limit(rate=5, per=timedelta(seconds=1)))
    async def rate(n: int) -> None:
        await span("", 0)

    @app.task("flow.keyed", queue="flow", limit=Limit(concurrency=2, key="account"))
    async def keyed(account: str, n: int, ms: int = 150) -> None:
        await span(account, ms)

    @app.task("flow.fair", queue="flow", limit=Limit(key="tenant"))
    async def fair(tenant: str, n: int) -> None:
        await span(tenant, 0)

    @app.task("flow.free", queue="flow")
    async def free(n: int, ms: int = 200) -> None:
        await span("", ms)

    @app.task("flow.report", queue="flow", unique=Unique(args=["account"]))
    async def report(account: int, note: str = "", ms: int = 0) -> None:
        if ms:
            await asyncio.sleep(ms / 1000)

    return app


app = create_app(os.environ.get("AKADZE_DATABASE_URL") or "postgresql://localhost/akadze_unset")
