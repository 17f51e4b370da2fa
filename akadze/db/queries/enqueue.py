"""The enqueue statements: one job or a batch, with or without a unique key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
from msgspec.structs import replace

from akadze.codec.stored import row_to_job
from akadze.db.queries.connection import Connection, fetch
from akadze.db.sql import Statement, statement
from akadze.events.trace_context import split
from akadze.flow import Limit, Unique
from akadze.job import Job, JobState


class NewJobs(msgspec.Struct, frozen=True):
    """What enqueue writes besides the arguments: the task's options after using(...)."""

    task: str
    queue: str
    priority: int
    max_attempts: int
    args_fp: str | None
    run_at: datetime | None
    delay_s: float
    expires_at: datetime | None
    #: the enqueuing span's W3C trace context (akadze.events.tracing); None when tracing is off
    trace_context: str | None = None
    #: the task's Unique: enqueue goes through enqueue_unique
    unique: Unique | None = None
    #: the task's Limit, when the producer knows it: a job due now goes in parked
    #: (enqueue_parked*.sql), out of the claim index; None: a claim parks it if its group is full
    limit: Limit | None = None

    @property
    def parks(self) -> bool:
        """Whether these jobs are parked by their enqueue: a limited task's jobs due now, not
        unique (a unique enqueue keeps its own statement; a claim parks those)."""
        return self.limit is not None and self.unique is None and self.run_at is None and self.delay_s == 0


class EnqueueQueries:
    """The enqueue statements (Queries' area for Task.enqueue and generated clients)."""

    @staticmethod
    async def enqueue(conn: Connection, new: NewJobs, args: str) -> Job:
        """Insert one job (enqueue.sql; enqueue_now.sql when it is ready at once) in ``conn``'s
        transaction, or at once on a raw connection; returns the new Job, whose arguments are
        ``args`` decoded. A job ready now wakes listening workers when it commits."""
        if new.run_at is None and new.delay_s == 0:
            return await EnqueueQueries.enqueue_now(conn, new, args)
        stmt = statement("enqueue")
        rows = await fetch(conn, stmt, _params(stmt, new, args))
        return _new_job(new, rows[0], args)

    @staticmethod
    async def enqueue_now(conn: Connection, new: NewJobs, args: str) -> Job:
        """enqueue for a job ready at once (no delay, no run_at): a simpler, faster statement."""
        if new.parks:
            return await EnqueueQueries.enqueue_parked(conn, new, args)
        stmt = statement("enqueue_now")
        rows = await fetch(conn, stmt, _params(stmt, new, args))
        return _new_job(new, rows[0], args)

    @staticmethod
    async def enqueue_parked(conn: Connection, new: NewJobs, args: str) -> Job:
        """enqueue_now for a job of a task whose Limit the producer knows (NewJobs.parks): the
        job goes in parked, with an arrival row for its group that the next limited claim reads."""
        stmt = statement("enqueue_parked")
        rows = await fetch(conn, stmt, _params(stmt, new, args))
        return _new_job(new, rows[0], args)

    @staticmethod
    async def enqueue_batch(conn: Connection, new: NewJobs, args: Sequence[str]) -> list[Job]:
        """One statement for the batch: the arguments go as one JSON array, and the ids come
        back as one array (run_at and created_at are the same for every row of a statement)."""
        if new.parks:
            return await EnqueueQueries.enqueue_parked_batch(conn, new, args)
        return await _insert_batch(conn, statement("enqueue_batch"), new, args)

    @staticmethod
    async def enqueue_parked_batch(conn: Connection, new: NewJobs, args: Sequence[str]) -> list[Job]:
        """enqueue_batch for jobs due now of a task whose Limit the producer knows: parked, with
        one arrival row per group of the batch."""
        return await _insert_batch(conn, statement("enqueue_parked_batch"), new, args)

    @staticmethod
    async def enqueue_unique(
        conn: Connection, new: NewJobs, args: Sequence[str], keys: Sequence[str]
    ) -> dict[int, Job]:
        """Item position (from 0) -> its new job or the one holding its key (duplicate=True);
        missing: send it again."""
        stmt = statement("enqueue_unique")
        rows = await fetch(conn, stmt, _unique_params(stmt, new, list(args), list(keys)))
        return {row["n"] - 1: _unique_job(new, row, args[row["n"] - 1]) for row in rows}


#: a new job before its fields are known; replace() fills them in (building a Job from keyword
#: arguments costs about 2 us, replace() a third of that: enqueue returns a Job per row)
_NEW = Job(
    id=0,
    task="",
    queue="",
    state=JobState.QUEUED,
    priority=0,
    args={},
    attempt=0,
    max_attempts=0,
    run=0,
    run_at=datetime.min,
    expires_at=None,
    cancel_requested=False,
    errors=(),
    result=None,
    worker_id=None,
    args_fp=None,
    created_at=datetime.min,
    started_at=None,
    finished_at=None,
)


def _new_job(new: NewJobs, row: Mapping[str, Any], payload: str | None) -> Job:
    """A job just inserted: what the database decided comes from ``row``, the rest is known."""
    return replace(
        _NEW,
        id=row["id"],
        task=new.task,
        queue=new.queue,
        priority=new.priority,
        args={} if payload is None else msgspec.json.decode(payload),
        max_attempts=new.max_attempts,
        run_at=row["run_at"],
        expires_at=new.expires_at,
        args_fp=new.args_fp,
        created_at=row["created_at"],
        trace_context=new.trace_context,
    )


def _new_params(new: NewJobs, args: str | list[str]) -> dict[str, Any]:
    return {
        "task": new.task,
        "queue": new.queue,
        "priority": new.priority,
        "args": args,
        "args_fp": new.args_fp,
        "max_attempts": new.max_attempts,
        "run_at": new.run_at,
        "delay_s": new.delay_s,
        "expires_at": new.expires_at,
        "limit_key": None if new.limit is None else new.limit.key,
        **dict(zip(("trace_context", "trace_parent"), split(new.trace_context), strict=True)),
    }


async def _insert_batch(conn: Connection, stmt: Statement, new: NewJobs, args: Sequence[str]) -> list[Job]:
    """Run ``stmt``, enqueue_batch or enqueue_parked_batch, and make the Jobs it inserted."""
    whole = "[" + ",".join(args) + "]"
    rows = await fetch(conn, stmt, _params(stmt, new, whole))
    row = rows[0]
    ids: list[int] = row["ids"]
    decoded: list[dict[str, Any]] = msgspec.json.decode(whole)
    first = _new_job(new, {"id": 0, "run_at": row["run_at"], "created_at": row["created_at"]}, None)
    return [replace(first, id=job_id, args=job_args) for job_id, job_args in zip(ids, decoded, strict=True)]


def _params(stmt: Statement, new: NewJobs, args: str) -> dict[str, Any]:
    """The parameters of ``stmt``, one of the enqueue statements, for ``new`` and ``args``."""
    every = _new_params(new, args)
    return {name: every[name] for name in stmt.params}


def _unique_params(stmt: Statement, new: NewJobs, args: list[str], keys: list[str]) -> dict[str, Any]:
    unique = new.unique
    assert unique is not None
    params = _new_params(new, args)
    params.update(unique_keys=keys, unique_states=unique.blocking_states, period_s=unique.period_s)
    return {name: params[name] for name in stmt.params}


def _unique_job(new: NewJobs, row: Mapping[str, Any], payload: str) -> Job:
    if row["duplicate"]:
        return msgspec.structs.replace(row_to_job(row, json_text=True), duplicate=True)
    return _new_job(new, row, payload)
