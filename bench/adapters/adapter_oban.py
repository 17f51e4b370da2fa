"""oban (the OSS Python port) through its public API.

``Oban(pool=Oban.create_pool(dsn), queues={"default": slots})`` embedded in the worker process
(pool at its default size); plain asyncio loop. oban has no drain mode in its OSS API, so the
drain worker calls ``oban.stop()`` (graceful) once the expected number of jobs has started.
Batch enqueue: ``enqueue_many`` (the OSS version sends one INSERT per job in one transaction).
"""

from __future__ import annotations

import asyncio
import time
from importlib.metadata import version
from typing import Any

from benchproto import Control, Recorder, emit, paced_producer, run, timed_batches, timed_single
from oban import Oban, job
from oban.schema import install as oban_install

_recorder: Recorder | None = None


@job(queue="default")
async def noop(i: int, t: float | None = None) -> None:
    assert _recorder is not None
    _recorder.job({"i": i, "t": t})


def info() -> dict[str, Any]:
    return {"library": "oban", "version": version("oban")}


async def install(req: dict[str, Any]) -> dict[str, Any]:
    pool = await Oban.create_pool(req["dsn"])
    try:
        await oban_install(pool)
    finally:
        await pool.close()
    return {}


async def unfinished(req: dict[str, Any]) -> dict[str, Any]:
    pool = await Oban.create_pool(req["dsn"])
    try:
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM oban_jobs WHERE state NOT IN ('completed', 'discarded', 'cancelled')"
            )
            row = await cur.fetchone()
    finally:
        await pool.close()
    return {"unfinished": row[0]}


async def _client(dsn: str) -> tuple[Any, Oban]:
    pool = await Oban.create_pool(dsn)
    return pool, Oban(pool=pool)


async def enqueue_single(req: dict[str, Any]) -> dict[str, Any]:
    pool, oban = await _client(req["dsn"])
    try:
        return await timed_single(lambda i: oban.enqueue(noop.new(i=i)), req["jobs"])
    finally:
        await pool.close()


async def enqueue_batch(req: dict[str, Any]) -> dict[str, Any]:
    pool, oban = await _client(req["dsn"])
    try:
        return await timed_batches(
            lambda ids: oban.enqueue_many([noop.new(i=i) for i in ids]),
            req["jobs"],
            req["batch"],
        )
    finally:
        await pool.close()


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    pool, oban = await _client(req["dsn"])
    try:
        return await paced_producer(lambda a: oban.enqueue(noop.new(**a)), req["jobs"], req["rate"])
    finally:
        await pool.close()


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    global _recorder
    control = Control()
    rec = _recorder = Recorder(req["expect"])
    pool = await Oban.create_pool(req["dsn"])
    oban = Oban(pool=pool, queues={"default": int(req["slots"])})
    emit("ready")
    await oban.start()
    done_wait = asyncio.ensure_future(rec.done.wait())
    stop_wait = asyncio.ensure_future(control.stop.wait())
    await asyncio.wait({done_wait, stop_wait}, return_when="FIRST_COMPLETED")
    await oban.stop()
    returned = time.perf_counter()
    await pool.close()
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
