"""pgqueuer through its public API (asyncpg driver, one connection per process).

Worker: ``PgQueuer.run(batch_size=min(10, slots // 2), max_concurrent_tasks=slots)`` (the library
requires max_concurrent_tasks >= 2 x batch_size; 10 is its default batch size), ``mode=drain``
for the drain; durability left at its default. Batch enqueue: ``Queries.enqueue`` with lists.
"""

from __future__ import annotations

import asyncio
import json
import time
from importlib.metadata import version
from typing import Any

import asyncpg
from benchproto import Control, Recorder, emit, paced_producer, run, timed_batches, timed_single
from pgqueuer import AsyncpgDriver, PgQueuer, Queries
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"


def info() -> dict[str, Any]:
    return {"library": "pgqueuer", "version": version("pgqueuer")}


async def _queries(dsn: str) -> tuple[asyncpg.Connection, Queries]:
    conn = await asyncpg.connect(dsn)
    return conn, Queries(AsyncpgDriver(conn))


async def install(req: dict[str, Any]) -> dict[str, Any]:
    conn, q = await _queries(req["dsn"])
    try:
        await q.install()
    finally:
        await conn.close()
    return {}


async def unfinished(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        # Finished jobs are deleted from the queue table (and logged in pgqueuer_log).
        n = await conn.fetchval("SELECT count(*) FROM pgqueuer")
    finally:
        await conn.close()
    return {"unfinished": n}


def _payload(args: dict[str, Any]) -> bytes:
    return json.dumps(args).encode()


async def enqueue_single(req: dict[str, Any]) -> dict[str, Any]:
    conn, q = await _queries(req["dsn"])
    try:
        return await timed_single(lambda i: q.enqueue(ENTRYPOINT, _payload({"i": i})), req["jobs"])
    finally:
        await conn.close()


async def enqueue_batch(req: dict[str, Any]) -> dict[str, Any]:
    conn, q = await _queries(req["dsn"])

    async def batch(ids: list[int]) -> None:
        await q.enqueue([ENTRYPOINT] * len(ids), [_payload({"i": i}) for i in ids], [0] * len(ids))

    try:
        return await timed_batches(batch, req["jobs"], req["batch"])
    finally:
        await conn.close()


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    conn, q = await _queries(req["dsn"])
    try:
        return await paced_producer(lambda a: q.enqueue(ENTRYPOINT, _payload(a)), req["jobs"], req["rate"])
    finally:
        await conn.close()


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    control = Control()
    rec = Recorder(req["expect"])
    slots = int(req["slots"])
    drain = req["mode"] == "drain"
    conn = await asyncpg.connect(req["dsn"])
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        rec.job(json.loads(job.payload) if job.payload else {})

    async def stopper() -> None:
        done_wait = asyncio.ensure_future(rec.done.wait())
        stop_wait = asyncio.ensure_future(control.stop.wait())
        waits = {stop_wait} if drain else {done_wait, stop_wait}
        await asyncio.wait(waits, return_when="FIRST_COMPLETED")
        pgq.shutdown.set()

    emit("ready")
    stop_task = asyncio.create_task(stopper())
    await pgq.run(
        batch_size=min(10, max(1, slots // 2)),
        max_concurrent_tasks=slots,
        mode=QueueExecutionMode.drain if drain else QueueExecutionMode.continuous,
    )
    returned = time.perf_counter()
    stop_task.cancel()
    await conn.close()
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
