"""The events a worker publishes (claimed, ended, committed, cancelled at its claim), built and
handed to the events seam off the claim cycle's critical path.

A worker drains in cycles: a claim's reply, its runs, the next claim (which also writes their
outcomes), its reply. The worker waits for each reply; building and counting the events of a
cycle in between lengthened every cycle (metrics and tracing on: 0.86x the drain rate).
While the fetcher loops, a publication therefore waits for the next claim's round trip: the
fetcher schedules :meth:`Publisher.flush` as it sends the statement, and the flush runs while
the server works. When the fetcher waits instead, :meth:`Publisher.flush_soon` publishes two
turns of the loop on, after the runs just started and what their ends wake. Events come in
the order published, late by about one round trip, and never by more than MAX_DELAY_S (a
claim hung on a silent connection, a back-off: a timer flushes them); each carries the time
of the commit it reports (``Event.at``). Outside the fetcher's loop (a stopping worker) they
go out at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from akadze.events import Event, Kind, event_of
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion, ErrorType, Transition, Verdict

if TYPE_CHECKING:
    from akadze.events import Events

logger = logging.getLogger("akadze.events")

#: what the worker keeps of a running job for its events: when the run started
#: (time.monotonic()) and the job as claimed (its wait, from run_at to started_at)
Timing = tuple[float, Job]

#: a publication waits at most about this long for the fetcher's next flush (one timer per
#: interval while publications come, not one per publication)
MAX_DELAY_S = 0.05


class Publisher:
    """A worker's events, built and handed to the events seam off the claim cycle's critical
    path (the module's docstring says when). One per worker, used from its event loop only."""

    def __init__(self, events: Events, worker_id: str) -> None:
        self.events = events
        self.worker_id = worker_id
        #: True while the fetcher loops: publications wait for its flush()
        self.deferring = False
        self._pending: list[Callable[[], None]] = []
        #: a flush_soon() is scheduled
        self._soon = False
        #: the timer that publishes what waits past MAX_DELAY_S (a claim or a back-off that
        #: takes long: the fetcher reaches none of its flushes meanwhile)
        self._late: asyncio.TimerHandle | None = None

    def flush_soon(self) -> None:
        """Publish what waits two turns of the loop on: after what is ready now (the first
        steps of the runs a claim just started) and after what they wake at their end (the
        next claim, whose statement is then in flight as this runs)."""
        if self._pending and not self._soon:
            self._soon = True
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, self.flush)

    def flush(self) -> None:
        """Publish what waits, in order."""
        self._soon = False
        while self._pending:
            pending, self._pending = self._pending, []
            for publish in pending:
                _publish(publish)

    def _later(self, publish: Callable[[], None]) -> None:
        if not self.deferring:
            _publish(publish)
            return
        self._pending.append(publish)
        if self._late is None:
            self._late = asyncio.get_running_loop().call_later(MAX_DELAY_S, self._flush_late)

    def _flush_late(self) -> None:
        self._late = None
        self.flush()

    def claimed(self, jobs: Sequence[Job]) -> None:
        """A claim committed: CLAIMED for each job it started, CANCELLED for each it ended
        without a run (a cancel requested, or an expiry, before the claim)."""
        if self.events.active:
            self._later(functools.partial(self._claimed, jobs, time.time()))

    def ended(
        self,
        batch: Sequence[Completion],
        jobs: Sequence[Completed],
        timing: dict[tuple[int, int], Timing],
        *,
        errors_only: bool,
    ) -> None:
        """Outcomes were written: ENDED for each of ``jobs`` (as written), whose runs decided
        ``batch`` and started as ``timing`` says (their entries are taken out); ``errors_only``:
        only the runs that ended with an error (the transition log line's share below INFO)."""
        self._later(
            functools.partial(self._ended, batch, jobs, timing, errors_only, time.monotonic(), time.time())
        )

    def settled(self, steps: Sequence[Completed]) -> None:
        """Workflow steps that a write released (RELEASED) or cancelled because a step they
        waited for failed (CANCELLED, error type akadze.DependencyFailed)."""
        if self.events.active:
            self._later(functools.partial(self._settled, steps, time.time()))

    def _settled(self, steps: Sequence[Completed], at: float) -> None:
        event = self._event_at(at)
        released: list[Event] = []
        cancelled: list[Event] = []
        for step in steps:
            if step.state is JobState.QUEUED:
                released.append(event(Kind.RELEASED, step, JobState.QUEUED))
            else:
                failed = ErrorType.DEPENDENCY_FAILED
                cancelled.append(event(Kind.CANCELLED, step, JobState.QUEUED, error_type=failed))
        if released and self.events.wants(Kind.RELEASED):
            self.events.publish_all(Kind.RELEASED, released)
        if cancelled and self.events.wants(Kind.CANCELLED):
            self.events.publish_all(Kind.CANCELLED, cancelled)

    def committed(self, job: Job, timing: Timing | None) -> None:
        """A run's ``complete_tx()`` committed its job (succeeded)."""
        if self.events.active:
            self._later(functools.partial(self._committed, job, timing, time.monotonic(), time.time()))

    def _claimed(self, jobs: Sequence[Job], at: float) -> None:
        events, event = self.events, self._event_at(at)
        claims: list[Event] | None = [] if events.wants(Kind.CLAIMED) else None
        for job in jobs:
            if job.state is not JobState.RUNNING:
                events.publish(event(Kind.CANCELLED, job, JobState.QUEUED))
            elif claims is not None:  # only the wait histogram takes them
                claims.append(event(Kind.CLAIMED, job, JobState.QUEUED, wait_s=wait_of(job)))
        events.publish_all(Kind.CLAIMED, claims or ())

    def _ended(
        self,
        batch: Sequence[Completion],
        jobs: Sequence[Completed],
        timing: dict[tuple[int, int], Timing],
        errors_only: bool,
        now: float,
        at: float,
    ) -> None:
        # every run's timing is taken out first: an event that fails to build leaks none
        timings = [timing.pop((job.id, job.run), None) for job in jobs]
        decided = {(ended.job_id, ended.run): ended.transition for ended in batch}
        ended: list[Event] = []
        for job, started in zip(jobs, timings, strict=True):
            transition = decided[job.id, job.run]
            if errors_only and transition.error_type is None:
                continue
            if started is None:
                duration_s = wait_s = None
            else:
                duration_s, wait_s = now - started[0], wait_of(started[1])
            ended.append(end_event(job, transition, self.worker_id, duration_s, wait_s, at=at))
        self.events.publish_all(Kind.ENDED, ended)

    def _committed(self, job: Job, timing: Timing | None, now: float, at: float) -> None:
        committed = msgspec.structs.replace(job, state=JobState.SUCCEEDED)
        took, waited = (None, None) if timing is None else (now - timing[0], wait_of(timing[1]))
        event = self._event_at(at)(
            Kind.COMMITTED,
            committed,
            JobState.RUNNING,
            outcome=Verdict.SUCCEEDED,
            duration_s=took,
            wait_s=waited,
        )
        self.events.publish(event)

    def _event_at(self, at: float) -> functools.partial[Event]:
        """event_of for this worker's events committed at ``at``."""
        return functools.partial(event_of, worker_id=self.worker_id, at=at)


def end_event(
    job: Completed,
    decided: Transition,
    worker_id: str,
    duration_s: float | None,
    wait_s: float | None,
    *,
    at: float | None = None,
) -> Event:
    """The ENDED event of a run whose outcome ``decided`` was written as ``job``: a cancel
    request or an expiry applied at the write makes it cancelled, whatever the run decided."""
    outcome = decided.verdict
    if job.state is JobState.CANCELLED and outcome is not Verdict.LOST:
        outcome = Verdict.CANCELLED
    return event_of(
        Kind.ENDED,
        job,
        JobState.RUNNING,
        worker_id=worker_id,
        outcome=outcome,
        duration_s=duration_s,
        wait_s=wait_s,
        error_type=decided.error_type,
        error_message=decided.error_message,
        at=at,
    )


def _publish(publish: Callable[[], None]) -> None:
    """Build and publish: a failure loses those events only, never the loop or a transition."""
    try:
        publish()
    except Exception:
        logger.exception("the events of a committed transition could not be published (skipped)")


def wait_of(job: Job) -> float | None:
    """How long ``job`` waited to start: from its run_at to its claim (the database's clock)."""
    started = job.started_at
    return (started - job.run_at).total_seconds() if started is not None else None
