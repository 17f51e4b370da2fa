"""request_cancel and requeue: act on a job in the caller's transaction."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import sqlalchemy.event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from akadze import hooks
from akadze.db.errors import violates
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.events import Event, Kind
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
    Pass ``app`` to run its on_transition hooks for a queued job cancelled here, and to
    publish the transition to its events subscribers once your transaction commits.
    """
    conn = await _connection(connection)
    changed = await Queries.request_cancel(conn, int(job_id))
    if changed is None:
        return False
    job, from_state = changed
    if app is not None and job.state is not from_state:
        await _transition(app, conn, job, from_state, Kind.CANCELLED)
    return True


async def requeue(
    connection: AsyncConnection | AsyncSession, job_id: int, *, app: Akadze | None = None
) -> Job | None:
    """Move a failed or cancelled job back to queued, to run now; attempt, errors and args are
    kept, and max_attempts grows when needed so the job runs at least once more. A cancelled
    job's cancel request and an expiry already past are dropped. Returns the job, or None when
    it was neither failed nor cancelled (or does not exist, or is a workflow step cancelled
    while it waited for its parents). Raises UniqueConflictError when a newer job holds its
    unique key. With ``app``, its on_transition hooks run here and its events subscribers hear
    of it once your transaction commits. A workflow step takes back the steps after it that
    its end had cancelled: they wait for it again (docs/workflows.md)."""
    conn = await _connection(connection)
    changed = await _requeued(conn, int(job_id))
    if changed is None:
        return None
    job, from_state = changed
    if app is not None:
        await _transition(app, conn, job, from_state, Kind.REQUEUED)
    if job.workflow_id is not None:
        # the steps its end had cancelled wait for it again (docs/workflows.md)
        from akadze.control.steps import repark_dependents

        for step, step_from in await repark_dependents(conn, job):
            if app is not None:
                await _transition(app, conn, step, step_from, Kind.REQUEUED)
    return job


#: a requeue meets a newly committed holder of its key at most this many times in a row
_REQUEUE_ROUNDS = 3


async def _requeued(conn: AsyncConnection, job_id: int) -> tuple[Job, JobState] | None:
    """requeue.sql in a savepoint of the caller's transaction. A job with the same unique key
    committed while the statement ran is invisible to its snapshot, so the UPDATE fails on the
    unique index instead of naming the holder: the savepoint rolls back (the caller's
    transaction stays usable) and the statement runs again, which now sees the holder and
    raises UniqueConflictError (or requeues, if the holder left its blocking states since).
    A workflow step's requeue refused (WorkflowError) rolls its savepoint back too."""
    for _ in range(_REQUEUE_ROUNDS - 1):
        try:
            async with conn.begin_nested():
                return await _requeue_once(conn, job_id)
        except IntegrityError as exc:
            if not violates(exc, "akadze_jobs_unique_idx"):
                raise
    async with conn.begin_nested():
        return await _requeue_once(conn, job_id)


async def _requeue_once(conn: AsyncConnection, job_id: int) -> tuple[Job, JobState] | None:
    """requeue.sql; a workflow step only in a READ COMMITTED transaction (else WorkflowError,
    and the savepoint takes the requeue back: akadze.control.steps.read_committed)."""
    changed = await Queries.requeue(conn, job_id)
    if changed is not None and changed[0].workflow_id is not None:
        from akadze.control.steps import read_committed

        await read_committed(conn, changed[0])
    return changed


async def _transition(app: Akadze, conn: AsyncConnection, job: Job, from_state: JobState, kind: Kind) -> None:
    await hooks.transition(app.hooks.on_transition, conn, job, from_state)
    if app.events.active:
        _publish_on_commit(
            app, conn, Event(kind, job.id, job.task, job.queue, from_state, job.state, job.attempt, job.run)
        )


def _publish_on_commit(app: Akadze, conn: AsyncConnection, event: Event) -> None:
    """Publish ``event`` when the caller's transaction commits (as its COMMIT is sent), never
    when it rolls back; at once on a connection in autocommit."""
    sync = conn.sync_connection
    if sync is None or not sync.in_transaction():
        app.events.publish(event)
        return
    pending = _pending.get(sync)
    if pending is None:
        pending = _pending[sync] = []
        sqlalchemy.event.listen(sync, "commit", _committed)
        sqlalchemy.event.listen(sync, "rollback", _rolled_back)
    pending.append((app, event))


#: per connection, the events its open transaction will publish when it commits
_pending: weakref.WeakKeyDictionary[Connection, list[tuple[Akadze, Event]]] = weakref.WeakKeyDictionary()


def _committed(conn: Connection) -> None:
    for app, event in _pending.get(conn, ()):
        app.events.publish(event)
    _pending[conn] = []


def _rolled_back(conn: Connection) -> None:
    _pending[conn] = []
