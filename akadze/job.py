"""Job, the record of one unit of work, JobState, and the rule for the names of tasks, queues
and schedules (check_name)."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

import msgspec

from akadze.errors import ConfigError


class JobState(enum.StrEnum):
    """Where a job is: queued, running, or one of the finished states, which it never leaves
    unless requeued. The values are the ``state`` column's text."""

    #: waiting for its run_at; a worker may claim it
    QUEUED = "queued"
    #: claimed by a worker; its run counter fences every later write
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """True for succeeded, failed and cancelled (FINISHED_STATES)."""
        return self in _FINISHED

    @property
    def phrase(self) -> str:
        """The state as the verb of a sentence about a job: "is queued", "is running", "has
        succeeded", "has failed", "was cancelled" (``f"job 7 {state.phrase}"``)."""
        return _PHRASES[self]


#: the states a job ends in: the one list behind JobState.finished, the schema's partial
#: indexes (db/tables.py) and the state lists of the .sql files (tests/db/test_names.py)
FINISHED_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
_FINISHED = frozenset(FINISHED_STATES)
_PHRASES = {
    JobState.QUEUED: "is queued",
    JobState.RUNNING: "is running",
    JobState.SUCCEEDED: "has succeeded",
    JobState.FAILED: "has failed",
    JobState.CANCELLED: "was cancelled",
}


class JobError(msgspec.Struct, frozen=True, gc=False):
    """One entry of ``Job.errors``: a run's error, as the worker wrote it when the run ended.

    ``at`` is the database's clock at the write, as stored (ISO 8601 text); ``type`` is the
    exception's qualified class name (or an akadze ErrorType); ``message`` is cut past
    MAX_ERROR_MESSAGE characters, and a job keeps its MAX_ERRORS newest (akadze.db.queries.runs).
    """

    attempt: int
    at: str
    type: str
    message: str


class Job(msgspec.Struct, frozen=True, gc=False):
    """A job row as the database last returned it (immutable; a msgspec Struct: cheap to build).

    ``attempt`` counts spent attempts (0 before any run). ``run`` is the fencing counter: it
    grows by one at every claim, and a write from an older run changes nothing.
    ``args`` and ``result`` are the stored JSON; never log them.

    Not tracked by the garbage collector (``gc=False``): a batch enqueue returns a Job per row
    and a claim one per job, and tracked ones made the collector's young generations fill and
    promote, so full collections came sooner (docs/performance.md, "Enqueue"). A Job holds no
    reference back to anything that holds it, so it cannot be part of a cycle unless its
    ``args`` or ``result`` are made to hold the Job itself; such a cycle is never freed.
    """

    id: int
    task: str
    queue: str
    state: JobState
    priority: int
    args: dict[str, Any]
    attempt: int
    max_attempts: int
    run: int
    run_at: datetime
    expires_at: datetime | None
    cancel_requested: bool
    errors: tuple[JobError, ...]
    result: Any
    worker_id: str | None
    args_fp: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    #: enqueue returned this existing job instead of inserting a duplicate (its task's Unique)
    duplicate: bool = False
    #: the W3C trace context of the span that enqueued it (akadze.events.tracing); None when tracing was off
    trace_context: str | None = None
    #: the workflow this job is a step of (akadze.Workflow); None outside a workflow
    workflow_id: int | None = None
    #: the step's name in its workflow; None outside a workflow
    step: str | None = None

    def __repr__(self) -> str:
        # never the arguments or the result: they may hold secrets, and reprs end up in logs
        return (
            f"Job(id={self.id}, task={self.task!r}, queue={self.queue!r}, state={self.state.value!r}, "
            f"attempt={self.attempt}/{self.max_attempts}, run={self.run}, run_at={self.run_at!r})"
        )

    __str__ = __repr__


class JobRef(msgspec.Struct, frozen=True):
    """What names a job to a person, and the first fields (in this order) of every view of one
    a command or the dashboard shows: a listing's rows (JobSummary), ``jobs explain``'s answer."""

    id: int
    task: str
    queue: str
    state: JobState


#: longest task or queue name
MAX_NAME_LENGTH = 200


def check_name(kind: str, name: object) -> str:
    """``name`` if it may name a task, queue or schedule (``kind`` says which, for the message):
    a non-empty string of at most MAX_NAME_LENGTH characters without NUL; else ConfigError."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{kind} name must be a non-empty string, got {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if "\x00" in name:
        raise ConfigError(f"{kind} name {name!r} contains a NUL character")
    return name
