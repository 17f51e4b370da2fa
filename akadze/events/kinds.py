"""What an event is (Kind, Event, event_of), and what a subscription takes of them (Need, the
filter has_error, and the types of subscribers, tallies, filters and interest checks)."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from typing import TypeAlias

import msgspec

from akadze.job import Job, JobState
from akadze.outcomes import Completed, Verdict


class Kind(enum.StrEnum):
    """Which transition an event reports."""

    #: queued -> running: a worker claimed the job and its run starts (``wait_s`` is set)
    CLAIMED = "claimed"
    #: running -> any: a run's outcome was written (``outcome`` says how the run ended)
    ENDED = "ended"
    #: running -> succeeded by ``complete_tx()``, published when the run ends
    COMMITTED = "committed"
    #: running -> queued/failed/cancelled: a worker rescued the run of a lost worker
    RESCUED = "rescued"
    #: queued -> cancelled without a run (cancel requested, or expired, before a claim)
    CANCELLED = "cancelled"
    #: failed or cancelled -> queued by ``requeue(..., app=app)``
    REQUEUED = "requeued"
    #: a schedule's fire time enqueued this job (``from_state`` is None)
    FIRED = "fired"
    #: queued -> queued: a workflow step's last parent ended, and it may be claimed now (a step
    #: a parent's failure cancels is CANCELLED, with ``error_type`` akadze.DependencyFailed)
    RELEASED = "released"


class Event(msgspec.Struct, frozen=True, gc=False):
    """One committed transition of one job. Immutable; never holds arguments or results.

    Durations are seconds as floats: ``duration_s`` on the publishing worker's monotonic
    clock (claim to outcome), ``wait_s`` on the database's clock (from ``run_at`` to the
    claim). Both are None where they do not apply.
    """

    kind: Kind
    job_id: int
    task: str
    queue: str
    #: None when the transition created the job (a schedule fire)
    from_state: JobState | None
    to_state: JobState
    #: the attempt counter after the transition
    attempt: int
    #: the fencing counter of the run this transition started or ended (0 before any claim)
    run: int
    #: how the run ended (ENDED, COMMITTED and RESCUED events); None otherwise
    outcome: Verdict | None = None
    duration_s: float | None = None
    wait_s: float | None = None
    #: the type of the run's error entry: a qualified class name or an ErrorType value
    error_type: str | None = None
    #: the worker that published the event (None outside a worker)
    worker_id: str | None = None
    #: wall-clock time of the transition's commit (time.time(), taken just after it)
    at: float = msgspec.field(default_factory=time.time)
    #: the message of the run's error entry, as stored on the job (the task's own words:
    #: never arguments, unless the task put them in its exception)
    error_message: str | None = None


#: a subscriber: a plain function of one event, run on the events thread
Subscriber: TypeAlias = Callable[[Event], None]
#: a tally: a plain function of the events of one publication, run in the publishing thread
Tally: TypeAlias = Callable[[Sequence[Event]], None]
#: a subscriber's filter, run in the publishing thread: whether it takes the event
Accept: TypeAlias = Callable[[Event], bool]


class Need(enum.IntEnum):
    """What a subscriber takes of the events of one kind now, or what all of them take: the
    publisher builds only that much."""

    #: none: build nothing
    NOTHING = 0
    #: only the ends of runs with an error (every subscriber that takes some accepts with
    #: :func:`has_error`): build only those
    ERRORS = 1
    #: those its filter accepts (build them, the filter decides)
    SOME = 2
    #: all of them
    ALL = 3


#: a subscriber's own check of what it takes now (a logger's level, whether tracing is on),
#: called at every publication: it must be cheap
Interest: TypeAlias = Callable[[], Need]


def has_error(event: Event) -> bool:
    """A filter: the events whose run ended with an error (the publisher builds only those
    when no subscriber takes more)."""
    return event.error_type is not None


def event_of(
    kind: Kind,
    job: Job | Completed,
    from_state: JobState | None,
    *,
    worker_id: str | None = None,
    outcome: Verdict | None = None,
    duration_s: float | None = None,
    wait_s: float | None = None,
    error_type: str | None = None,
    error_message: str | None = None,
    at: float | None = None,
) -> Event:
    """The event of ``job``'s transition from ``from_state`` to its state now; ``at``: when
    it committed (time.time(), now when None)."""
    return Event(
        kind,
        job.id,
        job.task,
        job.queue,
        from_state,
        job.state,
        job.attempt,
        job.run,
        outcome,
        duration_s,
        wait_s,
        error_type,
        worker_id,
        time.time() if at is None else at,
        error_message,
    )
