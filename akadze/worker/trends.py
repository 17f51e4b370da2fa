"""Rolls finished jobs up into the dashboard's trends: once a minute, one worker of the fleet
counts the jobs that finished since its last pass, per minute, queue, task and final state, with
a histogram of their run times (akadze_job_stats, migration 0014); completed hours are summed
into hour rows; rows past their keep are deleted.

It reads akadze_jobs after the fact (the range of akadze_jobs_prune_idx that finished since the
mark) and writes only its own table: the claim and completion statements are not touched, so a
drain pays only this read, once per job (docs/dashboard.md, "Trends", has the measure). A minute
is counted once it ended SETTLE_S ago: a transaction that commits later than that after its own
now() (a complete_tx held open for minutes) is not counted. Each step is one short transaction
under a transaction-scoped advisory try-lock (no session state, so it passes PgBouncer in
transaction mode); a worker that finds the lock taken leaves the pass to the holder.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db import locks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries

if TYPE_CHECKING:
    from akadze.worker import Worker
    from akadze.worker.services import Service

logger = logging.getLogger("akadze.trends")

#: seconds between passes of one worker (each jittered by up to a tenth)
INTERVAL_S = 60.0
#: a minute is rolled up once it ended this many seconds ago
SETTLE_S = 60.0
#: finished jobs one step (one transaction) reads, about: whole minutes, at least one
CHUNK_ROWS = 50_000
#: how long the rows are kept: minute rows (the hour and day views), hour rows (the week view)
MINUTE_KEEP_S = 2 * 86_400.0
HOUR_KEEP_S = 35 * 86_400.0


@dataclass(frozen=True, slots=True)
class Rolled:
    """What one pass wrote; ``yielded`` when another worker was rolling up and this one stopped."""

    minute_rows: int
    hour_rows: int
    pruned: int
    yielded: bool


async def roll_up(
    engine: AsyncEngine,
    *,
    settle_s: float = SETTLE_S,
    chunk_rows: int = CHUNK_ROWS,
    minute_keep_s: float = MINUTE_KEEP_S,
    hour_keep_s: float = HOUR_KEEP_S,
) -> Rolled:
    """One pass: steps until every settled minute is rolled up or another worker holds the lock."""
    minute_rows = hour_rows = pruned = 0
    while True:
        async with engine.begin() as conn:
            step = await Queries.rollup_job_stats_minutes(
                conn, lock_key=locks.ROLLUP, settle_s=settle_s, chunk_rows=chunk_rows
            )
            if not step.locked:
                return Rolled(minute_rows, hour_rows, pruned, yielded=True)
            if not step.marked:
                await Queries.start_job_stats_mark(conn)
                continue  # committed: the next step starts from the mark
            minute_rows += step.written
            hour_rows += await Queries.rollup_job_stats_hours(conn)
            if not step.behind:
                pruned += await Queries.prune_job_stats(
                    conn, minute_keep_s=minute_keep_s, hour_keep_s=hour_keep_s
                )
        if not step.behind:
            return Rolled(minute_rows, hour_rows, pruned, yielded=False)


def trends_service(
    *,
    interval_s: float = INTERVAL_S,
    settle_s: float = SETTLE_S,
    first_delay_s: float | None = None,
    rng: random.Random | None = None,
) -> Service:
    """The worker service that rolls up the trends; the defaults are what workers run with.

    Args:
        interval_s: seconds between passes (each jittered by up to a tenth).
        settle_s: a minute is rolled up once it ended this long ago.
        first_delay_s: seconds before the first pass; by default a random part of the interval.
    """
    jitter = rng or random.Random()  # noqa: S311 (jitter, not crypto)

    async def trends(worker: Worker) -> None:
        engine = worker.app.engine
        await asyncio.sleep(jitter.uniform(0.0, interval_s) if first_delay_s is None else first_delay_s)
        while True:
            try:
                await roll_up(engine, settle_s=settle_s)
            except Exception as exc:
                if is_transient(exc):
                    logger.warning("trends rollup failed (%s)", type(exc).__name__)
                else:
                    logger.exception("trends rollup failed")
            await asyncio.sleep(interval_s * jitter.uniform(0.9, 1.1))

    return trends
