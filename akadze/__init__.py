"""akadze: a code-first task queue for Python asyncio services on PostgreSQL."""

import importlib.metadata as _metadata

from akadze.app import Akadze
from akadze.backoff import BackoffPolicy
from akadze.context import current
from akadze.control import request_cancel, requeue
from akadze.errors import JobCancelledError, JobFailedError, ResultNotJson
from akadze.flow import Limit, Unique
from akadze.job import Job, JobState
from akadze.outcomes import Cancel, Fail, Retry, Snooze
from akadze.task import Task

try:
    __version__ = _metadata.version("akadze")
except _metadata.PackageNotFoundError:  # pragma: no cover (running from a source tree)
    __version__ = "0.0.0"

__all__ = [
    "Akadze",
    "BackoffPolicy",
    "Cancel",
    "Fail",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "JobState",
    "Limit",
    "ResultNotJson",
    "Retry",
    "Snooze",
    "Task",
    "Unique",
    "current",
    "request_cancel",
    "requeue",
]
