"""The scenarios, sized by their arguments: pytest runs them short, chaos.py long.

Each returns the checker's Figures (plus scenario figures in ``extra``); the caller asserts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from akadze import Akadze

from . import checker
from .app import build
from .ledger import install, record_fault
from .pgserver import OwnServer
from .producer import Producer
from .supervisor import Supervisor, WorkerProcess, WorkerSpec


@dataclass
class Env:
    """Where a scenario runs: its database (direct URL and DSN) and a folder for logs."""

    url: str
    dsn: str
    folder: Path
    server: OwnServer | None = None
    database: str = ""

    def url_via(self, port: int) -> str:
        """The same database through another port on loopback (a proxy, PgBouncer)."""
        assert self.server is not None
        return self.server.url(self.database, port=port)


async def prepare(url: str, dsn: str) -> None:
    """Migrate akadze's schema and install the ledger."""
    app = Akadze(database_url=url)
    try:
        await app.migrate()
    finally:
        await app.dispose()
    await install(dsn)


async def own_env(server: OwnServer, name: str, folder: Path) -> Env:
    await server.create_database(name)
    env = Env(server.url(name), server.dsn(name), folder, server, name)
    await prepare(env.url, env.dsn)
    return env


# -- small helpers ---------------------------------------------------------------------------


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if await predicate():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval)


async def fetchval(dsn: str, query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def fetch(dsn: str, query: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def active_jobs(dsn: str) -> int:
    return int(await fetchval(dsn, "SELECT count(*) FROM akadze_jobs WHERE state IN ('queued', 'running')"))


async def drain(dsn: str, timeout: float) -> float:
    """Wait until every job is terminal (or the timeout); returns the seconds waited."""
    started = time.monotonic()

    async def done() -> bool:
        return await active_jobs(dsn) == 0

    await wait_for(done, timeout, interval=0.25)
    return time.monotonic() - started


async def registered(dsn: str, count: int, timeout: float = 60.0) -> bool:
    async def enough() -> bool:
        return int(await fetchval(dsn, "SELECT count(*) FROM akadze_workers")) >= count

    return await wait_for(enough, timeout)


def producer_for(url: str, dsn: str) -> tuple[Producer, Akadze]:
    app, _ledger = build(url, dsn)
    return Producer(app), app


def work_item(rng: random.Random, prefix: str, long_share: float = 0.1) -> Callable[[int], dict[str, Any]]:
    """Mostly short jobs (0-200 ms), ``long_share`` of 1-3 s ones."""

    def make(i: int) -> dict[str, Any]:
        long = rng.random() < long_share
        return {"key": f"{prefix}-{i}", "ms": rng.randint(1000, 3000) if long else rng.randint(0, 200)}

    return make


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def stop_fleet(fleet: Supervisor) -> dict[str, Any]:
    """Stop every worker gracefully; the figures say how each incarnation ended."""
    await fleet.settle()
    codes = await fleet.stop()
    ended: dict[int, int] = {}
    for worker in fleet.workers:
        for code in worker.exits[:-1]:
            ended[code] = ended.get(code, 0) + 1
    figures: dict[str, Any] = {"graceful exits": "/".join(str(code) for code in codes)}
    if ended:
        figures["earlier exits"] = ", ".join(f"{code}x{count}" for code, count in sorted(ended.items()))
    return figures


# -- 1. random SIGKILL under load ----------------------------------------------------------


async def kill_chaos(
    env: Env,
    *,
    jobs: int = 600,
    seconds: float = 20.0,
    workers: int = 4,
    slots: int = 4,
    kill_every: tuple[float, float] = (1.0, 3.0),
    lost_after: float = 3.0,
    seed: int | None = None,
    drain_timeout: float = 120.0,
) -> checker.Figures:
    """SIGKILL a random worker every few seconds while producers enqueue; restart it soon after."""
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    spec = WorkerSpec(env.url, env.dsn, slots=slots, lost_after=lost_after)
    fleet = Supervisor(spec, workers, env.folder / "logs", fault_dsn=env.dsn)
    fleet.seed(seed)
    producer, producer_app = producer_for(env.url, env.dsn)
    try:
        fleet.start()
        await registered(env.dsn, workers)
        fleet.watch()
        load_started = time.monotonic()
        produce = asyncio.create_task(
            producer.stream("fault.work", jobs, work_item(rng, "kill"), seconds=seconds * 0.9)
        )
        while time.monotonic() - load_started < seconds:
            await asyncio.sleep(rng.uniform(*kill_every))
            await fleet.kill(fleet.choice())
        await produce
        load_seconds = time.monotonic() - load_started
        done_before_drain = jobs - await active_jobs(env.dsn)
        waited = await drain(env.dsn, drain_timeout)
        extra = await stop_fleet(fleet)
    finally:
        await fleet.stop()
        await producer_app.dispose()
    fig = await checker.check(
        env.dsn, "SIGKILL chaos", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = {
        "seed": seed,
        "kills": fleet.kills,
        "restarts": fleet.restarts,
        "jobs/s under chaos": done_before_drain / load_seconds,
        "drain s": waited,
        **extra,
    }
    fig.require(
        fig.rescue_max_s is None or fig.rescue_max_s <= lost_after * 1.5 + 3.0,
        "every rescue within lost_after + rescue interval + 3 s",
    )
    fig.require(set(fig.extra["graceful exits"].split("/")) == {"0"}, "every worker exits 0 on SIGTERM")
    return fig


# -- 2. SIGSTOP: a zombie run resumed after its job was rescued ----------------------------


async def _starts(dsn: str, job_id: int) -> list[Any]:
    return await fetch(
        dsn, "SELECT run, worker, pid, at FROM chk_exec WHERE job_id = $1 AND phase = 'start'", job_id
    )


async def sigstop_fencing(env: Env, *, lost_after: float = 2.0, follow_up: int = 20) -> checker.Figures:
    """Worker A runs J1 and J2 and is SIGSTOPped; B rescues both. A resumes after B finished J1
    and while B still runs J2: both of A's complete_tx blocks must be fenced off and roll back;
    then A must carry on serving."""
    started = time.monotonic()
    spec = WorkerSpec(env.url, env.dsn, slots=2, lost_after=lost_after)
    logs = env.folder / "logs"
    a = WorkerProcess("a", spec, logs)
    b = WorkerProcess("b", spec, logs)
    fleet = Supervisor(spec, 0, logs, fault_dsn=env.dsn)
    fleet.workers = [a, b]
    producer, producer_app = producer_for(env.url, env.dsn)
    extra: dict[str, Any] = {}
    try:
        a.start()
        await registered(env.dsn, 1)
        await producer.enqueue("fault.work", [{"key": "j1", "first_ms": 1500, "ms": 50}])
        await producer.enqueue("fault.work", [{"key": "j2", "first_ms": 1500, "ms": 3000}])
        j1, j2 = (record.job_id for record in producer.log)
        assert j1 is not None and j2 is not None

        async def a_runs_both() -> bool:
            return bool(await _starts(env.dsn, j1)) and bool(await _starts(env.dsn, j2))

        assert await wait_for(a_runs_both, 30), "worker A did not start both jobs"
        await fleet.kill(a, signal.SIGSTOP)
        stopped_at = time.monotonic()
        b.start()

        async def b_took_over() -> bool:
            state = await fetchval(env.dsn, "SELECT state FROM akadze_jobs WHERE id = $1", j1)
            return state == "succeeded" and len(await _starts(env.dsn, j2)) >= 2

        assert await wait_for(b_took_over, 60), "worker B did not take both jobs over"
        extra["A stopped s"] = time.monotonic() - stopped_at
        await fleet.kill(a, signal.SIGCONT)

        async def zombies_rejected() -> bool:
            rows = await fetch(
                env.dsn,
                "SELECT job_id, detail FROM chk_exec WHERE run = 1 AND phase <> 'start' AND job_id = ANY($1)",
                [j1, j2],
            )
            return len(rows) == 2

        assert await wait_for(zombies_rejected, 30), "A's runs did not end after SIGCONT"
        rejected = await fetch(
            env.dsn,
            "SELECT detail FROM chk_exec WHERE run = 1 AND phase = 'end_err' AND job_id = ANY($1)",
            [j1, j2],
        )
        extra["zombie completions rejected"] = sum(
            1 for row in rejected if row["detail"] == "LostOwnershipError"
        )
        assert await drain(env.dsn, 30) < 30
        # A carries on: stop B, give A new work
        await b.stop()
        a_pid = a.pid
        await producer.enqueue("fault.work", [{"key": f"after-{i}", "ms": 20} for i in range(follow_up)])
        await drain(env.dsn, 60)
        extra["jobs A ran after resuming"] = int(
            await fetchval(
                env.dsn,
                "SELECT count(DISTINCT job_id) FROM chk_exec WHERE pid = $1 AND phase = 'end_ok'",
                a_pid,
            )
        )
        extra["A alive"] = a.alive
        extra["A re-registered"] = "registered again" in a.log_text()
        extra |= await stop_fleet(fleet)
    finally:
        await fleet.stop()
        await producer_app.dispose()
    fig = await checker.check(
        env.dsn, "SIGSTOP fencing", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = extra
    fig.require(extra.get("zombie completions rejected") == 2, "both zombie complete_tx blocks fenced off")
    fig.require(fig.reruns_rescue == 2, "both jobs rescued once")
    fig.require(
        bool(extra.get("A alive")) and bool(extra.get("A re-registered")), "A lives on, registered again"
    )
    fig.require(extra.get("jobs A ran after resuming", 0) > 0, "A serves again after resuming")
    return fig


# -- 2b. completions racing rescues -------------------------------------------------------------


async def completion_race(
    url: str,
    dsn: str,
    *,
    iterations: int = 1000,
    batch: int = 20,
    window_s: float = 0.05,
    seed: int | None = None,
) -> checker.Figures:
    """Claim jobs for a worker, declare it lost, and fire each job's complete_tx and rescue
    passes at random moments within ``window_s``: exactly one may win, never both."""
    from uuid import uuid4

    from akadze.context import RunContext, enter, leave
    from akadze.db.queries import Queries
    from akadze.errors import LostOwnershipError
    from akadze.testing import drain as drain_in_process
    from akadze.worker.rescuer import rescue_lost

    from .app import write_effect

    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    app, ledger = build(url, dsn, pool_size=batch + 5)
    producer = Producer(app)
    queues: list[str] = []
    outcomes = {"completed": 0, "rescued": 0, "both": 0, "neither": 0, "other errors": 0}
    try:
        for first in range(0, iterations, batch):
            items = [{"key": f"race-{i}", "ms": 0} for i in range(first, min(first + batch, iterations))]
            # a queue per batch: the claim below must take exactly these jobs
            queue = f"race-{first}"
            queues.append(queue)
            await producer.enqueue("fault.work", items, queue=queue)
            worker_id = str(uuid4())
            async with app.engine.connect() as conn:
                raw = (await conn.get_raw_connection()).driver_connection
                await Queries.register_worker(
                    raw,
                    worker_id=worker_id,
                    name="race",
                    host="race",
                    pid=0,
                    queues=[queue],
                    slots=batch,
                    lost_after_s=60,
                )
                assert raw is not None
                claimed = await Queries.claim(raw, [queue], len(items), worker_id)
                # lost from now on: the next rescue pass may take its jobs
                await raw.execute(
                    "UPDATE akadze_workers SET heartbeat_at = now() - interval '1 hour' WHERE id = $1::uuid",
                    worker_id,
                )
            results: dict[int, str] = {}

            async def complete(job: Any, results: dict[int, str] = results) -> None:
                await asyncio.sleep(rng.uniform(0, window_s))
                token = enter(RunContext(app, job))
                try:
                    await write_effect(job.args["key"])
                    results[job.id] = "completed"
                except LostOwnershipError:
                    results[job.id] = "fenced"
                except Exception as exc:
                    results[job.id] = f"error {type(exc).__name__}"
                finally:
                    leave(token)

            async def rescue() -> None:
                await asyncio.sleep(rng.uniform(0, window_s))
                await rescue_lost(app.engine, limit=rng.randint(1, 3))

            await asyncio.gather(
                *(complete(job) for job in claimed), *(rescue() for _ in range(max(1, len(claimed) // 2)))
            )
            await rescue_lost(app.engine)
            rows = await fetch(
                dsn,
                "SELECT j.id, j.state, e.job_id IS NOT NULL AS effect, EXISTS ("
                "  SELECT 1 FROM chk_transition t WHERE t.job_id = j.id AND t.old_run = 1"
                "  AND t.error_type = 'akadze.WorkerLost') AS rescued "
                "FROM akadze_jobs j LEFT JOIN chk_effect e ON e.job_id = j.id WHERE j.id = ANY($1)",
                [job.id for job in claimed],
            )
            for row in rows:
                rescued = row["rescued"]
                won = results.get(row["id"]) == "completed"
                if results.get(row["id"], "").startswith("error"):
                    outcomes["other errors"] += 1
                elif won and rescued:
                    outcomes["both"] += 1
                elif won and row["effect"] and row["state"] == "succeeded":
                    outcomes["completed"] += 1
                elif not won and rescued and not row["effect"]:
                    outcomes["rescued"] += 1
                else:
                    outcomes["neither"] += 1
        # the rescued jobs run again for real and end succeeded with their one effect
        deadline = time.monotonic() + 60
        while await active_jobs(dsn) and time.monotonic() < deadline:
            await drain_in_process(app, queues)
            await asyncio.sleep(0.2)
    finally:
        await ledger.close()
        await app.dispose()
    fig = await checker.check(
        dsn, "completion vs rescue race", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = {"seed": seed, **outcomes}
    fig.require(outcomes["both"] == 0 and outcomes["neither"] == 0, "exactly one winner per job")
    fig.require(outcomes["other errors"] == 0, "no other error")
    fig.require(
        outcomes["completed"] > 0 and outcomes["rescued"] > 0, "both sides win sometimes (a real race)"
    )
    return fig


# -- 3. PostgreSQL restarted mid-run ---------------------------------------------------------


async def db_restart(
    env: Env,
    *,
    jobs: int = 600,
    seconds: float = 24.0,
    workers: int = 3,
    restarts: tuple[str, ...] = ("fast", "immediate"),
    down_s: float = 2.0,
    lost_after: float = 3.0,
    seed: int | None = None,
) -> checker.Figures:
    """Restart the server (``fast``, then ``immediate``: a crash) while workers run and a
    producer enqueues; the workers must reconnect on their own (no supervisor) and finish."""
    assert env.server is not None
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    spec = WorkerSpec(env.url, env.dsn, slots=4, lost_after=lost_after)
    fleet = Supervisor(spec, workers, env.folder / "logs", fault_dsn=env.dsn)
    producer, producer_app = producer_for(env.url, env.dsn)
    reconnect: dict[str, list[float]] = {mode: [] for mode in restarts}
    extra: dict[str, Any] = {"seed": seed}
    try:
        fleet.start()
        await registered(env.dsn, workers)
        produce = asyncio.create_task(
            producer.stream("fault.work", jobs, work_item(rng, "restart", 0.05), seconds=seconds)
        )
        gap = seconds / (len(restarts) + 1)
        for mode in restarts:
            await asyncio.sleep(gap - down_s)
            env.server.stop(mode)
            await asyncio.sleep(down_s)
            env.server.start()
            await env.server.wait_ready()
            back = await fetchval(env.dsn, "SELECT clock_timestamp()")
            await record_fault(env.dsn, f"restart {mode}", "postgres", f"down {down_s}s")

            async def all_claiming(since: Any = back) -> bool:
                rows = await fetch(
                    env.dsn,
                    "SELECT split_part(worker, '#', 1) AS w, min(at) AS first FROM chk_exec "
                    "WHERE phase = 'start' AND at > $1 GROUP BY 1",
                    since,
                )
                return len(rows) >= workers

            await wait_for(all_claiming, 30)
            rows = await fetch(
                env.dsn,
                "SELECT split_part(worker, '#', 1) AS w, min(at) AS first FROM chk_exec "
                "WHERE phase = 'start' AND at > $1 GROUP BY 1",
                back,
            )
            reconnect[mode] = [(row["first"] - back).total_seconds() for row in rows]
            extra[f"{mode}: workers claiming again"] = f"{len(rows)}/{workers}"
        await produce
        extra["drain s"] = await drain(env.dsn, 90)
        extra["worker deaths"] = sum(1 for w in fleet.workers if not w.alive)
        extra |= await stop_fleet(fleet)
    finally:
        await fleet.stop()
        await producer_app.dispose()
    fig = await checker.check(
        env.dsn, "PostgreSQL restart", produced=producer.log, seconds=time.monotonic() - started
    )
    for mode, values in reconnect.items():
        if values:
            extra[f"{mode}: first claim after restart p50/max s"] = (
                f"{percentile(values, 0.5):.2f}/{max(values):.2f}"
            )
    extra["enqueue errors"] = dict(producer.errors)
    fig.extra = extra
    fig.require(extra.get("worker deaths") == 0, "no worker process dies")
    for mode in restarts:
        fig.require(
            extra.get(f"{mode}: workers claiming again") == f"{workers}/{workers}", f"all claim after {mode}"
        )
    return fig


# -- 4. one worker's connections cut or stalled --------------------------------------------------


async def connection_faults(
    env: Env,
    *,
    jobs: int = 500,
    seconds: float = 24.0,
    cut_s: float = 3.0,
    stall_s: float = 7.0,
    lost_after: float = 3.0,
    cycles: int = 1,
    freeze: bool = True,
    seed: int | None = None,
) -> checker.Figures:
    """Worker P reaches the database through the suite's proxy, worker D directly. P's
    connections are cut (RST) for ``cut_s``, later stalled (no RST, nothing flows) for
    ``stall_s`` (past the lost horizon: D rescues P's jobs, and P's late writes are fenced),
    and with ``freeze`` its open connections then go silent for good while new ones pass
    (half-open connections: no byte and no RST ever comes back on them)."""
    from .proxy import FaultProxy

    assert env.server is not None
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    proxy = FaultProxy(env.server.host, env.server.port)
    port = await proxy.start()
    logs = env.folder / "logs"
    p = WorkerProcess("p", WorkerSpec(env.url_via(port), env.dsn, slots=4, lost_after=lost_after), logs)
    d = WorkerProcess("d", WorkerSpec(env.url, env.dsn, slots=4, lost_after=lost_after), logs)
    fleet = Supervisor(p.spec, 0, logs, fault_dsn=env.dsn)
    fleet.workers = [p, d]
    producer, producer_app = producer_for(env.url, env.dsn)
    extra: dict[str, Any] = {"seed": seed}
    recovery: dict[str, list[float]] = {"cut": [], "stall": [], "freeze": []}

    async def fault(mode: str, length: float) -> None:
        await record_fault(env.dsn, mode, "proxy", f"{length:.1f}s")
        proxy.set_mode(mode)
        if mode != "freeze":
            await asyncio.sleep(length)
            proxy.set_mode("pass")
            await record_fault(env.dsn, "pass", "proxy")
        healed = await fetchval(env.dsn, "SELECT clock_timestamp()")

        async def p_claims_again() -> bool:
            return bool(
                await fetchval(
                    env.dsn,
                    "SELECT count(*) FROM chk_exec WHERE worker LIKE 'p#%' AND phase = 'start' AND at > $1",
                    healed,
                )
            )

        if await wait_for(p_claims_again, 60):
            first = await fetchval(
                env.dsn,
                "SELECT min(at) FROM chk_exec WHERE worker LIKE 'p#%' AND phase = 'start' AND at > $1",
                healed,
            )
            recovery[mode].append((first - healed).total_seconds())

    try:
        fleet.start()
        await registered(env.dsn, 2)
        produce = asyncio.create_task(
            producer.stream("fault.work", jobs, work_item(rng, "proxy", 0.2), seconds=seconds)
        )
        per_cycle = seconds / cycles
        for _ in range(cycles):
            await asyncio.sleep(per_cycle * 0.15)
            await fault("cut", cut_s)
            if stall_s:
                await asyncio.sleep(per_cycle * 0.1)
                await fault("stall", stall_s)
            if freeze:
                await asyncio.sleep(per_cycle * 0.1)
                await fault("freeze", 0)
        await produce
        extra["drain s"] = await drain(env.dsn, 90)
        extra["P alive"] = p.alive
        extra["P lines with 'failed'"] = sum(1 for line in p.log_text().splitlines() if "failed" in line)
        extra |= await stop_fleet(fleet)
    finally:
        await fleet.stop()
        await producer_app.dispose()
        await proxy.close()
    fig = await checker.check(
        env.dsn, "connections cut/stalled", produced=producer.log, seconds=time.monotonic() - started
    )
    for mode, values in recovery.items():
        extra[f"{mode}: P claims again after (max s)"] = max(values) if values else "never"
    extra["sessions reset"] = proxy.resets
    fig.extra = extra
    fig.require(bool(extra.get("P alive")), "the faulted worker survives")
    fig.require(set(extra["graceful exits"].split("/")) == {"0"}, "both workers exit 0 on SIGTERM")
    for mode in ("cut", "stall", "freeze"):
        if mode == "cut" or (mode == "stall" and stall_s) or (mode == "freeze" and freeze):
            fig.require(
                extra[f"{mode}: P claims again after (max s)"] != "never", f"P claims again after {mode}"
            )
    return fig


# -- 5. PgBouncer in transaction mode --------------------------------------------------------

#: fault.outcome kinds and the (state, attempt) each must end in
OUTCOMES = {
    "return": ("succeeded", 1),
    "raise_once": ("succeeded", 2),
    "retry": ("succeeded", 2),
    "snooze": ("succeeded", 1),
    "fail": ("failed", 1),
    "cancel": ("cancelled", 1),
    "not_json": ("failed", 2),
    "complete_tx": ("succeeded", 1),
    "system_exit": ("failed", 2),
}


async def through_pgbouncer(
    env: Env, *, jobs: int = 300, seconds: float = 10.0, pickups: int = 4, poll_interval: float = 1.0
) -> checker.Figures:
    """Producers, workers and the outcome table through PgBouncer (transaction mode, pool 4),
    with one worker SIGKILLed mid-load; LISTEN cannot work there, so workers must poll."""
    from akadze import request_cancel

    from .pgbouncer import PgBouncer

    assert env.server is not None
    started = time.monotonic()
    bouncer = PgBouncer(env.folder / "pgbouncer", env.server.host, env.server.port, pool_size=4)
    port = await bouncer.start()
    url = env.url_via(port)
    spec = WorkerSpec(url, env.dsn, slots=4, lost_after=3.0, poll_interval=poll_interval)
    fleet = Supervisor(spec, 2, env.folder / "logs", fault_dsn=env.dsn)
    producer, producer_app = producer_for(url, env.dsn)
    extra: dict[str, Any] = {}
    rng = random.Random()
    try:
        await producer_app.migrate()  # through the pooler too: idempotent, transaction-scoped lock
        for kind in OUTCOMES:
            await producer.enqueue("fault.outcome", [{"key": f"outcome-{kind}", "kind": kind}])
        await producer.enqueue("fault.slow", [{"key": "outcome-timeout", "ms": 1000}])
        await producer.enqueue(
            "fault.work",
            [{"key": "outcome-cancelled-queued", "ms": 0}],
            delay=timedelta(hours=1),
        )
        cancel_id = producer.log[-1].job_id
        assert cancel_id is not None
        async with producer_app.engine.begin() as conn:
            assert await request_cancel(conn, cancel_id)
        fleet.start()
        await registered(env.dsn, 2)
        fleet.watch()
        produce = asyncio.create_task(
            producer.stream("fault.work", jobs, work_item(rng, "bouncer", 0.05), seconds=seconds)
        )
        await asyncio.sleep(seconds / 2)
        await fleet.kill(fleet.choice())
        await produce
        extra["drain s"] = await drain(env.dsn, 90)
        # pickup latency without LISTEN: one job at a time into an idle queue
        latencies = []
        for i in range(pickups):
            await asyncio.sleep(rng.uniform(0.2, 1.2))
            await producer.enqueue("fault.work", [{"key": f"pickup-{i}", "ms": 0}])
            job_id = producer.log[-1].job_id

            async def started_run(job_id: Any = job_id) -> bool:
                return bool(
                    await fetchval(env.dsn, "SELECT count(*) FROM chk_exec WHERE job_id = $1", job_id)
                )

            await wait_for(started_run, 10, interval=0.05)
            latency = await fetchval(
                env.dsn,
                "SELECT extract(epoch FROM min(e.at) - j.created_at) FROM chk_exec e "
                "JOIN akadze_jobs j ON j.id = e.job_id WHERE e.job_id = $1 GROUP BY j.created_at",
                job_id,
            )
            latencies.append(float(latency))
        extra["pickup max s"] = max(latencies)
        await drain(env.dsn, 30)
        logs = fleet.logs()
        extra["workers polling (LISTEN fallback)"] = logs.count("LISTEN/NOTIFY does not deliver here")
        extra["prepared-statement errors"] = (logs + bouncer.log()).lower().count("prepared statement")
        extra["worker tracebacks"] = logs.count("Traceback")
        extra |= await stop_fleet(fleet)
        rows = await fetch(
            env.dsn,
            "SELECT args ->> 'key' AS key, state, attempt FROM akadze_jobs "
            "WHERE args ->> 'key' LIKE 'outcome-%'",
        )
        got = {row["key"]: (row["state"], row["attempt"]) for row in rows}
        expected = {f"outcome-{kind}": want for kind, want in OUTCOMES.items()}
        expected["outcome-timeout"] = ("failed", 2)
        expected["outcome-cancelled-queued"] = ("cancelled", 0)
        extra["outcome rows wrong"] = sorted(key for key, want in expected.items() if got.get(key) != want)
        extra["complete_tx effect"] = await fetchval(
            env.dsn, "SELECT count(*) FROM chk_effect WHERE key = 'outcome-complete_tx'"
        )
    finally:
        await fleet.stop()
        await producer_app.dispose()
        await bouncer.stop()
    fig = await checker.check(
        env.dsn, "PgBouncer transaction mode", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = extra
    fig.require(extra.get("outcome rows wrong") == [], "every outcome row as the spec says")
    fig.require(extra.get("complete_tx effect") == 1, "the complete_tx effect committed once")
    fig.require(extra.get("prepared-statement errors") == 0, "no prepared-statement error")
    fig.require(extra.get("worker tracebacks") == 0, "no traceback")
    fig.require(extra.get("workers polling (LISTEN fallback)", 0) >= 2, "every worker falls back to polling")
    fig.require(
        extra.get("pickup max s", 99) <= poll_interval + 0.5, "pickup within the poll interval + 0.5 s"
    )
    return fig


# -- 7. poison jobs ----------------------------------------------------------------------------


async def poison(env: Env, *, normal: int = 200, lost_after: float = 2.0) -> checker.Figures:
    """Jobs that can never succeed, mixed into normal ones: arguments corrupted in the table
    (no longer valid, or built against another schema), a task name nobody registers, a task
    that raises SystemExit, and one that kills its own process (os._exit). Each must end
    failed with a clear error within its attempt budget while the normal jobs keep flowing."""
    started = time.monotonic()
    spec = WorkerSpec(env.url, env.dsn, slots=4, lost_after=lost_after)
    fleet = Supervisor(spec, 2, env.folder / "logs", fault_dsn=env.dsn)
    fleet.restart_delay = (0.2, 0.5)
    producer, producer_app = producer_for(env.url, env.dsn)
    rng = random.Random()
    extra: dict[str, Any] = {}
    try:
        await producer.enqueue("fault.strict", [{"key": f"poison-strict-{i}", "n": i} for i in range(3)])
        await producer.enqueue("fault.outcome", [{"key": "poison-system-exit", "kind": "system_exit"}])
        conn = await asyncpg.connect(env.dsn)
        try:
            await conn.execute(
                "UPDATE akadze_jobs SET args = jsonb_set(args, '{n}', '\"SECRET-not-a-number\"') "
                "WHERE args ->> 'key' IN ('poison-strict-0', 'poison-strict-2')"
            )
            await conn.execute(
                "UPDATE akadze_jobs SET args = args || '{\"unexpected\": 1}' "
                "WHERE args ->> 'key' = 'poison-strict-1'"
            )
            # built by a producer against another schema of the task: no retry can help
            await conn.execute(
                "UPDATE akadze_jobs SET args_fp = 'f00df00df00df00d' WHERE args ->> 'key' = 'poison-strict-2'"
            )
            await conn.execute(
                "INSERT INTO akadze_jobs (task, queue, args) "
                "VALUES ('fault.gone', 'faults', '{\"key\": \"poison-unknown\"}')"
            )
        finally:
            await conn.close()
        producer.log.append(checker.EnqueueRecord("poison-unknown", "ok"))
        fleet.start()
        await registered(env.dsn, 2)
        fleet.watch()
        load_started = time.monotonic()

        async def poison_done() -> bool:
            return not await fetchval(
                env.dsn,
                "SELECT count(*) FROM akadze_jobs "
                "WHERE args ->> 'key' LIKE 'poison-%' AND state IN ('queued', 'running')",
            )

        def normal_job(i: int) -> dict[str, Any]:
            return {"key": f"normal-{i}", "ms": rng.randint(20, 100)}

        # first the poison that raises, then the one that kills its process (which would take
        # the others' runs down with it and hide what they do)
        half = normal // 2
        await producer.stream("fault.work", half, normal_job, seconds=half / 40)
        await wait_for(poison_done, 120, interval=0.25)
        await producer.enqueue("fault.exit", [{"key": f"poison-exit-{i}"} for i in range(2)])
        await producer.stream("fault.work", normal - half, lambda i: normal_job(half + i), seconds=half / 40)
        await wait_for(poison_done, 120, interval=0.25)
        extra["poison quarantined after s"] = time.monotonic() - load_started
        extra["drain s"] = await drain(env.dsn, 60)
        await fleet.unwatch()
        extra["worker restarts"] = fleet.restarts
        extra |= await stop_fleet(fleet)
        rows = await fetch(
            env.dsn,
            "SELECT args ->> 'key' AS key, task, state, attempt, max_attempts, errors::text AS errors, "
            "(SELECT count(*) FROM chk_transition t "
            " WHERE t.job_id = j.id AND t.new_state = 'running') AS claims "
            "FROM akadze_jobs j WHERE args ->> 'key' LIKE 'poison-%' ORDER BY 1",
        )
        poisoned = {row["key"]: {**dict(row), "errors": json.loads(row["errors"])} for row in rows}
        normal_done = await fetchval(
            env.dsn,
            "SELECT count(*) FROM akadze_jobs WHERE args ->> 'key' LIKE 'normal-%' AND state = 'succeeded'",
        )
        extra["normal succeeded"] = f"{normal_done}/{normal}"
        # the process that ran SystemExit's last attempt went on running other jobs
        extra["SystemExit left its worker serving"] = bool(
            await fetchval(
                env.dsn,
                "SELECT count(*) FROM chk_exec later "
                "JOIN chk_exec s ON later.pid = s.pid AND later.at > s.at "
                "JOIN akadze_jobs j ON j.id = s.job_id AND s.run = j.run "
                "WHERE j.args ->> 'key' = 'poison-system-exit' AND s.phase = 'start'",
            )
        )
    finally:
        await fleet.stop()
        await producer_app.dispose()
    fig = await checker.check(
        env.dsn, "poison jobs", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.details["poison"] = poisoned
    extra["poison (state attempt/budget claims: errors)"] = "; ".join(
        f"{key.removeprefix('poison-')} {row['state']} {row['attempt']}/{row['max_attempts']} "
        f"{row['claims']}: " + ",".join(sorted({e["type"].rsplit(".", 1)[-1] for e in row["errors"]}))
        for key, row in poisoned.items()
    )
    fig.extra = extra
    fig.require(
        len(poisoned) == 7 and all(row["state"] == "failed" for row in poisoned.values()),
        "every poison job failed",
    )
    fig.require(
        all(row["claims"] <= row["max_attempts"] for row in poisoned.values()), "no claim past the budget"
    )
    fig.require("SECRET" not in str(poisoned), "no argument value in a stored error")
    for key, words in POISON_ERRORS.items():
        own = [e for e in poisoned.get(key, {}).get("errors", []) if e["type"] != "akadze.WorkerLost"]
        fig.require(
            bool(own) and all(all(w in f"{e['type']}: {e['message']}" for w in words) for e in own),
            f"{key} fails with its own clear error",
        )
    for key in ("poison-exit-0", "poison-exit-1"):
        row = poisoned.get(key, {})
        fig.require(
            row.get("attempt") == row.get("max_attempts") == 3
            and all(e["type"] == "akadze.WorkerLost" for e in row.get("errors", [])),
            f"{key} fails as a lost worker after its 3 attempts",
        )
    own = [
        e for e in poisoned.get("poison-strict-2", {}).get("errors", []) if e["type"] != "akadze.WorkerLost"
    ]
    fig.require(len(own) == 1, "a job of another argument schema fails at its first decode")
    for key in ("poison-strict-0", "poison-strict-1"):
        own = [e for e in poisoned.get(key, {}).get("errors", []) if e["type"] != "akadze.WorkerLost"]
        fig.require(len(own) == 1, f"{key}, refused by its own schema, fails at its first decode")
    fig.require(extra.get("normal succeeded") == f"{normal}/{normal}", "every normal job succeeded")
    fig.require(bool(extra.get("SystemExit left its worker serving")), "SystemExit does not end the worker")
    exits = sum(poisoned.get(f"poison-exit-{i}", {}).get("claims", 0) for i in range(2))
    fig.require(1 <= extra.get("worker restarts", 0) <= exits, "only os._exit ends a worker process")
    return fig


#: the words each raising poison job's own errors must contain
POISON_ERRORS = {
    # their own schema refuses them: no retry can help, so they fail at their first decode
    "poison-strict-0": ("ArgsRefusedError", "task 'fault.strict'", "n:"),
    "poison-strict-1": ("ArgsRefusedError", "task 'fault.strict'", "unexpected"),
    "poison-strict-2": ("ArgsSchemaMismatch", "f00df00df00df00d"),
    "poison-unknown": ("fault.gone",),
    "poison-system-exit": ("SystemExit",),
}


# -- 9. a pool smaller than the slots --------------------------------------------------------


async def small_pool(
    env: Env,
    *,
    jobs: int = 400,
    slots: int = 32,
    pool_size: int = 1,
    max_overflow: int | None = None,
    timeout: float = 120.0,
) -> checker.Figures:
    """A worker with many more slots than pool connections, whose tasks each take a pool
    connection twice (a read, then complete_tx): no deadlock, no pool timeout, every job done
    on its first attempt. The app's own engine has ``pool_size`` + 10 overflow; with
    ``max_overflow`` the app borrows an engine of exactly ``pool_size + max_overflow``."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from akadze.app import normalize_url
    from akadze.worker import Worker

    from .app import register_tasks
    from .ledger import Ledger

    started = time.monotonic()
    if max_overflow is None:
        app, ledger = build(env.url, env.dsn, pool_size=pool_size)
        capacity = pool_size + 10
    else:
        engine = create_async_engine(
            normalize_url(env.url),
            pool_size=pool_size,
            max_overflow=max_overflow,
            connect_args={"statement_cache_size": 0, "prepared_statement_cache_size": 0},
        )
        app, ledger = Akadze(engine=engine), Ledger(env.dsn)
        register_tasks(app, ledger)
        capacity = pool_size + max_overflow
    producer = Producer(app)
    rng = random.Random()
    await producer.enqueue(
        "fault.work", [{"key": f"pool-{i}", "ms": rng.randint(0, 50), "read": True} for i in range(jobs)]
    )
    worker = Worker(
        app,
        queues=["faults"],
        slots=slots,
        lost_after=timedelta(seconds=10),
        heartbeat_interval=timedelta(seconds=2),
    )
    serving = asyncio.create_task(worker.run(handle_signals=False))
    peak = 0
    try:
        deadline = time.monotonic() + timeout
        while await active_jobs(env.dsn) and time.monotonic() < deadline:
            peak = max(peak, len(worker._running))
            await asyncio.sleep(0.05)
        finished_in = time.monotonic() - started
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 60)
        await ledger.close()
        await app.dispose()
        await app.engine.dispose()
    fig = await checker.check(
        env.dsn, "pool smaller than slots", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = {
        "slots": slots,
        "pool connections": capacity,
        "peak running": peak,
        "jobs/s": jobs / finished_in,
    }
    fig.require(fig.succeeded == jobs and fig.reruns == 0, "every job done at its first attempt")
    fig.require(peak > capacity, "more runs at once than pool connections")
    return fig


# -- 10. no arguments or results in logs -----------------------------------------------------

CANARY_MODES = (
    "return",
    "raise",
    "raise_canary",
    "retry",
    "snooze",
    "fail",
    "cancel",
    "not_json",
    "complete_tx",
)


class LogCapture(logging.Handler):
    """Every record, as text: the message, its raw args, the traceback and stack if any."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        parts = [record.name, record.getMessage(), repr(record.args)]
        if record.exc_info:
            parts.append(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            parts.append(record.stack_info)
        self.texts.append(" | ".join(parts))


def _is_json_object(line: str) -> bool:
    import json

    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def canary_args(canary: str, key: str, mode: str, ms: int = 0) -> dict[str, Any]:
    """The canary in a plain argument, three levels deep in a model, in a list and as a key."""
    return {
        "key": key,
        "token": canary,
        "vault": {
            "inner": {"deepest": {"value": canary}, "more": ["x", canary]},
            "note": {canary: canary},
        },
        "mode": mode,
        "ms": ms,
    }


async def canary_logs(env: Env, *, lost_after: float = 2.0, log_format: str = "text") -> checker.Figures:
    """Canary values in every argument and result, every worker at DEBUG, through successes,
    every error kind, retries, snoozes, timeouts, a rescue, a fenced zombie, a release at
    shutdown and an in-process drain: no library log line may contain a canary, but for the
    one task whose own exception message quotes it (a failed run logs its error's message).
    ``log_format`` is the workers' --log-format (AKADZE_LOG_FORMAT)."""
    from uuid import uuid4

    from akadze.testing import drain as drain_in_process

    canary = f"CANARY-{uuid4().hex}"
    started = time.monotonic()
    capture = LogCapture()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    spec = WorkerSpec(
        env.url,
        env.dsn,
        slots=4,
        lost_after=lost_after,
        log_level="DEBUG",
        shutdown_timeout=1.0,
        extra_env={"AKADZE_LOG_FORMAT": log_format},
    )
    logs = env.folder / "logs"
    a, b = WorkerProcess("a", spec, logs), WorkerProcess("b", spec, logs)
    fleet = Supervisor(spec, 0, logs, fault_dsn=env.dsn)
    fleet.workers = [a, b]
    producer, producer_app = producer_for(env.url, env.dsn)
    extra: dict[str, Any] = {}
    try:
        a.start()
        await registered(env.dsn, 1)
        # a rescue and a fenced zombie
        await producer.enqueue("fault.canary", [canary_args(canary, "canary-zombie", "return", ms=1500)])

        async def started_run(key: str = "canary-zombie") -> bool:
            return bool(
                await fetchval(
                    env.dsn,
                    "SELECT count(*) FROM chk_exec e JOIN akadze_jobs j ON j.id = e.job_id "
                    "WHERE j.args ->> 'key' = $1",
                    key,
                )
            )

        await wait_for(started_run, 30)
        await fleet.kill(a, signal.SIGSTOP)
        b.start()
        await wait_for(lambda: _state_is(env.dsn, "canary-zombie", "succeeded"), 30)
        await fleet.kill(a, signal.SIGCONT)
        # every outcome, timeouts included
        await producer.enqueue(
            "fault.canary", [canary_args(canary, f"canary-{mode}", mode) for mode in CANARY_MODES]
        )
        await producer.enqueue("fault.canary", [canary_args(canary, "canary-timeout", "return", ms=4000)])
        await drain(env.dsn, 40)
        # a release at graceful shutdown, then the in-process drain runs it again
        await producer.enqueue("fault.canary", [canary_args(canary, "canary-release", "return", ms=2000)])
        await wait_for(lambda: started_run("canary-release"), 30)
        extra |= await stop_fleet(fleet)
        await drain_in_process(producer_app)
        await drain(env.dsn, 10)
    finally:
        await fleet.stop()
        await producer_app.dispose()
        root.removeHandler(capture)
        root.setLevel(old_level)
    # the task's own message, logged with its failed run (and its traceback at DEBUG)
    own_message = f"a user's message that quotes {canary}"
    lines = [line for line in fleet.logs().splitlines() if canary in line.replace(own_message, "")]
    lines += [text for text in capture.texts if canary in text.replace(own_message, "")]
    extra["own message logged"] = own_message in fleet.logs()
    if log_format == "json":
        # fleet.logs() heads each incarnation's log with a "--- name incarnation n ---" line
        written = [line for line in fleet.logs().splitlines() if line and not line.startswith("--- ")]
        extra["worker lines not JSON"] = [line for line in written if not _is_json_object(line)][:3]
    extra["log lines"] = len(fleet.logs().splitlines()) + len(capture.texts)
    everything = fleet.logs() + "\n".join(capture.texts)
    extra["paths not logged"] = [
        path
        for path in ("rescued from lost worker", "outcome dropped", "declared lost", "waiting for 1 running")
        if path not in everything
    ]
    extra["canary hits in logs"] = len(lines)
    extra["first hits"] = lines[:3]
    extra["stored errors with a canary"] = sorted(
        row["key"]
        for row in await fetch(
            env.dsn,
            "SELECT args ->> 'key' AS key FROM akadze_jobs WHERE errors::text LIKE '%' || $1 || '%'",
            canary,
        )
    )
    extra["released at shutdown"] = bool(
        await fetchval(
            env.dsn,
            "SELECT count(*) FROM chk_transition t JOIN akadze_jobs j ON j.id = t.job_id "
            "WHERE j.args ->> 'key' = 'canary-release' AND t.old_state = 'running' "
            "AND t.new_state = 'queued' AND t.error_type IS NULL",
        )
    )
    fig = await checker.check(
        env.dsn, "canaries in logs", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.extra = extra
    fig.require(extra["canary hits in logs"] == 0, "no canary in any log line")
    fig.require(extra["paths not logged"] == [], "the rescue, fencing and shutdown paths were walked")
    fig.require(
        extra["stored errors with a canary"] == ["canary-raise_canary"], "only a user's own message is stored"
    )
    return fig


async def _state_is(dsn: str, key: str, state: str) -> bool:
    return await fetchval(dsn, "SELECT state FROM akadze_jobs WHERE args ->> 'key' = $1", key) == state


# -- 6. one schedule, many workers, some killed -----------------------------------------------


async def schedule_figures(dsn: str, every: float) -> dict[str, Any]:
    """How the fire times of schedule ``tick`` (every ``every`` seconds) became jobs."""
    rows = await fetch(
        dsn,
        "SELECT r.fire_at, r.job_id, j.created_at, (SELECT count(*) FROM akadze_jobs x "
        "  WHERE x.task = 'fault.tick' AND x.id = r.job_id) AS jobs "
        "FROM akadze_schedule_runs r LEFT JOIN akadze_jobs j ON j.id = r.job_id "
        "WHERE r.schedule = 'tick' ORDER BY r.fire_at",
    )
    tick_jobs = int(await fetchval(dsn, "SELECT count(*) FROM akadze_jobs WHERE task = 'fault.tick'"))
    fires = [row["fire_at"] for row in rows]
    expected = round((fires[-1] - fires[0]).total_seconds() / every) + 1 if fires else 0
    lateness = [(row["created_at"] - row["fire_at"]).total_seconds() for row in rows if row["created_at"]]
    return {
        "fire times": len(fires),
        "jobs of the schedule": tick_jobs,
        "fire times without exactly one job": sum(1 for row in rows if row["jobs"] != 1),
        "jobs without a fire time": tick_jobs - sum(1 for row in rows if row["jobs"] == 1),
        "missed fire times": expected - len(fires),
        "enqueued before their fire time": sum(1 for late in lateness if late < 0),
        "lateness p50/max s": f"{percentile(lateness, 0.5):.2f}/{max(lateness):.2f}" if lateness else "-",
    }


async def schedule_chaos(
    env: Env,
    *,
    workers: int = 10,
    seconds: float = 20.0,
    every: float = 1.0,
    kill_every: tuple[float, float] = (1.0, 3.0),
    lost_after: float = 3.0,
    seed: int | None = None,
) -> checker.Figures:
    """Every worker runs the scheduler of one schedule firing every ``every`` seconds while
    random workers are SIGKILLed and restarted: each fire time must become exactly one job."""
    from akadze.testing import drain as drain_in_process

    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    spec = WorkerSpec(
        env.url, env.dsn, slots=2, lost_after=lost_after, extra_env={"AKADZE_FAULTS_SCHEDULE": str(every)}
    )
    fleet = Supervisor(spec, workers, env.folder / "logs", fault_dsn=env.dsn)
    fleet.seed(seed)
    extra: dict[str, Any] = {"seed": seed, "workers": workers}
    app, ledger = build(env.url, env.dsn)
    try:
        fleet.start()
        await registered(env.dsn, workers, timeout=90)
        fleet.watch()
        chaos_started = time.monotonic()
        while time.monotonic() - chaos_started < seconds:
            await asyncio.sleep(rng.uniform(*kill_every))
            await fleet.kill(fleet.choice())
        extra |= await stop_fleet(fleet)
        # burst runs fire nothing: this only runs what the schedule enqueued
        await drain_in_process(app)
        extra |= await schedule_figures(env.dsn, every)
        extra |= {
            "ERROR lines": sum(1 for line in fleet.logs().splitlines() if " ERROR " in line),
            "kills": fleet.kills,
        }
    finally:
        await fleet.stop()
        await ledger.close()
        await app.dispose()
    fig = await checker.check(env.dsn, "one schedule, 10 workers, kills", seconds=time.monotonic() - started)
    fig.extra = extra
    fig.require(extra.get("fire times without exactly one job") == 0, "one job per fire time")
    fig.require(extra.get("jobs without a fire time") == 0, "no job without its fire time")
    fig.require(extra.get("missed fire times") == 0, "no fire time missed")
    fig.require(extra.get("enqueued before their fire time") == 0, "nothing enqueued early")
    fig.require(extra.get("ERROR lines") == 0, "no ERROR line")
    return fig


# -- 8. hostile names and values ---------------------------------------------------------------

SAME_63 = "q" * 63
HOSTILE_NAMES = [
    "x'; DROP TABLE akadze_jobs; --",
    "'); DELETE FROM akadze_jobs; SELECT ('",
    '"',
    "\\",
    "$$",
    "$1",
    "%s",
    "default",
    "select",
    "a\nb",
    "tab\there",
    "\u202eevil\u200b",
    "naïve-名前-🚀",
    SAME_63 + "A",
    SAME_63 + "B",
]
#: names refused at registration, and a word their error must contain
REFUSED_NAMES = {"": "non-empty", " ": "non-empty", "a\x00b": "NUL", "x" * 10_000: "limit"}
HOSTILE_VALUES = [
    "x'; DROP TABLE akadze_jobs; --",
    "\\'\\\"\\\\",
    "$$ LANGUAGE sql $$",
    '{"looks": "like json"}',
    "\u202e\u200b\ufeff zero-width and RTL",
    "emoji 🚀 and CJK 名前",
    "\U0010ffff last code point",
    "l" * 200_000,
]


async def schema_fingerprint(dsn: str) -> str:
    """Tables, columns, functions and triggers of the database, hashed."""
    value: str = await fetchval(
        dsn,
        "SELECT md5(string_agg(x, ',' ORDER BY x)) FROM ("
        " SELECT c.relname || '.' || a.attname || ':' || a.atttypid::text AS x"
        " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped"
        " UNION ALL SELECT 'fn ' || proname || md5(prosrc) FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
        " UNION ALL SELECT 'tg ' || tgname FROM pg_trigger WHERE NOT tgisinternal) s",
    )
    return value


async def echo(text: str, nested: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "nested": nested}


async def hostile_input(env: Env) -> checker.Figures:
    """Hostile task, queue and schedule names and argument values, through registration,
    enqueue, LISTEN/NOTIFY, claim, run and result: stored verbatim or refused clearly."""
    from akadze.errors import ArgsTooLargeError, ConfigError
    from akadze.testing import drain as drain_in_process
    from akadze.worker import Worker
    from akadze.worker.scheduler import fire_due_schedules

    started = time.monotonic()
    conn = await asyncpg.connect(env.dsn)
    await conn.execute(
        "CREATE TABLE chk_sentinel (n int); INSERT INTO chk_sentinel SELECT generate_series(1, 10)"
    )
    await conn.close()
    before = await schema_fingerprint(env.dsn)
    extra: dict[str, Any] = {}
    app = Akadze(database_url=env.url)
    try:
        accepted: dict[str, Any] = {}
        refused: dict[str, str] = {}
        for index, name in enumerate([*HOSTILE_NAMES, *REFUSED_NAMES]):
            try:
                accepted[f"task:{name}"] = app.register(echo, name=name, queue="hostile")
            except ConfigError as exc:
                refused[f"task:{name}"] = str(exc)
            try:
                accepted[f"queue:{name}"] = app.register(echo, name=f"queue-task-{index}", queue=name)
            except ConfigError as exc:
                refused[f"queue:{name}"] = str(exc)
        extra["names accepted"] = len(accepted)
        extra["names refused"] = len(refused)
        extra["refusals without a clear reason"] = [
            f"{kind}:{name[:20]!r}"
            for name, word in REFUSED_NAMES.items()
            for kind in ("task", "queue")
            if word not in refused.get(f"{kind}:{name}", "") or len(refused[f"{kind}:{name}"]) > 300
        ]
        extra["hostile names refused"] = [key for key in refused if key.split(":", 1)[1] in HOSTILE_NAMES]

        expected: dict[int, tuple[str, str, dict[str, Any]]] = {}
        for index, task in enumerate(accepted.values()):
            value = HOSTILE_VALUES[index % len(HOSTILE_VALUES)]
            args = {"text": value, "nested": {"k'ey\"": [HOSTILE_VALUES[(index + 1) % len(HOSTILE_VALUES)]]}}
            job = await task.enqueue(**args)
            expected[job.id] = (task.name, task.queue, args)

        # the two queues that share their first 63 bytes are served apart
        queue_a, queue_b = SAME_63 + "A", SAME_63 + "B"
        runs_a = await drain_in_process(app, queues=[queue_a])
        states = await fetch(
            env.dsn, "SELECT queue, state FROM akadze_jobs WHERE queue = ANY($1)", [queue_a, queue_b]
        )
        extra["63-byte twins served apart"] = runs_a == 1 and {
            row["queue"]: row["state"] for row in states
        } == {
            queue_a: "succeeded",
            queue_b: "queued",
        }

        # a listening worker serves the rest (NOTIFY payloads carry the hostile queue names)
        worker = Worker(app, queues=sorted({queue for _, queue, _ in expected.values()}), slots=8)
        serving = asyncio.create_task(worker.run(handle_signals=False))

        async def all_done() -> bool:
            return not await fetchval(env.dsn, "SELECT count(*) FROM akadze_jobs WHERE state <> 'succeeded'")

        await wait_for(all_done, 60)
        worker.stop()
        await asyncio.wait_for(serving, 30)

        rows = await fetch(
            env.dsn, "SELECT id, task, queue, args::text AS args, result::text AS result FROM akadze_jobs"
        )
        verbatim = 0
        for row in rows:
            task_name, queue, args = expected[row["id"]]
            result = json.loads(row["result"]) if row["result"] else None
            if (
                row["task"] == task_name
                and row["queue"] == queue
                and json.loads(row["args"]) == args == result
            ):
                verbatim += 1
        extra["jobs stored, run and answered verbatim"] = f"{verbatim}/{len(expected)}"

        target = accepted["task:select"]
        for name in HOSTILE_NAMES[:6]:
            app.schedule(name, target, every=timedelta(seconds=1), args={"text": name, "nested": {}})
        schedule_refusals = 0
        for name in REFUSED_NAMES:
            try:
                app.schedule(name, target, every=timedelta(seconds=1), args={"text": "", "nested": {}})
            except ConfigError:
                schedule_refusals += 1
        look = await fire_due_schedules(app)
        stored = {
            row["schedule"] for row in await fetch(env.dsn, "SELECT schedule FROM akadze_schedule_runs")
        }
        extra["schedule names stored verbatim"] = len(look.fired) == 6 and stored == set(HOSTILE_NAMES[:6])
        extra["schedule names refused"] = f"{schedule_refusals}/{len(REFUSED_NAMES)}"

        # values that cannot be stored are refused at enqueue, with a clear error, inserting nothing
        count_before = await fetchval(env.dsn, "SELECT count(*) FROM akadze_jobs")
        bad = app.register(echo, name="hostile.echo")
        cases: list[tuple[dict[str, Any], tuple[type[Exception], ...], str]] = [
            ({"text": "nul \x00 inside", "nested": {}}, (ValueError,), "NUL"),
            ({"text": "ok", "nested": {"deep": ["nul \x00"]}}, (ValueError,), "NUL"),
            ({"text": "lone surrogate \ud800", "nested": {}}, (ValueError,), "hostile.echo"),
            ({"text": "big" * 400_000, "nested": {}}, (ArgsTooLargeError,), "over the limit"),
            ({"text": 5, "nested": {}}, (ValueError,), "text"),
            ({"text": "ok", "nested": {}, "extra": 1}, (ValueError,), "extra"),
            ({"text": "ok", "nested": {"n": float("nan")}}, (ValueError,), "NaN"),
        ]
        unclear = []
        for args, errors, word in cases:
            for attempt in ("one", "many"):
                try:
                    if attempt == "one":
                        await bad.enqueue(**args)
                    else:
                        await bad.enqueue_many([{"text": "fine", "nested": {}}, args])
                except errors as exc:
                    if word not in str(exc) or len(str(exc)) > 2000:
                        unclear.append(f"{attempt}: {str(exc)[:80]}")
                else:
                    unclear.append(f"{attempt}: accepted {word}")
        extra["unstorable values refused clearly"] = f"{len(cases) * 2 - len(unclear)}/{len(cases) * 2}"
        extra["unclear refusals"] = unclear
        extra["rows inserted by refused enqueues"] = (
            await fetchval(env.dsn, "SELECT count(*) FROM akadze_jobs") - count_before
        )
        big = "é" * 400_000
        job = await bad.enqueue(text=big, nested={})
        extra["400k-character value stored verbatim"] = (
            await fetchval(env.dsn, "SELECT args ->> 'text' FROM akadze_jobs WHERE id = $1", job.id) == big
        )
        await drain_in_process(app, queues=["hostile", "default"])
    finally:
        await app.dispose()
    extra["schema unchanged"] = await schema_fingerprint(env.dsn) == before
    extra["sentinel rows"] = await fetchval(env.dsn, "SELECT count(*) FROM chk_sentinel")
    fig = await checker.check(
        env.dsn, "hostile names and values", effect_tasks=(), seconds=time.monotonic() - started
    )
    fig.extra = extra
    fig.require(
        extra["hostile names refused"] == [] and extra["refusals without a clear reason"] == [], "names"
    )
    fig.require(
        extra["jobs stored, run and answered verbatim"]
        == f"{extra['names accepted']}/{extra['names accepted']}",
        "every job stored, run and answered verbatim",
    )
    fig.require(bool(extra["63-byte twins served apart"]), "63-byte twins served apart")
    fig.require(bool(extra["schedule names stored verbatim"]), "schedule names verbatim")
    fig.require(extra["unclear refusals"] == [] and extra["rows inserted by refused enqueues"] == 0, "values")
    fig.require(bool(extra["schema unchanged"]) and extra["sentinel rows"] == 10, "nothing run as SQL")
    return fig
