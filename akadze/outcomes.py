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

"Retried" means failed instead when the attempt budget is spent. The attempt is counted at
claim, so "not spent" gives it back. When a cancel was requested, or the job expired, while
it ran, every outcome but success ends cancelled and gives the attempt back; a completion
carries ``cancellable`` and the database applies that rule at write time.
"""

from __future__ import annotations

import enum
import random
from datetime import timedelta

import msgspec

from akadze.backoff import BackoffPolicy, default_backoff, policy_delay
from akadze.errors import ResultNotJson
from akadze.job import JobState

__all__ = [
    "Cancel",
    "Completion",
    "Fail",
    "Outcome",
    "ResultNotJson",
    "Retry",
    "RunEnd",
    "Snooze",
    "decide",
]


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


class Completion(msgspec.Struct, frozen=True):
    """The write that ends a run; applied only while ``(id, run)`` still owns the job."""

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
) -> Completion:
    """Turn how a run ended into the job's next state, per the table in this module's docstring.

    Args:
        end: how the run ended.
        attempt: the job's attempt counter during the run (the claim counted this run).
        max_attempts: the job's budget.
        error: the exception, for RAISED / WORKER_LOST / UNDECODABLE.
        policy: the task's backoff policy (ignored for WORKER_LOST: rescues use the default).
    """
    if end is RunEnd.RETURNED:
        return Completion(JobState.SUCCEEDED, attempt, None, cancellable=False)
    if end is RunEnd.SHUTDOWN:
        return Completion(JobState.QUEUED, max(attempt - 1, 0), 0.0)
    if end is RunEnd.UNDECODABLE:
        assert error is not None
        return Completion(JobState.FAILED, attempt, None, _qualified(error), str(error))
    if end is RunEnd.WORKER_LOST:
        message = str(error) if error else "the worker running this job was lost"
        return _spend(attempt, max_attempts, default_backoff(attempt, rng), "akadze.WorkerLost", message)
    assert error is not None
    if isinstance(error, Snooze):
        return Completion(JobState.QUEUED, max(attempt - 1, 0), error.delay.total_seconds())
    if isinstance(error, Cancel):
        reason = error.reason or None
        return Completion(JobState.CANCELLED, attempt, None, "akadze.Cancel" if reason else None, reason)
    if isinstance(error, Fail):
        return Completion(JobState.FAILED, attempt, None, "akadze.Fail", error.reason)
    if isinstance(error, Retry):
        return _spend(attempt, max_attempts, error.delay, "akadze.Retry", str(error))
    delay = policy_delay(policy, attempt, rng)
    return _spend(attempt, max_attempts, delay, _qualified(error), str(error) or type(error).__name__)


def _spend(attempt: int, max_attempts: int, delay: timedelta, error_type: str, message: str) -> Completion:
    if attempt >= max_attempts:
        return Completion(JobState.FAILED, attempt, None, error_type, message)
    return Completion(JobState.QUEUED, attempt, delay.total_seconds(), error_type, message)
