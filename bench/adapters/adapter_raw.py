"""Raw asyncpg baseline: the least a Python worker on this server can do per job.

Schema: one table, a partial ready index in claim order. Enqueue: one autocommit statement
per job (insert + pg_notify in one CTE); batch: one ``INSERT ... SELECT unnest`` + one NOTIFY.
Worker: ``loops`` coroutines, each with its own connection; each claims up to ``k`` jobs in one
statement (``FOR UPDATE SKIP LOCKED``), runs them, completes them in one statement. Idle loops
wait on LISTEN with a 1 s poll fallback. Every statement autocommits.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import asyncpg
from benchproto import Control, Recorder, emit, paced_producer, run, timed_batches, timed_single

CHANNEL = "bench_jobs"
SCHEMA = """
CREATE TABLE jobs (
    id bigserial PRIMARY KEY,
    queue text NOT NULL DEFAULT 'default',
    priority int NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'ready',
    args jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX jobs_ready ON jobs (queue, priority DESC, id) WHERE status = 'ready';
"""
INSERT_ONE = f"""
WITH ins AS (INSERT INTO jobs (queue, args) VALUES ('default', $1::jsonb) RETURNING id)
SELECT id, pg_notify('{CHANNEL}', '') FROM ins
"""
INSERT_MANY = "INSERT INTO jobs (queue, args) SELECT 'default', a FROM unnest($1::jsonb[]) AS a"
CLAIM = """
UPDATE jobs SET status = 'running', started_at = now()
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = 'default' AND status = 'ready'
    ORDER BY priority DESC, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, args
"""
COMPLETE = "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = ANY($1::bigint[])"


def info() -> dict[str, Any]:
    return {"library": "asyncpg", "version": asyncpg.__version__}


async def install(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        await conn.execute(SCHEMA)
    finally:
        await conn.close()
    return {}


async def unfinished(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        n = await conn.fetchval("SELECT count(*) FROM jobs WHERE status <> 'done'")
    finally:
        await conn.close()
    return {"unfinished": n}


async def enqueue_single(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        return await timed_single(lambda i: conn.fetchrow(INSERT_ONE, json.dumps({"i": i})), req["jobs"])
    finally:
        await conn.close()


async def _insert_many(conn: asyncpg.Connection, args: list[dict[str, Any]]) -> None:
    await conn.execute(INSERT_MANY, [json.dumps(a) for a in args])
    await conn.execute(f"NOTIFY {CHANNEL}")


async def enqueue_batch(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        return await timed_batches(
            lambda ids: _insert_many(conn, [{"i": i} for i in ids]), req["jobs"], req["batch"]
        )
    finally:
        await conn.close()


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        return await paced_producer(
            lambda a: conn.fetchrow(INSERT_ONE, json.dumps(a)), req["jobs"], req["rate"]
        )
    finally:
        await conn.close()


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    control = Control()
    rec = Recorder(req["expect"])
    k = int(req.get("k", 50))
    loops = int(req["slots"])
    stopping = asyncio.Event()
    wake = asyncio.Event()

    async def handler(args: dict[str, Any]) -> None:
        rec.job(args)

    listener = await asyncpg.connect(req["dsn"])
    await listener.add_listener(CHANNEL, lambda *_: wake.set())
    conns = [await asyncpg.connect(req["dsn"]) for _ in range(loops)]

    async def loop(conn: asyncpg.Connection) -> None:
        while not stopping.is_set():
            rows = await conn.fetch(CLAIM, k)
            if not rows:
                wake.clear()
                waiter = asyncio.ensure_future(wake.wait())
                stopper = asyncio.ensure_future(stopping.wait())
                await asyncio.wait({waiter, stopper}, timeout=1.0, return_when="FIRST_COMPLETED")
                waiter.cancel()
                stopper.cancel()
                continue
            await asyncio.gather(*(handler(json.loads(r["args"])) for r in rows))
            await conn.execute(COMPLETE, [r["id"] for r in rows])

    emit("ready")
    tasks = [asyncio.create_task(loop(c)) for c in conns]
    done_wait = asyncio.ensure_future(rec.done.wait())
    stop_wait = asyncio.ensure_future(control.stop.wait())
    await asyncio.wait({done_wait, stop_wait}, return_when="FIRST_COMPLETED")
    stopping.set()  # graceful: each loop finishes (completes) its batch, then exits
    await asyncio.gather(*tasks)
    returned = time.perf_counter()
    for c in [*conns, listener]:
        await c.close()
    return rec.summary(returned)


if __name__ == "__main__":
    run(
        {
            "install": install,
            "unfinished": unfinished,
            "enqueue_single": enqueue_single,
            "enqueue_batch": enqueue_batch,
            "produce": produce,
            "worker": worker,
        },
        info,
    )
