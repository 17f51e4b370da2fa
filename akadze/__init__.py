"""akadze: a code-first task queue for Python asyncio services on PostgreSQL.

The fixed public names are loaded on first use (PEP 562), not with the package: every
``akadze.*`` import runs this file first, and the command line's ``--version`` and help pages
must not pay for SQLAlchemy, asyncpg and pydantic (tests/cli/test_cli_startup.py). Type
checkers see the plain imports below.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.backoff import BackoffPolicy
    from akadze.context import current
    from akadze.control import request_cancel, requeue
    from akadze.errors import DependencyFailed, JobCancelledError, JobFailedError, ResultNotJson
    from akadze.flow import Limit, Unique
    from akadze.job import Job, JobState
    from akadze.outcomes import Cancel, Fail, Retry, Snooze
    from akadze.task import Task
    from akadze.workflow import Workflow, cancel_workflow

    __version__: str

#: each public name and the module that defines it
_SOURCES = {
    "Akadze": "akadze.app",
    "BackoffPolicy": "akadze.backoff",
    "Cancel": "akadze.outcomes",
    "DependencyFailed": "akadze.errors",
    "Fail": "akadze.outcomes",
    "Job": "akadze.job",
    "JobCancelledError": "akadze.errors",
    "JobFailedError": "akadze.errors",
    "JobState": "akadze.job",
    "Limit": "akadze.flow",
    "ResultNotJson": "akadze.errors",
    "Retry": "akadze.outcomes",
    "Snooze": "akadze.outcomes",
    "Task": "akadze.task",
    "Unique": "akadze.flow",
    "Workflow": "akadze.workflow",
    "cancel_workflow": "akadze.workflow",
    "current": "akadze.context",
    "request_cancel": "akadze.control",
    "requeue": "akadze.control",
}

__all__ = [
    "Akadze",
    "BackoffPolicy",
    "Cancel",
    "DependencyFailed",
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
    "Workflow",
    "cancel_workflow",
    "current",
    "request_cancel",
    "requeue",
]


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("akadze")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover (running from a source tree)
        return "0.0.0"


if not _typing.TYPE_CHECKING:  # a module __getattr__ would hide misspelt names from type checkers

    def __getattr__(name: str) -> _typing.Any:
        if name == "__version__":
            value = _version()
        elif name in _SOURCES:
            value = getattr(_importlib.import_module(_SOURCES[name]), name)
        else:
            raise AttributeError(f"module 'akadze' has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__, "__version__"})
