"""Where new jobs are inserted: the one path of Task.enqueue, enqueue_many and generated clients.

The connection (the caller's session, a transaction of its own when on_enqueue hooks run, or a
raw autocommit connection from db/raw.py), the statement (one job, a batch, or under a unique
key), then the hooks and the enqueue watchers (metrics, tracing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from akadze.db.errors import raise_if_unreachable
from akadze.db.queries import NewJobs, Queries
from akadze.db.raw import RawConnections
from akadze.db.status import raise_if_schema_missing
from akadze.errors import ConfigError
from akadze.events import observe
from akadze.flow.uniqueness import insert_unique
from akadze.hooks import EnqueueHook, call
from akadze.job import Job

if TYPE_CHECKING:
    from akadze.task import EnqueueOptions


async def insert_jobs(
    placement: EnqueueOptions,
    new: NewJobs,
    payloads: Sequence[str],
    hooks: Sequence[EnqueueHook] = (),
) -> list[Job]:
    """Insert jobs whose arguments are already encoded: one statement, one round trip.

    With a session, in the caller's transaction; otherwise in its own (autocommit when no
    on_enqueue hook needs a transaction). Generated producer clients use this too.
    """
    try:
        session = placement.session
        if session is not None:
            conn = await session.connection() if isinstance(session, AsyncSession) else session
            return await _insert(conn, new, payloads, hooks)
        if placement.engine is None:
            raise ConfigError("no database: pass session= or configure an engine")
        if hooks:
            async with placement.engine.begin() as conn:
                return await _insert(conn, new, payloads, hooks)
        raw = placement.raw or RawConnections(placement.engine)
        async with raw.connection() as conn:
            # autocommit on the driver connection: one statement, no BEGIN/COMMIT
            return await _insert(conn, new, payloads, ())
    except Exception as exc:
        # a database never migrated, or none to reach: one clear error, not the driver's chain
        raise_if_schema_missing(exc)
        raise_if_unreachable(exc, placement.engine if placement.session is None else None)
        raise


async def _insert(
    conn: Any, new: NewJobs, payloads: Sequence[str], hooks: Sequence[EnqueueHook]
) -> list[Job]:
    if observe.watching():
        # metrics or tracing enabled (akadze/events/observe.py): a span, a trace context, a count
        return await observe.watched(_insert_rows, conn, new, payloads, hooks)
    return await _insert_rows(conn, new, payloads, hooks)


async def _insert_rows(
    conn: Any, new: NewJobs, payloads: Sequence[str], hooks: Sequence[EnqueueHook]
) -> list[Job]:
    if new.unique is not None:
        jobs = await insert_unique(conn, new, payloads)
    elif len(payloads) == 1:
        jobs = [await Queries.enqueue(conn, new, payloads[0])]
    else:
        jobs = await Queries.enqueue_batch(conn, new, payloads)
    if hooks:  # no coroutine per job when there is no hook
        for job in jobs:
            if not job.duplicate:  # a duplicate inserted nothing
                await call(hooks, conn, job)
    return jobs
