"""A retry herd: many jobs of one queue fail together at their first attempt (a downstream is
down), then their retries come due together and succeed (it is back). Fresh jobs enqueued into
the same queue meanwhile (probes, one every ``probe_every`` seconds) measure how long new work
waits behind the due retries.

The claim takes the highest priority first, then the earliest ``run_at``: a retry due earlier
goes first. A task's ``retry_priority`` (docs/worker.md) lets its retried jobs make way for
fresh work instead.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from . import checker
from .app import HERD_QUEUE
from .scenarios import Env, drain, fetch, percentile, producer_for, registered, stop_fleet
from .supervisor import Supervisor, WorkerSpec


async def retry_herd(
    env: Env,
    *,
    task: str = "fault.flaky",
    jobs: int = 2000,
    workers: int = 2,
    slots: int = 8,
    ms: int = 30,
    probe_every: float = 0.1,
    timeout: float = 180.0,
) -> checker.Figures:
    started = time.monotonic()
    spec = WorkerSpec(env.url, env.dsn, slots=slots, lost_after=3.0, poll_interval=0.5, queues=(HERD_QUEUE,))
    fleet = Supervisor(spec, workers, env.folder / "logs", fault_dsn=env.dsn)
    producer, producer_app = producer_for(env.url, env.dsn)
    extra: dict[str, Any] = {"herd": f"{jobs} jobs of {task}, {workers} workers x {slots} slots"}
    try:
        for first in range(0, jobs, 500):
            items = [{"key": f"herd-{i}", "ms": ms} for i in range(first, min(first + 500, jobs))]
            await producer.enqueue(task, items)
        fleet.start()
        await registered(env.dsn, workers)
        probes = 0
        stop = asyncio.Event()

        async def probe() -> None:
            nonlocal probes
            while not stop.is_set():
                await producer.enqueue("fault.work", [{"key": f"probe-{probes}"}], queue=HERD_QUEUE)
                probes += 1
                await asyncio.sleep(probe_every)

        prober = asyncio.create_task(probe())
        extra["drain s"] = round(await drain(env.dsn, timeout), 1)
        stop.set()
        await prober
        extra["drain s"] = round(await drain(env.dsn, 30) + extra["drain s"], 1)
        extra |= await stop_fleet(fleet)
    finally:
        await fleet.stop()
        await producer_app.dispose()
    name = "retry herd, retry_priority -1" if task.endswith("yielding") else "retry herd"
    fig = await checker.check(env.dsn, name, produced=producer.log, seconds=time.monotonic() - started)
    window = await fetch(
        env.dsn,
        "SELECT min(e.at) AS first_retry, max(e.at) AS last_retry FROM chk_exec e "
        "JOIN akadze_jobs j ON j.id = e.job_id WHERE j.task = $1 AND e.phase = 'start'",
        task,
    )
    rows = await fetch(
        env.dsn,
        "SELECT j.created_at, extract(epoch FROM min(e.at) - j.created_at) AS wait_s FROM akadze_jobs j "
        "JOIN chk_exec e ON e.job_id = j.id AND e.phase = 'start' "
        "WHERE j.args ->> 'key' LIKE 'probe-%' GROUP BY j.id",
    )
    first, last = window[0]["first_retry"], window[0]["last_retry"]
    during = [float(r["wait_s"]) for r in rows if first is not None and first <= r["created_at"] <= last]
    extra["retries due over s"] = round((last - first).total_seconds(), 1) if first and last else None
    extra["probes"] = len(rows)
    extra["probes during the herd"] = len(during)
    extra["probe wait during the herd p50 s"] = round(percentile(during, 0.5) or 0.0, 2)
    extra["probe wait during the herd max s"] = round(max(during, default=0.0), 2)
    extra["probe wait overall max s"] = round(max((float(r["wait_s"]) for r in rows), default=0.0), 2)
    fig.extra = extra
    fig.require(fig.succeeded == fig.jobs, "every job succeeded")
    fig.require(len(during) >= 5, "probes arrived while the retries ran")
    return fig
