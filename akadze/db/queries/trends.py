"""The trends: the worker service's rollup of finished jobs into per-minute and per-hour rows
(akadze/worker/trends.py), and the dashboard's reads of them (db/trends.py types them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import statement
from akadze.db.trends import PER_DOUBLING, TOP_BUCKET, TrendSlot, TrendTotal, totals_of, trend_of


class RollStep(msgspec.Struct, frozen=True):
    """What one step of the minute rollup did."""

    #: this transaction held the rollup's lock (else another worker is rolling up)
    locked: bool
    #: the mark exists (else start_job_stats_mark must make it first)
    marked: bool
    #: minute rows written
    written: int
    #: finished jobs wait beyond this step: run another
    behind: bool


class TrendQueries:
    """The statements of the trends (Queries' area for worker/trends.py and the dashboard's page)."""

    @staticmethod
    async def rollup_job_stats_minutes(
        conn: Connection, *, lock_key: int, settle_s: float, chunk_rows: int
    ) -> RollStep:
        """One step of the minute rollup: count the jobs finished after the mark, up to about
        ``chunk_rows`` and never within ``settle_s`` of now, into minute rows, then move the mark.
        What happened comes back as a RollStep: the caller repeats while ``behind``."""
        params = {
            "lock_key": lock_key,
            "settle_s": settle_s,
            "chunk_rows": chunk_rows,
            "per_doubling": PER_DOUBLING,
            "top_bucket": TOP_BUCKET,
        }
        row = (await fetch(conn, statement("rollup_job_stats_minutes"), params))[0]
        return RollStep(bool(row["locked"]), bool(row["marked"]), int(row["written"]), bool(row["behind"]))

    @staticmethod
    async def start_job_stats_mark(conn: Connection) -> None:
        """Make the rollup's mark when it is missing (a fresh schema), after the rows already written
        or at the oldest finished job kept; an existing mark is kept. Run under the rollup's lock."""
        await execute(conn, statement("start_job_stats_mark"), {})

    @staticmethod
    async def rollup_job_stats_hours(conn: Connection) -> int:
        """Hour rows written for the hours the minute rollup has passed."""
        return int((await fetch(conn, statement("rollup_job_stats_hours"), {}))[0]["written"])

    @staticmethod
    async def prune_job_stats(conn: Connection, *, minute_keep_s: float, hour_keep_s: float) -> int:
        """Delete minute rows older than ``minute_keep_s`` and hour rows older than ``hour_keep_s``;
        returns how many went. Run in the rollup's transaction, under its lock."""
        params = {"minute_keep_s": minute_keep_s, "hour_keep_s": hour_keep_s}
        return int((await fetch(conn, statement("prune_job_stats"), params))[0]["deleted"])

    @staticmethod
    async def job_stats_mark(conn: Connection) -> tuple[datetime, datetime | None, datetime | None]:
        """The database's clock, and how far the rollup has gone (minutes, hours; None before it ran)."""
        row = (await fetch(conn, statement("job_stats_mark"), {}))[0]
        return row["now"], row["minutes_until"], row["hours_until"]

    @staticmethod
    async def job_trend(
        conn: Connection,
        *,
        since: datetime,
        until: datetime,
        hourly: bool,
        slot: timedelta | None = None,
        queue: str | None = None,
        task: str | None = None,
    ) -> Sequence[Mapping[str, Any]]:
        """job_trend.sql's rows from ``since`` to ``until``: per ``slot`` (of the queue and task
        given, None: any), or per queue and task without a slot."""
        params: dict[str, Any] = {
            "since": since,
            "until": until,
            "slot_s": (slot or timedelta(minutes=1)).total_seconds(),
            "by_slot": slot is not None,
            "hourly": hourly,
            "queue": queue,
            "task": task,
        }
        return await fetch(conn, statement("job_trend"), params)

    @staticmethod
    async def trend_slots(
        conn: Connection,
        *,
        since: datetime,
        slot: timedelta,
        count: int,
        hourly: bool,
        queue: str | None = None,
        task: str | None = None,
    ) -> list[TrendSlot]:
        """``count`` slots of ``slot`` from ``since``, of the queue and task given (None: any)."""
        rows = await TrendQueries.job_trend(
            conn, since=since, until=since + count * slot, hourly=hourly, slot=slot, queue=queue, task=task
        )
        return trend_of(rows, since, slot, count)

    @staticmethod
    async def trend_totals(
        conn: Connection, *, since: datetime, until: datetime, hourly: bool
    ) -> tuple[list[TrendTotal], list[TrendTotal]]:
        """Per task (and its queue) and per queue, from ``since`` to ``until``; the busiest first."""
        return totals_of(await TrendQueries.job_trend(conn, since=since, until=until, hourly=hourly))
