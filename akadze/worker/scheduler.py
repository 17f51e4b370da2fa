"""Fires the app's schedules: each due fire time becomes exactly one job, however many workers run.

Every worker runs this service; there is no leader. A fire time is claimed by inserting its
akadze_schedule_runs row (unique per schedule and fire time) in the transaction that enqueues
its job, so a second worker's claim finds the row and does nothing, and a failed enqueue
releases the claim. What is due is decided by ``schedule.due_fire_times`` from the database's
clock, never the host's; the claim checks it again with the clock of its own transaction.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.events import Event, Kind
from akadze.job import Job
from akadze.schedule import Schedule, due_fire_times, fire_times, next_fire_after

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.worker import Worker
    from akadze.worker.services import Service

logger = logging.getLogger("akadze.scheduler")

#: seconds between looks at the schedules when no fire time is due sooner
TICK_S = 1.0
#: the most fire times of one schedule enqueued by one look; a catch-up goes on at the next look
MAX_FIRES_PER_LOOK = 100
#: up to this many seconds of random delay after a due time, so workers spread their claims
JITTER_S = 0.05
#: the longest pause after failed looks (the pause doubles from 0.5 s)
MAX_BACKOFF_S = 30.0


@dataclass
class SchedulerState:
    """What one scheduler remembers between looks: only which skips it has already logged."""

    #: per schedule, the last skipped fire time already logged
    skips_logged: dict[str, datetime] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Look:
    """What one look did."""

    #: the database's clock when the look read the schedules
    now: datetime
    fired: list[Job]
    #: the earliest next fire time of any schedule (None without schedules)
    next_due_at: datetime | None
    #: some schedule had more due fire times than one look enqueues
    more: bool


async def fire_due_schedules(
    app: Akadze, state: SchedulerState | None = None, *, limit: int = MAX_FIRES_PER_LOOK
) -> Look:
    """One look: enqueue every due fire time of every schedule of ``app`` not enqueued yet.

    Fire times later than ``app.grace`` are skipped and logged (once per ``state``), never
    enqueued. A fire time whose enqueue fails (an on_enqueue hook raised, say) is logged and
    tried again at the next look while it is within grace; later fire times of that schedule
    wait for it, so they stay in order.
    """
    state = state if state is not None else SchedulerState()
    schedules = list(app.schedules.values())
    if not schedules:
        raise ConfigError("the app has no schedules")
    async with app.engine.connect() as conn:
        now, last = await Queries.last_schedule_runs(conn, [s.name for s in schedules])
    fired: list[Job] = []
    more = False
    for schedule in schedules:
        due = due_fire_times(
            schedule, last_fire_at=last.get(schedule.name), now=now, grace=app.grace, limit=limit
        )
        if due.skipped is not None:
            _log_skip(schedule, due.skipped, app, state)
        more = more or len(due.fire_times) >= limit
        for fire_at in due.fire_times:
            try:
                job = await _fire(app, schedule, fire_at, app.grace.total_seconds())
            except Exception as exc:
                if is_transient(exc):
                    raise
                logger.warning(
                    "schedule %r: enqueueing fire time %s failed (%s: %s); tried again while within grace",
                    schedule.name,
                    fire_at.isoformat(),
                    type(exc).__qualname__,
                    exc,
                )
                break
            if job is not None:
                fired.append(job)
    next_due_at = min(next_fire_after(s, now) for s in schedules)
    return Look(now, fired, next_due_at, more)


async def backfill(app: Akadze, name: str, *, since: datetime, until: datetime | None = None) -> list[Job]:
    """Enqueue the fire times of schedule ``name`` in (since, until] that have no job yet.

    The opt-in catch-up after an outage longer than grace: each fire time is claimed exactly
    as the scheduler claims it, so running this while workers fire, or twice, never enqueues a
    fire time twice. ``since`` must be within ``app.retention`` (older schedule runs are pruned,
    so their fire times could not be told apart from new ones); ``until`` defaults to now and
    is capped there (future fire times are never enqueued early).

    Returns the jobs enqueued, oldest fire time first.

    Raises:
        KeyError: no schedule of that name.
        ValueError: ``since`` is naive or older than retention.
    """
    schedule = app.schedules[name]
    async with app.engine.connect() as conn:
        now, _ = await Queries.last_schedule_runs(conn, [name])
    if since.tzinfo is None or since <= now - app.retention:
        raise ValueError(f"since must be an aware datetime within retention ({app.retention}) of now ({now})")
    end = min(until, now) if until is not None else now
    allowed_lateness_s = app.retention.total_seconds()
    jobs: list[Job] = []
    for fire_at in _all_fire_times(schedule, since, end):
        job = await _fire(app, schedule, fire_at, allowed_lateness_s)
        if job is not None:
            jobs.append(job)
    return jobs


def scheduler_service(
    *,
    tick_s: float = TICK_S,
    jitter_s: float = JITTER_S,
    limit: int = MAX_FIRES_PER_LOOK,
    rng: random.Random | None = None,
) -> Service:
    """The worker service that fires schedules; the defaults are what workers run with."""
    jitter = rng or random.Random()  # noqa: S311 (jitter, not crypto)

    async def scheduler(worker: Worker) -> None:
        app = worker.app
        if not app.schedules:
            return
        state = SchedulerState()
        failures = 0
        while True:
            try:
                look = await fire_due_schedules(app, state, limit=limit)
                read_at = time.monotonic()
            except Exception as exc:
                failures += 1
                pause = min(0.5 * 2 ** (failures - 1), MAX_BACKOFF_S)
                if is_transient(exc):
                    logger.warning("scheduler look failed (%s); next in %.1fs", type(exc).__name__, pause)
                else:
                    logger.exception("scheduler look failed; next in %.1fs", pause)
                await asyncio.sleep(pause)
                continue
            failures = 0
            if look.more:
                await asyncio.sleep(0)
                continue
            wait = tick_s
            if look.next_due_at is not None:
                until_due = (look.next_due_at - look.now).total_seconds() - (time.monotonic() - read_at)
                wait = min(wait, max(until_due, 0.0))
            await asyncio.sleep(wait + jitter.uniform(0.0, jitter_s))

    return scheduler


async def _fire(app: Akadze, schedule: Schedule, fire_at: datetime, grace_s: float) -> Job | None:
    async with app.engine.begin() as conn:
        if not await Queries.fire_schedule(conn, schedule.name, fire_at, grace_s):
            return None
        job = await schedule.task.using(session=conn).enqueue(**schedule.args)
        await Queries.set_schedule_run_job(conn, schedule.name, fire_at, job.id)
    if app.events.active:
        app.events.publish(
            Event(Kind.FIRED, job.id, job.task, job.queue, None, job.state, job.attempt, job.run)
        )
    logger.info(
        "schedule=%s fire_at=%s job_id=%d task=%s enqueued",
        schedule.name,
        fire_at.isoformat(),
        job.id,
        job.task,
    )
    return job


def _all_fire_times(schedule: Schedule, since: datetime, until: datetime) -> Iterator[datetime]:
    after = since
    while True:
        chunk = fire_times(schedule, after, until, limit=1000)
        yield from chunk
        if len(chunk) < 1000:
            return
        after = chunk[-1]


def _log_skip(
    schedule: Schedule, skipped: tuple[datetime, datetime], app: Akadze, state: SchedulerState
) -> None:
    first, last = skipped
    logged = state.skips_logged.get(schedule.name)
    if logged is not None and last <= logged:
        return
    state.skips_logged[schedule.name] = last
    logger.info(
        "schedule %r: skipped fire times from %s to %s, later than grace (%s); they are not "
        "enqueued (see backfill in docs/schedules.md)",
        schedule.name,
        first.isoformat(),
        last.isoformat(),
        app.grace,
    )
