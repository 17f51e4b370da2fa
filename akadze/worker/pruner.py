"""Deletes what retention no longer keeps: finished jobs, schedule runs and idle limit groups
older than ``app.retention``, in small batches, by one worker at a time.

Each batch is one statement and its own short transaction. It takes a transaction-scoped
advisory lock with a try (no session state, so it passes PgBouncer in transaction mode, and
the lock goes with the commit), and skips rows that anyone else holds (SKIP LOCKED), so a
pruner never waits on a worker, never makes a worker wait long, and never deadlocks with
another pruner. A worker that finds the lock taken leaves the pass to the holder.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db import locks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries

if TYPE_CHECKING:
    from akadze.worker import Worker
    from akadze.worker.services import Service

logger = logging.getLogger("akadze.pruner")

#: seconds between pruning passes of one worker (each jittered by up to a tenth)
INTERVAL_S = 60.0
#: by default the first pass waits a random part of this many seconds, so a fleet started at
#: once spreads its first passes
FIRST_DELAY_S = 10.0
#: rows deleted per statement: small enough that no lock is held for long
BATCH_SIZE = 1000
#: seconds to pause between batches, leaving the database to the workers' own statements
BATCH_PAUSE_S = 0.0


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one pass deleted; ``yielded`` when another worker was pruning and this one stopped."""

    jobs: int
    schedule_runs: int
    yielded: bool
    seconds: float
    #: limit groups unused for retention, with no running job (akadze.Limit with key=)
    limit_groups: int = 0


async def prune(
    engine: AsyncEngine,
    retention: timedelta,
    *,
    batch_size: int = BATCH_SIZE,
    batch_pause_s: float = BATCH_PAUSE_S,
) -> Pruned:
    """One pass: delete finished jobs, then schedule runs, older than ``retention``, until none
    is left or another pruner holds the lock. Batches commit one by one."""
    started = time.monotonic()
    retention_s = retention.total_seconds()
    counts: list[int] = []
    yielded = False
    for batch in (Queries.prune_jobs, Queries.prune_schedule_runs, Queries.prune_limit_groups):
        deleted, yielded = await _drain(engine, batch, retention_s, batch_size, batch_pause_s)
        counts.append(deleted)
        if yielded:
            break
    counts += [0] * (3 - len(counts))
    return Pruned(counts[0], counts[1], yielded, time.monotonic() - started, counts[2])


def pruner_service(
    *,
    interval_s: float = INTERVAL_S,
    first_delay_s: float | None = None,
    batch_size: int = BATCH_SIZE,
    batch_pause_s: float = BATCH_PAUSE_S,
    rng: random.Random | None = None,
) -> Service:
    """The worker service that prunes; the defaults are what workers run with.

    Args:
        interval_s: seconds between passes (each jittered by up to a tenth).
        first_delay_s: seconds before the first pass; by default a random part of FIRST_DELAY_S.
        batch_size: rows deleted per statement.
        batch_pause_s: seconds to pause between batches.
    """
    jitter = rng or random.Random()  # noqa: S311 (jitter, not crypto)

    async def pruner(worker: Worker) -> None:
        app = worker.app
        await asyncio.sleep(jitter.uniform(0.0, FIRST_DELAY_S) if first_delay_s is None else first_delay_s)
        while True:
            try:
                pruned = await prune(
                    app.engine, app.retention, batch_size=batch_size, batch_pause_s=batch_pause_s
                )
            except Exception as exc:
                if is_transient(exc):
                    logger.warning("prune pass failed (%s)", type(exc).__name__)
                else:
                    logger.exception("prune pass failed")
            else:
                if pruned.jobs or pruned.schedule_runs:
                    logger.info(
                        "pruned %d finished jobs and %d schedule runs older than %s in %.1fs",
                        pruned.jobs,
                        pruned.schedule_runs,
                        app.retention,
                        pruned.seconds,
                    )
            await asyncio.sleep(interval_s * jitter.uniform(0.9, 1.1))

    return pruner


Batch = Callable[..., Awaitable[int | None]]


async def _drain(
    engine: AsyncEngine, batch: Batch, retention_s: float, batch_size: int, batch_pause_s: float
) -> tuple[int, bool]:
    total = 0
    async with engine.connect() as conn:
        while True:
            deleted = await batch(conn, retention_s=retention_s, limit=batch_size, lock_key=locks.PRUNE)
            # each batch commits on its own: its row locks and the advisory lock go at once
            await conn.commit()
            if deleted is None:
                return total, True
            total += deleted
            if deleted < batch_size:
                return total, False
            if batch_pause_s:
                await asyncio.sleep(batch_pause_s)
