"""A failover under load (issue 30): producers and worker processes on a multi-host URL, the
primary killed, its standby promoted, nobody told.

The servers are a ``replication.Pair``; the URL lists both (``h:a,h:b?target_session_attrs=
read-write``), so every connection finds whichever is the primary. The records of what ran
(``chk_exec``) and of the faults live on another server (the suite's own): a killed primary
must not take the evidence with it. Producers log each call with its times, and a watcher
notes, from the primary's own WAL positions, up to when everything acknowledged was on the
standby: with asynchronous replication what is lost must have been acknowledged after that
point (the loss is bounded by the lag); with synchronous replication nothing acknowledged is
lost at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import asyncpg

from akadze import Akadze

from . import checker
from .ledger import AUDIT, RECORDS, install
from .pgserver import OwnServer
from .producer import LoggedProducer
from .replication import fetch
from .scenarios import drain, registered, stop_fleet
from .supervisor import Supervisor, WorkerSpec

_databases = itertools.count()


class Watcher:
    """Notes when everything acknowledged so far was on the standby (flushed there): a sample
    taken at wall time ``t`` reads the primary's WAL position, and once the standby's flush
    position reaches it, every commit acknowledged before ``t`` is safe from the primary's
    death. ``safe_until`` is the latest such ``t``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.safe_until = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(self.cluster.primary_dsn(), self.cluster.standby_name)
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _run(self, dsn: str, standby: str) -> None:
        pending: list[tuple[float, int]] = []
        conn = await asyncpg.connect(dsn, timeout=5)
        try:
            while True:
                sampled = time.time()
                row = await conn.fetchrow(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS here, "
                    "(SELECT pg_wal_lsn_diff(flush_lsn, '0/0')::bigint FROM pg_stat_replication "
                    "WHERE application_name = $1) AS there",
                    standby,
                )
                assert row is not None
                pending.append((sampled, row["here"]))
                if row["there"] is not None:
                    while pending and pending[0][1] <= row["there"]:
                        self.safe_until = pending.pop(0)[0]
                await asyncio.sleep(0.01)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return  # the primary died
        finally:
            conn.terminate()


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f}/{max(values):.2f}"


async def _note(records_dsn: str, kind: str, target: str, detail: str, at: float) -> None:
    conn = await asyncpg.connect(records_dsn, timeout=5)
    try:
        await conn.execute(
            "INSERT INTO chk_fault (kind, target, detail, at) VALUES ($1, $2, $3, $4)",
            kind,
            target,
            detail,
            datetime.fromtimestamp(at, UTC),
        )
    finally:
        await conn.close()


class Cluster(Protocol):
    """A primary and a standby that fail over: replication.Pair (the test promotes) or
    autofailover.Formation (pg_auto_failover's monitor promotes)."""

    synchronous: bool

    @property
    def manager(self) -> str: ...

    @property
    def primary_name(self) -> str: ...

    @property
    def standby_name(self) -> str: ...

    def url(self, database: str) -> str: ...

    def primary_dsn(self, database: str = "postgres") -> str: ...

    async def lag(self) -> dict[str, float]: ...

    async def fail_over(self, detect_s: float = 1.0, lag_s: float = 0.0) -> tuple[float, float]: ...

    async def rejoin(self) -> None: ...


async def failover_under_load(
    cluster: Cluster,
    folder: Path,
    records: OwnServer,
    *,
    failovers: int = 1,
    before_s: float = 5.0,
    after_s: float = 6.0,
    detect_s: float = 1.0,
    lag_s: float = 0.0,
    workers: int = 2,
    lost_after: float = 6.0,
    seed: int | None = None,
) -> checker.Figures:
    """Producers (one job per call, and five per transaction) and ``workers`` worker processes
    on the cluster's multi-host URL (database ``akadze``, which must exist); ``failovers``
    times: the primary killed and the standby promoted (by the test ``detect_s`` later, or by
    a monitor), the dead one rebuilt as the new standby before the next; with ``lag_s`` the
    standby is held that far behind before each kill (Pair.fail_over). Then drain, stop,
    and check. The caller starts and stops the cluster."""
    seed = seed if seed is not None else random.randrange(2**32)
    synchronous = cluster.synchronous
    mode = "synchronous" if synchronous else "asynchronous"
    started = time.monotonic()
    records_db = f"failover_{os.getpid()}_{next(_databases)}"
    await records.create_database(records_db)
    records_dsn = records.dsn(records_db)
    await install(records_dsn, RECORDS)
    url = cluster.url("akadze")
    migrator = Akadze(database_url=url)
    try:
        await migrator.migrate()
    finally:
        await migrator.dispose()
    await install(cluster.primary_dsn("akadze"), AUDIT)
    spec = WorkerSpec(
        url,
        records_dsn,
        slots=8,
        lost_after=lost_after,
        poll_interval=0.5,
        extra_env={"AKADZE_FAULTS_SCHEDULE": "1"},
    )
    fleet = Supervisor(spec, workers, folder / "logs", fault_dsn=records_dsn)
    producers = [
        LoggedProducer("one", url, records_dsn, batch=1, pace_s=0.02, seed=seed),
        LoggedProducer("many", url, records_dsn, batch=5, pace_s=0.05, seed=seed + 1),
    ]
    stop = asyncio.Event()
    extra: dict[str, Any] = {"seed": seed, "replication": mode, "failover by": cluster.manager}
    if lag_s:
        extra["standby held back before each kill s"] = lag_s
    outages: list[dict[str, Any]] = []
    try:
        fleet.start()
        await registered(cluster.primary_dsn("akadze"), workers)
        running = [asyncio.create_task(producer.run(stop)) for producer in producers]
        for number in range(failovers):
            watcher = Watcher(cluster)
            watcher.start()
            await asyncio.sleep(before_s)
            lag = await cluster.lag()
            dead, promoted_node = cluster.primary_name, cluster.standby_name
            wall = time.time() - time.monotonic()  # the kill's and promotion's wall times
            killed, promoted = await cluster.fail_over(detect_s, lag_s)
            killed_at, promoted_at = wall + killed, wall + promoted
            await watcher.stop()
            await _note(records_dsn, "kill", f"postgres {dead}", f"failover {number + 1}", killed_at)
            await _note(
                records_dsn, "promote", f"postgres {promoted_node}", f"failover {number + 1}", promoted_at
            )
            outages.append(
                {"killed": killed_at, "promoted": promoted_at, "lag": lag, "safe_until": watcher.safe_until}
            )
            await asyncio.sleep(after_s)
            if number + 1 < failovers:
                await cluster.rejoin()
        stop.set()
        await asyncio.gather(*running)
        dsn = cluster.primary_dsn("akadze")
        extra["drain s"] = round(await drain(dsn, 120), 1)
        extra |= await _services(dsn, workers, outages[-1]["promoted"])
        extra["worker deaths"] = sum(1 for worker in fleet.workers if not worker.alive)
        extra |= await stop_fleet(fleet)
        produced = [record for producer in producers for record in producer.records()]
        fig = await checker.check(
            dsn,
            f"failover ({mode})",
            produced=produced,
            seconds=time.monotonic() - started,
            records_dsn=records_dsn,
        )
    finally:
        stop.set()
        await fleet.stop()
        for producer in producers:
            await producer.app.dispose()
    extra |= await _outage_figures(records_dsn, producers, outages, workers)
    extra["enqueue errors"] = {k: v for p in producers for k, v in p.errors.items()}
    await _bound_the_loss(fig, producers, outages, records_dsn, extra, synchronous=synchronous)
    fig.extra = extra
    _criteria(fig, extra, failovers=failovers, workers=workers)
    return fig


async def _services(dsn: str, workers: int, promoted_at: float) -> dict[str, Any]:
    """What each service of the workers did on the last new primary: heartbeats (the beat
    process), LISTEN sessions, schedule fires (the scheduler)."""
    since = datetime.fromtimestamp(promoted_at, UTC)
    beating = await fetch(dsn, "SELECT count(*) AS n FROM akadze_workers WHERE heartbeat_at > $1", since)
    listening = await fetch(
        dsn,
        "SELECT count(*) AS n FROM pg_stat_activity "
        "WHERE datname = current_database() AND query LIKE 'LISTEN %'",
    )
    fired = await fetch(dsn, "SELECT count(*) AS n FROM akadze_schedule_runs WHERE fire_at > $1", since)
    return {
        "workers beating on the new primary": f"{beating[0]['n']}/{workers}",
        "listeners on the new primary": f"{listening[0]['n']}/{workers}",
        "schedule fires after the promotion": fired[0]["n"],
    }


async def _outage_figures(
    records_dsn: str, producers: list[LoggedProducer], outages: list[dict[str, Any]], workers: int
) -> dict[str, Any]:
    """Per failover: when each producer and each worker served again, and what was refused."""
    since_kill: dict[str, list[float]] = {"producers": [], "workers": []}
    since_promotion: dict[str, list[float]] = {"producers": [], "workers": []}
    refused = unknown = 0
    back: dict[str, int] = {"producers": 0, "workers": 0}
    for outage in outages:
        killed, promoted = outage["killed"], outage["promoted"]
        for producer in producers:
            first = next((c.ended for c in producer.calls if c.outcome == "ok" and c.started > killed), None)
            if first is None:
                continue
            back["producers"] += 1
            since_kill["producers"].append(first - killed)
            since_promotion["producers"].append(first - promoted)
            during = [c for c in producer.calls if killed <= c.started < first]
            refused += sum(len(c.keys) for c in during if c.outcome == "failed")
            unknown += sum(len(c.keys) for c in during if c.outcome == "unknown")
        # a run that starts after the promotion was claimed on the new primary (a start
        # between the kill and the promotion comes from a claim acknowledged before the kill)
        rows = await fetch(
            records_dsn,
            "SELECT split_part(worker, '#', 1) AS w, extract(epoch FROM min(at))::float8 AS first "
            "FROM chk_exec WHERE phase = 'start' AND at > $1 GROUP BY 1",
            datetime.fromtimestamp(promoted, UTC),
        )
        back["workers"] += len(rows)
        since_kill["workers"] += [row["first"] - killed for row in rows]
        since_promotion["workers"] += [row["first"] - promoted for row in rows]
    return {
        "promoted after the kill s": _spread([o["promoted"] - o["killed"] for o in outages]),
        "producers serving again": f"{back['producers']}/{len(producers) * len(outages)}",
        "workers claiming again": f"{back['workers']}/{workers * len(outages)}",
        "producers back after kill p50/max s": _spread(since_kill["producers"]),
        "producers back after promotion p50/max s": _spread(since_promotion["producers"]),
        "workers back after kill p50/max s": _spread(since_kill["workers"]),
        "workers back after promotion p50/max s": _spread(since_promotion["workers"]),
        "enqueues refused during the outages": refused,
        "enqueues unknown during the outages": unknown,
        "lag at the kills (bytes flush/replay)": [
            f"{o['lag'].get('flush_bytes', 0):.0f}/{o['lag'].get('replay_bytes', 0):.0f}" for o in outages
        ],
    }


async def _bound_the_loss(
    fig: checker.Figures,
    producers: list[LoggedProducer],
    outages: list[dict[str, Any]],
    records_dsn: str,
    extra: dict[str, Any],
    *,
    synchronous: bool,
) -> None:
    """Which acknowledged enqueues are gone, and whether each was acknowledged after the
    standby was last known to hold everything (bounded by the lag) or before (a real loss);
    with asynchronous replication, the runs made again because a claim or an outcome was lost
    with the primary, and how close to the kill their earlier run was."""
    gone = fig.details.get("lost keys", [])
    fig.details["outages"] = outages
    acked = _acks(producers)
    fig.details["lost acks"] = {key: acked[key] for key in gone}
    before_kill: list[float] = []
    unexplained = 0
    for key in gone:
        # the server that acknowledged it died at the first kill after the call began; the
        # answer came before that kill and before the call returned (``ended``): a loss the
        # lag explains is one whose answer may have come after the standby held everything
        started, ended = acked[key]
        outage = next((o for o in outages if started < o["killed"]), outages[-1])
        if min(ended, outage["killed"]) > outage["safe_until"]:
            before_kill.append(outage["killed"] - min(ended, outage["killed"]))
        else:
            unexplained += 1
    extra["acknowledged enqueues lost"] = len(gone)
    if before_kill:
        extra["lost: acknowledged ms before the kill"] = _ms_range(before_kill)
    extra["standby held every acknowledged commit up to ms before the kill"] = [
        f"{max(0.0, o['killed'] - o['safe_until']) * 1000:.0f}" if o["safe_until"] else "-" for o in outages
    ]
    if synchronous:
        return
    # measured, not judged: what the lag explains; only an enqueue lost that the standby was
    # known to hold fails the run
    repeated = sorted(
        set(fig.details.get("reruns_unjustified ids", [])) | set(fig.details.get("duplicate_effects ids", []))
    )
    extra["runs repeated without a rescue"] = fig.reruns_unjustified
    extra["second external effects"] = fig.duplicate_effects
    if repeated:
        rows = await fetch(
            records_dsn,
            "SELECT job_id, array_agg(phase ORDER BY at) AS phases, "
            "array_agg(extract(epoch FROM at)::float8 ORDER BY at) AS times FROM chk_exec "
            "WHERE job_id = ANY($1::bigint[]) GROUP BY 1",
            repeated,
        )
        # when the earlier run started and ended against the kill after which the job ran
        # again: its claim (it started soon after) or its outcome (written as it ended) was
        # committed within the lag; negative: after the kill (a run that went on, or whose
        # commit was acknowledged just before the kill and recorded just after)
        starts, ends = [], []
        for row in rows:
            records = list(zip(row["phases"], row["times"], strict=True))
            for outage in outages:
                again = [at for phase, at in records if phase == "start" and at > outage["killed"]]
                earlier = [(phase, at) for phase, at in records if again and at < again[0]]
                if earlier and earlier[0][1] <= outage["killed"]:
                    starts.append(outage["killed"] - earlier[0][1])
                    ends.append(outage["killed"] - earlier[-1][1])
                    break
        if starts:
            extra["repeated: earlier run started / ended ms before the kill"] = (
                f"{_ms_range(starts)} / {_ms_range(ends)}"
            )
    fig.lost = unexplained
    fig.reruns_unjustified = 0
    fig.duplicate_effects = 0


def _acks(producers: list[LoggedProducer]) -> dict[str, tuple[float, float]]:
    """When each acknowledged job's call began and returned."""
    return {
        key: (call.started, call.ended)
        for p in producers
        for call in p.calls
        if call.outcome == "ok"
        for key in call.keys
    }


def _ms_range(seconds: Sequence[float]) -> str:
    return f"{min(seconds) * 1000:.0f}-{max(seconds) * 1000:.0f}"


def _criteria(fig: checker.Figures, extra: dict[str, Any], *, failovers: int, workers: int) -> None:
    every, each = f"{workers * failovers}/{workers * failovers}", f"{workers}/{workers}"
    wanted = [
        ("worker deaths", 0, "no worker process dies"),
        ("graceful exits", "/".join(["0"] * workers), "every worker exits 0 on SIGTERM at the end"),
        ("workers claiming again", every, "every worker claims again after every failover"),
        (
            "producers serving again",
            f"{2 * failovers}/{2 * failovers}",
            "every producer enqueues again after every failover",
        ),
        ("workers beating on the new primary", each, "every heartbeat process beats on the new primary"),
        ("listeners on the new primary", each, "every listener listens on the new primary"),
    ]
    for key, value, criterion in wanted:
        fig.require(extra.get(key) == value, criterion)
    fig.require(extra["schedule fires after the promotion"] > 0, "the scheduler fires on the new primary")
