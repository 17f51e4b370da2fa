"""What a claim cycle costs, fixed and per job: ``python -m bench.cycle_costs [--jobs 20000]``.

A worker's drain is a chain of claim cycles: one statement (claim_completing: the outcomes
waiting, then the claim) and the worker's own turn. Both cost something per job and something
per cycle whatever it carries; four processes sharing one process's slots claim a quarter as
much per cycle, so they pay the per-cycle part four times as often (docs/performance.md, "Many
processes and PgBouncer"). This measures both parts on one database (``bench_cycle_costs``,
made and dropped here), no-op jobs, interleaved rounds:

- the server: raw asyncpg runs akadze's claim_completing (prepared, generic plans, as a
  worker's claim connection does) in a loop that claims ``k`` jobs and writes the previous
  claim's ``k`` outcomes, until the queue is empty, for k = 1, 12 and 50; the server
  backend's CPU per call (/proc: the server must run on this machine), fitted to
  ``fixed + per_job * k``;
- the worker: one ``Worker(app, slots=S)`` in this process drains the same jobs in burst
  mode, S = 12 and 50; its CPU per job (the process's, every thread), and its claims per job
  (the database's commits), fitted to ``per_job + fixed * claims_per_job``.

Then, for four processes sharing 50 slots on a machine whose cores they fill (bench.scale's
``p4_direct``) against one process at 50 slots that leaves a core idle (``p1_direct``), the
largest fixed cost per cycle that a ratio of 0.9x allows, for a few contention factors (how much
more each job's CPU costs when every core is busy: bench.scale's machine CPU per job of
``p4x_direct`` over ``p1_direct``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from typing import Any

import asyncpg

from bench.enqueue_costs import backend_cpu_s

DB = "bench_cycle_costs"
XACTS_SQL = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"


async def _fill(url: str, jobs: int) -> None:
    """The queue holds ``jobs`` ready no-op jobs and nothing else; statistics fresh."""
    from akadze import Akadze

    app = Akadze(database_url=url)

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None: ...

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("TRUNCATE akadze_jobs")
        for first in range(0, jobs, 5000):
            await noop.enqueue_many([{"i": i} for i in range(first, min(first + 5000, jobs))])
        await conn.execute("VACUUM ANALYZE akadze_jobs")
    finally:
        await conn.close()
        await app.dispose()


def _outcomes(rows: list[Any]) -> str:
    """complete_batch's batch for the claimed ``rows``, each succeeded, in the worker's own
    encoding (akadze.db.queries.runs)."""
    from akadze.db.queries.runs import _batch_encoder, _CompletionRow

    batch = [
        _CompletionRow(r["id"], r["run"], "succeeded", r["attempt"], None, None, None, True, None)
        for r in rows
    ]
    return _batch_encoder.encode(batch).decode()


async def server_round(url: str, k: int, jobs: int) -> dict[str, float]:
    """claim_completing of ``k`` at a time over ``jobs`` jobs: server CPU and wall per call."""
    from akadze.db.queries.runs import MAX_ERRORS
    from akadze.db.sql import statement

    await _fill(url, jobs)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement("generic_plans").pg)
        stmt = statement("claim_completing")
        prepared = await conn.prepare(stmt.pg)
        pid = conn.get_server_pid()
        params: dict[str, Any] = {"queues": ["default"], "limit": k, "worker_id": str(uuid.uuid4())}
        params["max_errors"] = MAX_ERRORS
        claimed: list[Any] = []
        calls = 0
        t0, s0 = time.perf_counter(), backend_cpu_s(pid)
        while True:
            params["batch"] = _outcomes(claimed)
            rows = await prepared.fetch(*[params[name] for name in stmt.params])
            calls += 1
            claimed = [row for row in rows if not row["written"]]
            if not claimed and calls > 1:
                break
        wall, cpu = time.perf_counter() - t0, backend_cpu_s(pid) - s0
    finally:
        await conn.close()
    return {"calls": calls, "server_us_per_call": cpu / calls * 1e6, "wall_us_per_call": wall / calls * 1e6}


async def worker_round(url: str, slots: int, jobs: int) -> dict[str, float]:
    """One in-process worker of ``slots`` drains ``jobs`` jobs in burst mode."""
    from akadze import Akadze
    from akadze.worker import Worker

    await _fill(url, jobs)
    app = Akadze(database_url=url, pool_size=slots)  # a connection for every run, as the worker advises

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None: ...

    worker = Worker(app, slots=slots)
    worker.services = [s for s in worker.services if getattr(s, "__name__", "") != "pruner"]
    stats = await asyncpg.connect(url)
    try:
        before = await stats.fetchval(XACTS_SQL)
        t0, c0 = time.perf_counter(), time.process_time()
        await worker.run(burst=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        await app.dispose()
        await asyncio.sleep(0.6)  # closed backends flush their statistics
        await stats.execute("SELECT pg_stat_clear_snapshot()")
        xacts = await stats.fetchval(XACTS_SQL) - before
        left = await stats.fetchval("SELECT count(*) FROM akadze_jobs WHERE state <> 'succeeded'")
    finally:
        await stats.close()
    if left:
        raise RuntimeError(f"slots {slots}: {left} jobs not succeeded")
    return {"worker_us_per_job": cpu / jobs * 1e6, "claims_per_job": xacts / jobs, "jobs_per_s": jobs / wall}


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b * x``: (a, b)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def allowed_fixed(per_job: float, alpha: float, cores: float, target: float = 0.9) -> float:
    """The largest fixed cost per cycle (µs) at which four processes of 12 slots, CPU-bound on
    ``cores`` usable cores with every job's CPU ``alpha`` times dearer, drain ``target`` times
    one process of 50 slots whose cycles run one after another (its worker and the server take
    turns): cores (c + F/50) >= target alpha (c + F/12)."""
    return per_job * (cores - target * alpha) / (target * alpha / 12 - cores / 50)


async def run(dsn: str, jobs: int, rounds: int) -> None:
    admin = await asyncpg.connect(dsn)
    await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {DB}")
    url = dsn.rsplit("/", 1)[0] + f"/{DB}"
    from akadze import Akadze

    app = Akadze(database_url=url)
    try:
        await app.migrate()
        await app.dispose()
        server: dict[int, list[float]] = {1: [], 12: [], 50: []}
        walls: dict[int, list[float]] = {1: [], 12: [], 50: []}
        work: dict[int, list[dict[str, float]]] = {12: [], 50: []}
        for r in range(rounds):
            for k in (1, 12, 50)[r % 3 :] + (1, 12, 50)[: r % 3]:
                out = await server_round(url, k, jobs // 10 if k == 1 else jobs)
                server[k].append(out["server_us_per_call"])
                walls[k].append(out["wall_us_per_call"])
            for slots in (12, 50) if r % 2 == 0 else (50, 12):
                work[slots].append(await worker_round(url, slots, jobs))
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await admin.close()

    med = statistics.median
    print(f"{rounds} rounds, {jobs:,} no-op jobs (claims of 1: a tenth of them), interleaved\n")
    print("| claim_completing of k | server CPU µs/call, median (min-max) | wall µs/call |")
    print("|---|---|---|")
    for k, values in server.items():
        print(f"| {k} | {med(values):.0f} ({min(values):.0f}-{max(values):.0f}) | {med(walls[k]):.0f} |")
    s_fixed, s_job = fit([(k, med(v)) for k, v in server.items()])
    print(f"\nserver: {s_fixed:.0f} µs per statement + {s_job:.1f} µs per job\n")
    print("| worker slots | worker CPU µs/job, median (min-max) | claims/job | jobs/s |")
    print("|---|---|---|---|")
    for slots, outs in work.items():
        cpu = [o["worker_us_per_job"] for o in outs]
        print(
            f"| {slots} | {med(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f}) "
            f"| {med(o['claims_per_job'] for o in outs):.3f} | {med(o['jobs_per_s'] for o in outs):,.0f} |"
        )
    w_job, w_fixed = fit(
        [
            (med(o["claims_per_job"] for o in outs), med(o["worker_us_per_job"] for o in outs))
            for outs in work.values()
        ]
    )
    print(f"\nworker: {w_fixed:.0f} µs per cycle + {w_job:.1f} µs per job")
    fixed, per_job = s_fixed + w_fixed, s_job + w_job
    print(f"together: F = {fixed:.0f} µs per cycle, c = {per_job:.1f} µs per job\n")
    print("| contention factor | largest F for 0.9x (2 cores, 95% usable) | F measured |")
    print("|---|---|---|")
    for alpha in (1.0, 1.2, 1.4, 1.6):
        print(f"| {alpha:.1f} | {allowed_fixed(per_job, alpha, 2 * 0.95):.0f} µs | {fixed:.0f} µs |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.uname().sysname != "Linux":
        raise SystemExit("bench.cycle_costs reads the server's CPU from /proc: Linux only")
    asyncio.run(run(args.dsn, args.jobs, args.rounds))


if __name__ == "__main__":
    main()
