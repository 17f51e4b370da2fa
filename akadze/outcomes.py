"""What a run's outcome does to its job. Pure: no IO, no clock reads.

| outcome of a run                          | attempt spent | next                                   |
|-------------------------------------------|---------------|----------------------------------------|
| returns a JSON value (or nothing)         | -             | succeeded                              |
| returns a value that is not JSON          | yes           | retried after backoff (ResultNotJson)  |
| raises any exception                      | yes           | retried after backoff                  |
| exceeds its timeout                       | yes           | retried after backoff                  |
| raise Retry(delay)                        | yes           | retried after delay                    |
| raise Snooze(delay)                       | no            | runs again after delay                 |
| raise Fail("reason")                      | yes           | failed now                             |
| raise Cancel()                            | -             | cancelled now                          |
| worker lost, rescued by another           | yes           | retried after the default backoff      |
| graceful worker shutdown                  | no            | back to queued                         |
| arguments undecodable (UNDECODABLE): too  | yes           | failed now, without running            |
| deep, not an object, another schema       |               | (UndecodableJobError / ArgsSchema...)  |

"Retried" means failed instead when the attempt budget is spent. The attempt is counted at
claim, so "not spent" gives it back. When a cancel was requested, or the job expired, while
it ran, every outcome but success ends cancelled and gives the attempt back; a transition
carries ``cancellable`` and the database applies that rule at write time.

The end of one run goes by four types, in the order the pipeline meets them:

- RunEnd: how the body ended as the executor saw it (returned, raised, ...); decide()'s input.
- Transition: what decide() makes of it: the job's next state, attempt, delay and error entry,
  and its Verdict (the one-word outcome of events and metrics).
- Completion: one run's Transition addressed to that run (job id and run, the fencing token)
  with the encoded result: what the completer batches and complete_batch writes.
- Completed: what the write changed for a job (fenced-out runs are absent).
"""

from __future__ import annotations

import enum
import random
from datetime import datetime, timedelta

import msgspec

from akadze.backoff import BackoffPolicy, default_backoff, policy_delay
from akadze.errors import ResultNotJson
from akadze.job import JobState

__all__ = [
    "Cancel",
    "Completed",
    "Completion",
    "ErrorType",
    "Fail",
    "Outcome",
    "ResultNotJson",
    "Retry",
    "RunEnd",
    "Snooze",
    "Transition",
    "Verdict",
    "decide",
]


class ErrorType(enum.StrEnum):
    """The ``type`` of the error entries akadze writes itself (a task's own errors carry their
    qualified class name)."""

    RETRY = "akadze.Retry"
    FAIL = "akadze.Fail"
    CANCEL = "akadze.Cancel"
    WORKER_LOST = "akadze.WorkerLost"
    #: the run's outcome could not be written; the job was failed with this instead
    OUTCOME_NOT_RECORDED = "akadze.OutcomeNotRecorded"
    #: a workflow step cancelled because a step it waits for ended failed or cancelled
    #: (written by the statements that end its parents: db/sql, docs/workflows.md)
    DEPENDENCY_FAILED = "akadze.DependencyFailed"


class Outcome(Exception):
    """Base of the instructions a task raises; deliberately not an AkadzeError."""


class Retry(Outcome):
    """Spend an attempt and run again after ``delay`` (not clamped; wins over the policy).

    When the attempt budget is spent, the job ends failed.
    """

    def __init__(self, delay: timedelta = timedelta(0), reason: str = "") -> None:
        if not isinstance(delay, timedelta):
            raise TypeError("Retry(delay) takes a timedelta")
        self.delay = delay
        self.reason = reason
        super().__init__(reason or f"retry after {delay}")


class Snooze(Outcome):
    """Run again after ``delay`` without spending an attempt; the job keeps its errors."""

    def __init__(self, delay: timedelta) -> None:
        if not isinstance(delay, timedelta):
            raise TypeError("Snooze(delay) takes a timedelta")
        if delay < timedelta(0):
            raise ValueError("Snooze(delay) takes a delay of zero or more")
        self.delay = delay
        super().__init__(f"snooze for {delay}")


class Fail(Outcome):
    """Spend the attempt and end the job failed now, whatever budget is left."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason)


class Cancel(Outcome):
    """End the job cancelled now."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason)


class RunEnd(enum.Enum):
    """How a run ended, as the executor saw it."""

    RETURNED = "returned"
    RAISED = "raised"
    WORKER_LOST = "worker_lost"
    SHUTDOWN = "shutdown"
    UNDECODABLE = "undecodable"


class Verdict(enum.StrEnum):
    """How a run ended for its job, in one word: the ``outcome`` of events and metrics."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: an attempt was spent and the job waits for its next one
    RETRIED = "retried"
    #: Snooze: the job waits without spending an attempt
    SNOOZED = "snoozed"
    #: the run's worker was lost and another worker's rescue ended the run
    LOST = "lost"
    #: a graceful shutdown put the job back, attempt given back
    RELEASED = "released"


class Transition(msgspec.Struct, frozen=True):
    """The job's next state, as decide() makes it of how a run ended."""

    state: JobState
    #: the attempt counter after this run (claim already counted the run)
    attempt: int
    #: for state QUEUED: seconds from the database's now() to the next run_at
    delay_s: float | None
    #: the error entry to append, or None
    error_type: str | None = None
    error_message: str | None = None
    #: a cancel request or expiry seen at write time turns this into cancelled, attempt refunded
    cancellable: bool = True
    #: how the run ended, for events; a cancel applied at write time makes it CANCELLED
    verdict: Verdict = Verdict.RETRIED
    #: the job's priority from now on (a retry of a task with ``retry_priority``), or None: kept
    priority: int | None = None


class Completion(msgspec.Struct, frozen=True):
    """One run's Transition, addressed to the run (its fencing token) with the encoded result.

    What the completer batches and complete_batch writes; ``committed`` when complete_tx
    already wrote it (only the result is left to store). The error entry's ``at`` is the
    database's clock at write time."""

    job_id: int
    run: int
    transition: Transition
    result: str | None
    #: complete_tx committed the transition already; ``result`` is left to store
    committed: bool = False
    #: the workflow steps complete_tx's commit released or cancelled (their events)
    settled: tuple[Completed, ...] = ()
    #: the job is no workflow step (its Job says so): its write has no step to settle, and a
    #: batch of such outcomes is written by a plain form of the claim (claim_completing_plain.sql).
    #: False when unknown: the write then settles whatever steps it ends
    plain: bool = False


class Completed(msgspec.Struct, frozen=True):
    """What a write changed for one job (a fenced-out run is absent): its new state,
    attempt and run_at, for the events and the wake-ups."""

    id: int
    task: str
    queue: str
    state: JobState
    attempt: int
    run: int
    run_at: datetime


def _qualified(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def decide(
    end: RunEnd,
    *,
    attempt: int,
    max_attempts: int,
    error: BaseException | None = None,
    policy: BackoffPolicy | None = None,
    rng: random.Random | None = None,
    retry_priority: int | None = None,
) -> Transition:
    """Turn how a run ended into the job's next state, per the table in this module's docstring.

    Args:
        end: how the run ended.
        attempt: the job's attempt counter during the run (the claim counted this run).
        max_attempts: the job's budget.
        error: the exception, for RAISED / WORKER_LOST / UNDECODABLE.
        policy: the task's backoff policy (ignored for WORKER_LOST: rescues use the default).
        retry_priority: the task's ``retry_priority``: a job retried after an error (RAISED,
            Retry included) takes this priority; None keeps the job's own.
    """
    if end is RunEnd.RETURNED:
        return Transition(JobState.SUCCEEDED, attempt, None, cancellable=False, verdict=Verdict.SUCCEEDED)
    if end is RunEnd.SHUTDOWN:
        return Transition(JobState.QUEUED, max(attempt - 1, 0), 0.0, verdict=Verdict.RELEASED)
    if end is RunEnd.UNDECODABLE:
        assert error is not None
        return Transition(
            JobState.FAILED, attempt, None, _qualified(error), str(error), verdict=Verdict.FAILED
        )
    if end is RunEnd.WORKER_LOST:
        message = str(error) if error else "the worker running this job was lost"
        lost = _spend(attempt, max_attempts, default_backoff(attempt, rng), ErrorType.WORKER_LOST, message)
        return msgspec.structs.replace(lost, verdict=Verdict.LOST)
    assert error is not None
    if isinstance(error, Snooze):
        return Transition(
            JobState.QUEUED, max(attempt - 1, 0), error.delay.total_seconds(), verdict=Verdict.SNOOZED
        )
    if isinstance(error, Cancel):
        reason = error.reason or None
        error_type = ErrorType.CANCEL if reason else None
        return Transition(JobState.CANCELLED, attempt, None, error_type, reason, verdict=Verdict.CANCELLED)
    if isinstance(error, Fail):
        return Transition(
            JobState.FAILED, attempt, None, ErrorType.FAIL, error.reason, verdict=Verdict.FAILED
        )
    if isinstance(error, Retry):
        spent = _spend(attempt, max_attempts, error.delay, ErrorType.RETRY, str(error))
    else:
        delay = policy_delay(policy, attempt, rng)
        spent = _spend(attempt, max_attempts, delay, _qualified(error), str(error) or type(error).__name__)
    if retry_priority is not None and spent.state is JobState.QUEUED:
        return msgspec.structs.replace(spent, priority=retry_priority)
    return spent


def _spend(attempt: int, max_attempts: int, delay: timedelta, error_type: str, message: str) -> Transition:
    if attempt >= max_attempts:
        return Transition(JobState.FAILED, attempt, None, error_type, message, verdict=Verdict.FAILED)
    return Transition(JobState.QUEUED, attempt, delay.total_seconds(), error_type, message)
