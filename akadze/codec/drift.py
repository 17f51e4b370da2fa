"""Argument-schema drift: a job built against another version of a task's signature.

Every job records ``args_fp``, the fingerprint (:func:`akadze.codec.schema_fingerprint`) of the
argument schema its producer built it against: the worker's own for ``task.enqueue``, the
generated client's for ``akadze codegen`` clients. The executor decodes the arguments, then
asks :func:`check_drift` what to do. Pure, apart from the "log once" memory it is given.

| fingerprints | decodes | verdict                                                          |
|--------------|---------|------------------------------------------------------------------|
| equal / none | yes     | run                                                              |
| equal / none | no      | not drift, but no retry can help: fail without retries,          |
|              |         | ArgsRefusedError naming the fields (a validator the producer's   |
|              |         | client cannot run refused them)                                  |
| differ       | yes     | run; log a warning once per (task, job fingerprint); count it    |
| differ       | no      | fail without retries: ArgsSchemaMismatch names both fingerprints |
|              |         | and the fields; log a warning once per (task, both fingerprints) |

Arguments the task does not declare (a producer newer than the worker) do not decode under
the task's default ``unknown_args="forbid"``: with differing fingerprints that is the last row,
and the message says how to let such jobs run. Under ``"ignore"`` the executor drops them
before decoding (:meth:`akadze.codec.ArgsCodec.split_unknown`) and passes their names here:
the job runs, and the warning, once per (task, job fingerprint), names them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import pydantic

from akadze.errors import ArgsRefusedError, ArgsSchemaMismatch, UnrunnableArgsError

_Key = TypeVar("_Key", bound=tuple[str, ...])

__all__ = [
    "ArgsRefusedError",
    "ArgsSchemaMismatch",
    "DriftLog",
    "DriftVerdict",
    "UnrunnableArgsError",
    "check_drift",
    "describe",
]


@dataclass(frozen=True, slots=True)
class DriftVerdict:
    """What check_drift decided for one job: whether to run it, what to log once, and the error
    that fails it without retries when its arguments can never decode."""

    #: the job's fingerprint is set and differs from the worker's
    drifted: bool
    #: the arguments decoded: run the job
    run: bool
    #: log this at WARNING (only the first time for a task and job fingerprint)
    warning: str | None = None
    #: fail the job with this, without retries
    error: UnrunnableArgsError | None = None


class DriftLog:
    """Which (task, job fingerprint) pairs were seen, and how many jobs each: the
    stale-producer count. Thread-safe; at most ``limit`` pairs are remembered."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.counts: dict[tuple[str, str], int] = {}
        #: (task, job fingerprint, worker fingerprint) of jobs that failed on a mismatch
        self.mismatches: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()

    def note(self, task_name: str, job_fp: str) -> bool:
        """Count one job; True the first time this pair is seen (log it then)."""
        return self._count(self.counts, (task_name, job_fp))

    def note_mismatch(self, task_name: str, job_fp: str, worker_fp: str) -> bool:
        """Count one job that failed on a schema mismatch; True the first time for this task
        and pair of fingerprints (log it then)."""
        return self._count(self.mismatches, (task_name, job_fp, worker_fp))

    def _count(self, table: dict[_Key, int], key: _Key) -> bool:
        """One more for ``key``; True the first time. A table at ``limit`` keys counts only
        the keys it has."""
        with self._lock:
            seen = table.get(key)
            if seen is None and len(table) >= self.limit:
                return False
            table[key] = (seen or 0) + 1
            return seen is None


#: the process-wide memory the executor uses unless it passes its own
DEFAULT_LOG = DriftLog()


def describe(error: pydantic.ValidationError) -> tuple[list[str], str]:
    """(the failing fields, "field: problem; ...") without the values, which may be secrets."""
    fields: list[str] = []
    parts: list[str] = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        fields.append(where)
        parts.append(f"{where}: {item['msg']}")
    return fields, "; ".join(parts)


def check_drift(
    task_name: str,
    worker_fp: str,
    job_fp: str | None,
    error: pydantic.ValidationError | None,
    *,
    ignored: Sequence[str] = (),
    log: DriftLog = DEFAULT_LOG,
) -> DriftVerdict:
    """Decide what a job's fingerprint and its decode result mean (the table above).

    ``error`` is what decoding the stored arguments with the worker's codec raised, or None;
    ``ignored`` the stored arguments the task does not declare, dropped before decoding
    (``unknown_args="ignore"``).
    """
    drifted = bool(job_fp) and job_fp != worker_fp
    if error is not None:
        if not drifted:
            # built against this very schema, so its own validation refuses them: a retry
            # decodes the same bytes with the same code
            fields, details = describe(error)
            return DriftVerdict(drifted=False, run=False, error=ArgsRefusedError(task_name, fields, details))
        assert job_fp is not None
        fields, details = describe(error)
        if any(item["type"] == "extra_forbidden" and len(item["loc"]) == 1 for item in error.errors()):
            details += (
                " (arguments this worker's task does not declare: deploy the worker first, or "
                "register the task with unknown_args='ignore' to run such jobs without them)"
            )
        warning = None
        if log.note_mismatch(task_name, job_fp, worker_fp):
            # the fields, never the values (which may be secrets); once per pair, since a
            # stale producer sends many such jobs
            where = ", ".join(dict.fromkeys(fields))
            warning = (
                f"task {task_name!r}: jobs built against argument schema {job_fp} do not decode "
                f"with this worker's schema {worker_fp} (fields: {where}); they fail without "
                "retries; regenerate the producer's client (akadze codegen) or deploy the worker "
                "that matches it (logged once per task and pair of schemas)"
            )
        return DriftVerdict(
            drifted=True,
            run=False,
            warning=warning,
            error=ArgsSchemaMismatch(task_name, job_fp, worker_fp, fields, details),
        )
    if not drifted and not ignored:
        return DriftVerdict(drifted=False, run=True)
    warning = None
    if log.note(task_name, job_fp or "none"):
        built = f"a job built against argument schema {job_fp}" if job_fp else "a job without a schema"
        if ignored:
            names = ", ".join(map(repr, ignored))
            warning = (
                f"task {task_name!r}: {built} (this worker has {worker_fp}) carries argument(s) "
                f"{names} that the task does not declare; unknown_args='ignore' drops them and "
                "the job runs; deploy the worker that declares them, or regenerate the "
                "producer's client (akadze codegen)"
            )
        else:
            warning = (
                f"task {task_name!r}: {built} (this worker has {worker_fp}) still decodes, so it "
                "runs; regenerate the producer's client (akadze codegen) to silence this"
            )
    return DriftVerdict(drifted=drifted, run=True, warning=warning)
