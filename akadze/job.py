"""Job, the record of one unit of work, and JobState."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class JobState(enum.StrEnum):
    #: waiting for its run_at; a worker may claim it
    QUEUED = "queued"
    #: claimed by a worker; its run counter fences every later write
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in _FINISHED


_FINISHED = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


@dataclass(frozen=True, slots=True)
class JobError:
    attempt: int
    at: str
    type: str
    message: str


@dataclass(frozen=True, slots=True)
class Job:
    """A job row as the database last returned it.

    ``attempt`` counts spent attempts (0 before any run). ``run`` is the fencing counter: it
    grows by one at every claim, and a write from an older run changes nothing.
    ``args`` and ``result`` are the stored JSON; never log them.
    """

    id: int
    task: str
    queue: str
    state: JobState
    priority: int
    args: dict[str, Any] = field(repr=False)
    attempt: int
    max_attempts: int
    run: int
    run_at: datetime
    expires_at: datetime | None
    cancel_requested: bool
    errors: tuple[JobError, ...]
    result: Any = field(repr=False)
    worker_id: str | None
    args_fp: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
