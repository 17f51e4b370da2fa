"""request_cancel and requeue: act on a job in the caller's transaction."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.job import Job, JobState

if TYPE_CHECKING:
    from akadze.app import Akadze


async def _connection(connection: AsyncConnection | AsyncSession) -> AsyncConnection:
    if isinstance(connection, AsyncSession):
        return await connection.connection()
    if isinstance(connection, AsyncConnection):
        return connection
    raise ConfigError(
        "connection must be a SQLAlchemy AsyncConnection or AsyncSession, "
        f"got {type(connection).__qualname__}"
    )


async def request_cancel(
    connection: AsyncConnection | AsyncSession, job_id: int, *, app: Akadze | None = None
) -> bool:
    """Cancel a job: a queued one ends cancelled now; a running one is marked, and ends
    cancelled unless its body returns normally (then it succeeds: its effects happened).

    Other states and missing ids change nothing. Returns whether anything changed.
    Pass ``app`` to run its on_transition hooks for a queued job cancelled here.
    """
    conn = await _connection(connection)
    changed = await Queries.request_cancel(conn, int(job_id))
    if changed is None:
        return False
    job, from_state = changed
    if app is not None and job.state is not from_state:
        await _transition(app, conn, job, from_state)
    return True


async def requeue(
    connection: AsyncConnection | AsyncSession, job_id: int, *, app: Akadze | None = None
) -> Job | None:
    """Move a failed job back to queued; attempt, errors and args are kept, and max_attempts
    grows when needed so the job runs at least once more. Returns the job, or None when it
    was not failed (or does not exist)."""
    conn = await _connection(connection)
    changed = await Queries.requeue(conn, int(job_id))
    if changed is None:
        return None
    job, from_state = changed
    if app is not None:
        await _transition(app, conn, job, from_state)
    return job


async def _transition(app: Akadze, conn: AsyncConnection, job: Job, from_state: JobState) -> None:
    for hook in app.hooks.on_transition:
        outcome = hook(conn, job, from_state, job.state)
        if inspect.isawaitable(outcome):
            await outcome
