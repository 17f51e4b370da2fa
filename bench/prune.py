"""Pruning a million finished jobs under a live worker: how long it takes, and what it costs the
jobs that run meanwhile.

    python bench/prune.py [--database-url postgresql://postgres@127.0.0.1:5432/postgres]

Creates the database ``akadze_bench_prune`` on that server (dropped first when it exists),
loads FINISHED finished jobs older than retention, and starts a worker process (the real
Worker, its pruner replaced by one that starts after a baseline, so the phases are known).
This process enqueues a steady trickle of no-op jobs throughout and then reports, per phase
(before, during and after the prune), the jobs' latency from enqueue to finish and from ready
to claim, by the database's clock. It also prints the claim's plan with the table full.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from akadze import Akadze  # noqa: E402
from akadze.app import normalize_url  # noqa: E402

FINISHED = 1_000_000
RATE = 50  # trickle jobs per second
BASELINE_S = 10.0
TAIL_S = 5.0
DATABASE = "akadze_bench_prune"

LOAD = f"""
INSERT INTO akadze_jobs (task, queue, state, attempt, run, args, created_at, run_at, started_at, finished_at)
SELECT
    'old',
    'default',
    (ARRAY['succeeded', 'failed', 'cancelled'])[1 + n % 3],
    1,
    1,
    jsonb_build_object('n', n, 'note', 'a finished job of the kind that piles up'),
    now() - interval '8 days' - make_interval(secs => n),
    now() - interval '8 days' - make_interval(secs => n),
    now() - interval '8 days' - make_interval(secs => n),
    now() - interval '8 days' - make_interval(secs => n) + interval '20 milliseconds'
FROM generate_series(1, {FINISHED}) AS n
"""


def plain(url: str) -> str:
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def with_database(url: str, name: str) -> str:
    return make_url(normalize_url(url)).set(database=name).render_as_string(hide_password=False)


def make_app(url: str) -> Akadze:
    app = Akadze(database_url=url, retention=timedelta(days=7))

    @app.task("trickle")
    async def trickle() -> None:
        return None

    return app


# -- the worker process ---------------------------------------------------------------------


async def serve(url: str, prune_after_s: float) -> None:
    """A worker whose pruner makes one pass after ``prune_after_s`` and prints its times."""
    from akadze.worker import Worker
    from akadze.worker.pruner import prune

    app = make_app(url)

    async def timed_pruner(worker: Worker) -> None:
        await asyncio.sleep(prune_after_s)
        print(json.dumps({"prune_start": time.time()}), flush=True)
        pruned = await prune(worker.app.engine, worker.app.retention)
        print(
            json.dumps({"prune_end": time.time(), "jobs": pruned.jobs, "seconds": pruned.seconds}),
            flush=True,
        )

    worker = Worker(app, slots=10)
    worker.services = [s for s in worker.services if getattr(s, "__name__", "") != "pruner"]
    worker.services.append(timed_pruner)
    try:
        await worker.run()
    finally:
        await app.dispose()


# -- the bench ------------------------------------------------------------------------------


async def setup(server: str) -> str:
    admin = await asyncpg.connect(plain(server))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    url = with_database(server, DATABASE)
    app = make_app(url)
    try:
        await app.migrate()
    finally:
        await app.dispose()
    conn = await asyncpg.connect(plain(url))
    try:
        started = time.monotonic()
        await conn.execute(LOAD)
        await conn.execute("VACUUM ANALYZE akadze_jobs")
        print(f"loaded {FINISHED:,} finished jobs in {time.monotonic() - started:.1f}s")
    finally:
        await conn.close()
    return url


async def claim_plan(url: str) -> list[str]:
    from akadze.db.sql import statement

    conn = await asyncpg.connect(plain(url))
    try:
        raw = await conn.fetchval(
            f"EXPLAIN (FORMAT JSON) {statement('claim').pg}",
            ["default"],
            10,
            "00000000-0000-0000-0000-000000000000",
        )
    finally:
        await conn.close()
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "akadze_jobs":
            found.append(f"{node['Node Type']} using {node.get('Index Name', '-')}")
        for child in node.get("Plans", []):
            walk(child)

    walk(json.loads(raw)[0]["Plan"])
    return found


async def trickle(url: str, stop: asyncio.Event) -> int:
    app = make_app(url)
    task = app.tasks["trickle"]
    sent = 0
    next_at = time.monotonic()
    try:
        while not stop.is_set():
            await task.enqueue()
            sent += 1
            next_at += 1 / RATE
            await asyncio.sleep(max(next_at - time.monotonic(), 0))
    finally:
        await app.dispose()
    return sent


async def read_events(proc: asyncio.subprocess.Process, events: dict[str, Any]) -> None:
    assert proc.stdout is not None
    async for line in proc.stdout:
        text = line.decode().strip()
        if text.startswith("{"):
            events.update(json.loads(text))


def summary(latencies: list[float]) -> str:
    if not latencies:
        return "no jobs"
    ordered = sorted(latencies)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    ms = [value * 1000 for value in (p50, p99, ordered[-1])]
    return f"{len(ordered):4d} jobs  p50 {ms[0]:6.1f} ms  p99 {ms[1]:6.1f} ms  max {ms[2]:6.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("AKADZE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prune-after", type=float, default=BASELINE_S, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        await serve(args.database_url, args.prune_after)
        return

    url = await setup(args.database_url)
    print("claim plan with the table full:", "; ".join(await claim_plan(url)))
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--worker",
        "--database-url",
        url,
        "--prune-after",
        str(BASELINE_S),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    events: dict[str, Any] = {}
    reader = asyncio.create_task(read_events(worker, events))
    # the trickle starts once the worker serves, so "before" measures a running worker
    conn = await asyncpg.connect(plain(url))
    try:
        while not await conn.fetchval("SELECT count(*) FROM akadze_workers"):
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    stop = asyncio.Event()
    producer = asyncio.create_task(trickle(url, stop))
    while "prune_end" not in events:
        if worker.returncode is not None:
            raise SystemExit("the worker process exited early")
        await asyncio.sleep(0.1)
    await asyncio.sleep(TAIL_S)
    stop.set()
    sent = await producer
    conn = await asyncpg.connect(plain(url))
    try:
        deadline = time.monotonic() + 30
        while await conn.fetchval(
            "SELECT count(*) FROM akadze_jobs WHERE task = 'trickle' AND state <> 'succeeded'"
        ):
            if time.monotonic() > deadline:
                raise SystemExit("trickle jobs did not finish")
            await asyncio.sleep(0.1)
        rows = await conn.fetch(
            "SELECT extract(epoch FROM created_at) AS created, "
            "extract(epoch FROM finished_at - created_at) AS total, "
            "extract(epoch FROM started_at - run_at) AS claim "
            "FROM akadze_jobs WHERE task = 'trickle'"
        )
        left = await conn.fetchval("SELECT count(*) FROM akadze_jobs WHERE task = 'old'")
    finally:
        await conn.close()
    worker.send_signal(signal.SIGTERM)
    await worker.wait()
    reader.cancel()

    start, end = events["prune_start"], events["prune_end"]
    phases = {
        "before": [r for r in rows if float(r["created"]) < start],
        "during": [r for r in rows if start <= float(r["created"]) <= end],
        "after": [r for r in rows if float(r["created"]) > end],
    }
    print(
        f"pruned {events['jobs']:,} finished jobs in {events['seconds']:.1f}s "
        f"({events['jobs'] / events['seconds']:,.0f} rows/s, batches of 1,000); {left} left"
    )
    print(f"trickle: {sent} jobs at {RATE}/s, worker slots 10; load average {os.getloadavg()[0]:.1f}")
    for phase, selected in phases.items():
        print(f"  {phase:<6} enqueue->finish {summary([float(r['total']) for r in selected])}")
        print(f"  {'':<6} ready->claim    {summary([float(r['claim']) for r in selected])}")


if __name__ == "__main__":
    asyncio.run(main())
