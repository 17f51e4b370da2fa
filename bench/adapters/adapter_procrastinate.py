"""procrastinate through its public API (PsycopgConnector, psycopg-pool defaults).

Worker: ``run_worker_async(concurrency=slots, wait=False)`` for the drain (the worker exits once
it has caught up with the queue); for the latency step ``wait=True`` and the task is cancelled,
which procrastinate turns into a graceful stop. listen_notify and polling at their defaults.
Batch enqueue: ``batch_defer_async``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from importlib.metadata import version
from typing import Any

import procrastinate
from benchproto import Control, Recorder, emit, paced_producer, run, timed_batches, timed_single

_recorder: Recorder | None = None


def _app(dsn: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", queue="default")
    async def noop(i: int, t: float | None = None) -> None:
        assert _recorder is not None
        _recorder.job({"i": i, "t": t})

    return app


def info() -> dict[str, Any]:
    return {"library": "procrastinate", "version": version("procrastinate")}


async def install(req: dict[str, Any]) -> dict[str, Any]:
    app = _app(req["dsn"])
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
    return {}


async def unfinished(req: dict[str, Any]) -> dict[str, Any]:
    app = _app(req["dsn"])
    async with app.open_async():
        row = await app.connector.execute_query_one_async(
            "SELECT count(*) AS n FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )
    return {"unfinished": row["n"]}


async def enqueue_single(req: dict[str, Any]) -> dict[str, Any]:
    app = _app(req["dsn"])
    task = app.tasks["noop"]
    async with app.open_async():
        return await timed_single(lambda i: task.defer_async(i=i), req["jobs"])


async def enqueue_batch(req: dict[str, Any]) -> dict[str, Any]:
    app = _app(req["dsn"])
    task = app.tasks["noop"]
    async with app.open_async():
        return await timed_batches(
            lambda ids: task.batch_defer_async(*({"i": i} for i in ids)),
            req["jobs"],
            req["batch"],
        )


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    app = _app(req["dsn"])
    task = app.tasks["noop"]
    async with app.open_async():
        return await paced_producer(lambda a: task.defer_async(**a), req["jobs"], req["rate"])


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    global _recorder
    control = Control()
    rec = _recorder = Recorder(req["expect"])
    drain = req["mode"] == "drain"
    app = _app(req["dsn"])
    async with app.open_async():
        emit("ready")
        run_task = asyncio.create_task(
            app.run_worker_async(
                concurrency=int(req["slots"]),
                wait=not drain,
                install_signal_handlers=False,
            )
        )
        done_wait = asyncio.ensure_future(rec.done.wait())
        stop_wait = asyncio.ensure_future(control.stop.wait())
        waits = {run_task, stop_wait} if drain else {run_task, done_wait, stop_wait}
        await asyncio.wait(waits, return_when="FIRST_COMPLETED")
        if not run_task.done():
            run_task.cancel()  # graceful stop: running jobs finish
        with contextlib.suppress(asyncio.CancelledError):
            await run_task
        returned = time.perf_counter()
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
