"""The context of a run: current(), and complete_tx() to commit writes with the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.db.queries import Queries
from akadze.errors import LostOwnershipError, NotInRunError
from akadze.hooks import transitions_written
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion, Transition, Verdict

if TYPE_CHECKING:
    from akadze.app import Akadze

_current: contextvars.ContextVar[RunContext] = contextvars.ContextVar("akadze_run")


class RunContext:
    """One run of one job. ``job`` is the row as claimed (its ``run`` is the fencing token).

    Made once per run, on the worker's hot path: a plain class with slots."""

    __slots__ = ("app", "cancel_requested", "completed", "in_block", "job", "settled", "stopped_by_worker")

    def __init__(self, app: Akadze, job: Job) -> None:
        self.app = app
        self.job = job
        #: set once complete_tx() committed: the job as written, succeeded
        self.completed: Completed | None = None
        #: the workflow steps that complete_tx()'s commit released or cancelled (their events
        #: go out with the run's)
        self.settled: list[Completed] = []
        #: True once request_cancel marked this running job. The worker refreshes it for all
        #: its runs in one query per heartbeat interval. A task may stop early on it; the
        #: outcome rules still decide the job's end (raising Cancel, or any error, ends it
        #: cancelled).
        self.cancel_requested: bool = job.cancel_requested
        #: True while a complete_tx() block runs: a forced stop (Worker(cancel_grace=...))
        #: waits for the block to end, as a cancel never cuts a block
        self.in_block = False
        #: True once the worker stopped this run past its cancel grace: the run ends cancelled
        self.stopped_by_worker = False

    def __repr__(self) -> str:
        return f"RunContext(job_id={self.job.id}, task={self.job.task!r}, run={self.job.run})"

    async def dependency_results(self) -> dict[str, Any]:
        """The results of the steps this workflow step waits for (its ``after``), by step
        name, as JSON: ``None`` for a step that returned nothing. A step that did not succeed
        (a step with ``after_failure="run"`` runs after those too) is absent. Empty outside a
        workflow or for a step that waits for none. One query each call.
        """
        if self.job.workflow_id is None:
            return {}
        gate = _gates.get(id(self.app))
        async with gate or contextlib.nullcontext(), self.app.engine.connect() as conn:
            return await Queries.dependency_results(conn, self.job.id)

    @asynccontextmanager
    async def complete_tx(self) -> AsyncIterator[AsyncConnection]:
        """A connection whose transaction also moves this job to succeeded.

        Your writes and the outcome commit together or not at all. If this run no longer owns
        the job (another worker rescued it), the block raises LostOwnershipError and your
        writes roll back. An error inside the block rolls back and counts as the run's error.
        A cancel or expiry that arrives meanwhile does not stop the block.
        """
        if self.completed is not None:
            raise RuntimeError(f"job {self.job.id}: complete_tx() already committed this run")
        job = self.job
        gate = _gates.get(id(self.app))
        async with gate or contextlib.nullcontext(), self.app.engine.connect() as conn:
            self.in_block = True
            try:
                async with conn.begin():
                    yield conn
                    ended = Completion(
                        job.id,
                        job.run,
                        Transition(
                            JobState.SUCCEEDED,
                            job.attempt,
                            None,
                            cancellable=False,
                            verdict=Verdict.SUCCEEDED,
                        ),
                        result=None,
                        plain=job.workflow_id is None,
                    )
                    written, settled = await Queries.complete_batch(conn, [ended])
                    if not written:
                        raise LostOwnershipError(job.id, job.run)
                    await transitions_written(self.app.hooks.on_transition, conn, written, JobState.RUNNING)
                self.completed, self.settled = written[0], settled
            finally:
                self.in_block = False


def current() -> RunContext:
    """The context of the run this code is part of; NotInRunError outside a run."""
    try:
        return _current.get()
    except LookupError:
        raise NotInRunError() from None


#: Worker(db_slots=N): at most N complete_tx blocks of the app's runs hold a connection at once
_gates: dict[int, asyncio.Semaphore] = {}


def gate_connections(app: Akadze, db_slots: int | None) -> None:
    """Let at most ``db_slots`` complete_tx blocks of ``app`` hold a connection at once (None:
    no limit); a block past the limit waits for a turn before it takes one."""
    if db_slots is None:
        _gates.pop(id(app), None)
    else:
        _gates[id(app)] = asyncio.Semaphore(db_slots)


#: the runs of this process, by (id(app), job id): where cancel requests are marked
_runs: dict[tuple[int, int], RunContext] = {}


def enter(ctx: RunContext) -> contextvars.Token[RunContext]:
    """Make ``ctx`` the current run and let cancel requests mark it; pair with leave()."""
    _runs[id(ctx.app), ctx.job.id] = ctx
    return _current.set(ctx)


def leave(token: contextvars.Token[RunContext]) -> None:
    """End what enter() began: cancel requests no longer reach the run (unless a later run of
    the same job took its place), and ``current()`` is what it was before."""
    ctx = _current.get()
    key = id(ctx.app), ctx.job.id
    if _runs.get(key) is ctx:
        del _runs[key]
    _current.reset(token)


def run_of(app: Akadze, job_id: int) -> RunContext | None:
    """The run of ``app``'s job ``job_id`` in progress in this process, if any."""
    return _runs.get((id(app), job_id))


def has_runs(app: Akadze) -> bool:
    """Whether a run of ``app`` is in progress in this process (if not, no cancel to read)."""
    return any(ctx.app is app for ctx in _runs.values())


def mark_cancel_requested(app: Akadze, job_ids: Iterable[int]) -> None:
    """Set cancel_requested on the runs of ``app`` among ``job_ids`` (the worker's refresh)."""
    for job_id in job_ids:
        ctx = _runs.get((id(app), job_id))
        if ctx is not None:
            ctx.cancel_requested = True
