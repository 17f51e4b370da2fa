"""Rescues the running jobs of lost workers: an attempt is spent, the default backoff applies
(or failed when the budget is gone, cancelled when a cancel was requested)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db.queries import Orphan, Queries
from akadze.events import Kind, event_of
from akadze.hooks import transitions_written
from akadze.job import JobState
from akadze.outcomes import Completed, Completion, ErrorType, RunEnd, Verdict, decide

if TYPE_CHECKING:
    from akadze.hooks import TransitionHook
    from akadze.worker import Worker

logger = logging.getLogger("akadze.worker")


async def rescue_lost(
    engine: AsyncEngine,
    hooks: Sequence[TransitionHook] = (),
    *,
    limit: int = 500,
    settled: list[Completed] | None = None,
) -> list[Completed]:
    """One pass: forget workers whose heartbeat is past their horizon, then rescue orphans;
    the workflow steps the rescued runs' ends released or cancelled go to ``settled``.

    Rows a stalled run holds locked are skipped, never waited on; a later pass takes them.
    Arguments and results are never read: no row's content can fail a pass.
    """
    async with engine.begin() as conn:
        lost = await Queries.forget_lost_workers(conn)
        orphans = await Queries.find_orphans(conn, limit)
        if not orphans:
            return []
        ended = [
            Completion(
                job.id,
                job.run,
                decide(
                    RunEnd.WORKER_LOST,
                    attempt=job.attempt,
                    max_attempts=job.max_attempts,
                    error=_lost(job),
                ),
                None,
            )
            for job in orphans
        ]
        written, steps = await Queries.complete_batch(conn, ended)
        await transitions_written(hooks, conn, written, JobState.RUNNING)
    if settled is not None:
        settled.extend(steps)
    for job in written:
        logger.warning(
            "job_id=%d task=%s queue=%s rescued from lost worker %s: state=%s attempt=%d",
            job.id,
            job.task,
            job.queue,
            _worker_of(orphans, job.id),
            job.state.value,
            job.attempt,
        )
    if lost:
        logger.info("forgot %d lost workers", len(lost))
    return written


async def rescuer_service(worker: Worker) -> None:
    """The worker service that rescues: a pass every ``rescue_interval``, in burst runs too
    (a rescue is always safe to run); each rescued run is published as an event."""
    events = worker.app.events
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        try:
            async with asyncio.timeout(worker.lost_after_s):
                steps: list[Completed] = []
                rescued = await rescue_lost(worker.app.engine, worker.app.hooks.on_transition, settled=steps)
        except TimeoutError:
            logger.warning("%s", timed_out("rescue pass", worker.lost_after_s, loop.time() - started))
        except Exception as exc:
            logger.warning("rescue pass failed (%s)", type(exc).__name__)
        else:
            if rescued and events.active:
                for job in rescued:
                    lost = event_of(
                        Kind.RESCUED,
                        job,
                        JobState.RUNNING,
                        worker_id=worker.id,
                        outcome=Verdict.LOST,
                        error_type=ErrorType.WORKER_LOST,
                    )
                    events.publish(lost)
            if steps:
                worker.publisher.settled(steps)
        await asyncio.sleep(worker.rescue_interval_s)


def timed_out(what: str, timeout_s: float, elapsed_s: float) -> str:
    """The log line of ``what`` that timed out after ``timeout_s``, ``elapsed_s`` after it began.

    A deadline is a timer of the event loop: when a task blocks the loop (blocking code in an
    ``async def``: ``time.sleep``, a synchronous client, a long computation), the timer fires
    only once the loop runs again, late, and whatever was awaited meanwhile times out though
    its reply may have come long before. So a deadline that fired much later than it was due
    says the loop was held up, not the database (nor the network) slow."""
    late = elapsed_s - timeout_s
    if late > max(0.25, 0.1 * timeout_s):
        return (
            f"{what} timed out: the worker's event loop was held up about {late:.1f}s past the "
            f"{timeout_s:g}s deadline (a task blocking the loop: blocking code in an async def "
            "task, say time.sleep or a synchronous client; make the task sync, it then runs in a "
            "thread, or await asyncio.to_thread), not waiting for the database"
        )
    return f"{what} failed (TimeoutError: no reply from the database within {timeout_s:g}s)"


rescuer_service.in_burst = True  # type: ignore[attr-defined]  # read by Worker.run


class WorkerLost(Exception):
    """The error a rescued run is recorded with (``akadze.WorkerLost``, its message naming the lost
    worker). Never raised: decide() only reads its message."""


def _lost(job: Orphan) -> WorkerLost:
    return WorkerLost(f"worker {job.worker_id} running this job was lost; rescued")


def _worker_of(orphans: list[Orphan], job_id: int) -> str | None:
    return next((job.worker_id for job in orphans if job.id == job_id), None)
