"""What an open dashboard and the metrics' queue gauges cost the primary, with and without a
read replica (issue 30; docs/scaling.md, "Read replicas").

    flock /tmp/akadze-bench.lock .venv/bin/python -m bench.replica_reads [--jobs 200000] [--rounds 20]

Starts a primary and an asynchronous streaming standby of its own (tests/faults/replication.py:
Debian's PostgreSQL 15), loads ``--jobs`` finished jobs and 1,000 queued ones, and registers a
live worker. Then ``--rounds`` times, alternately for an app that reads from the primary and one
with ``read_database_url`` on the standby: one dashboard refresh (the overview, jobs, queues and
workers pages, through the ASGI app in this process) and one queue-gauge read. Per round it
takes the CPU time each server's processes spent (from /proc: live backends, plus what the
postmaster reaped) and prints the mean per refresh (the kernel counts CPU in ticks of 10 ms, so
a mean over many rounds, not one round's figure) and the median wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from akadze import Akadze  # noqa: E402
from akadze.db.queries import Queries  # noqa: E402
from akadze.web import create_app  # noqa: E402
from tests.faults.replication import Node, execute, processes, running_pair  # noqa: E402

PAGES = ("/", "/jobs", "/queues", "/workers")
TICK_S = os.sysconf("SC_CLK_TCK")

LOAD = """
INSERT INTO akadze_jobs (task, queue, state, attempt, run, args, created_at, run_at, started_at, finished_at)
SELECT 'report.build', 'q' || (n % 8), (ARRAY['succeeded', 'failed', 'cancelled'])[1 + n % 3], 1, 1,
    jsonb_build_object('n', n), now() - make_interval(secs => n), now() - make_interval(secs => n),
    now() - make_interval(secs => n), now() - make_interval(secs => n) + interval '20 milliseconds'
FROM generate_series(1, $1::int) AS n;
INSERT INTO akadze_jobs (task, queue, state, args)
SELECT 'report.build', 'q' || (n % 8), 'queued', jsonb_build_object('n', n)
FROM generate_series(1, 1000) AS n;
INSERT INTO akadze_workers (id, name, host, pid, queues, slots, lost_after_s, started_at, heartbeat_at)
SELECT gen_random_uuid(), 'bench', 'bench', 1, array_agg('q' || n), 10, 3600, now(), now()
FROM generate_series(0, 7) AS n;
ANALYZE akadze_jobs;
"""


def cpu_s(node: Node) -> float:
    """CPU seconds the server's processes have spent: the postmaster's own and reaped
    children's, plus every live child's."""
    postmaster = node.postmaster_pid()
    assert postmaster is not None
    total = 0
    for pid, fields in processes().items():
        if pid == postmaster:
            total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / TICK_S


async def refresh(web: httpx.AsyncClient, app: Akadze) -> None:
    for page in PAGES:
        response = await web.get(page)
        response.raise_for_status()
    async with app.read_engine.connect() as conn:
        await Queries.queue_stats(conn, [f"q{n}" for n in range(8)])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="finished jobs in the table")
    parser.add_argument("--rounds", type=int, default=20, help="refreshes per variant")
    args = parser.parse_args()
    async with running_pair(synchronous=False, prefix="akadze-bench-replica-") as pair:
        url = pair.url("akadze")
        setup = Akadze(database_url=url)
        await setup.migrate()
        await setup.dispose()
        await execute(pair.primary_dsn("akadze"), LOAD.replace("$1::int", str(args.jobs)))
        await pair.wait_replayed(timeout=300)
        replica = pair.url("akadze", query="target_session_attrs=standby")
        apps = {
            "primary only": Akadze(database_url=url),
            "with replica": Akadze(database_url=url, read_database_url=replica),
        }
        spent: dict[str, dict[str, list[float]]] = {
            name: {"primary": [], "standby": [], "wall": []} for name in apps
        }
        clients = {
            name: httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(app)), base_url="http://b")
            for name, app in apps.items()
        }
        try:
            for name, app in apps.items():  # warm: connections open, plans cached
                await refresh(clients[name], app)
            for _ in range(args.rounds):
                for name, app in apps.items():
                    before = (cpu_s(pair.primary), cpu_s(pair.standby), time.perf_counter())
                    await refresh(clients[name], app)
                    after = (cpu_s(pair.primary), cpu_s(pair.standby), time.perf_counter())
                    for key, index in (("primary", 0), ("standby", 1), ("wall", 2)):
                        spent[name][key].append(after[index] - before[index])
        finally:
            for client in clients.values():
                await client.aclose()
            for app in apps.values():
                await app.dispose()
    pages = ", ".join(PAGES)
    print(
        f"{args.jobs:,} finished jobs, 1,000 queued; {args.rounds} refreshes each ({pages}, the queue gauges)"
    )
    print("| reads from | primary CPU per refresh (ms, mean) | standby CPU (ms, mean) | wall (ms, median) |")
    print("|---|---|---|---|")
    for name, figures in spent.items():
        cpu = [f"{statistics.fmean(figures[key]) * 1000:.1f}" for key in ("primary", "standby")]
        print(f"| {name} | {' | '.join(cpu)} | {statistics.median(figures['wall']) * 1000:.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
