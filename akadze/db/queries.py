"""Every statement akadze runs, one method per .sql file; rows become Jobs here.

A method takes either a SQLAlchemy ``AsyncConnection`` (a caller's transaction, or the path
that runs on_transition hooks) or the raw asyncpg connection under one (the worker's hot path,
autocommit). Both run the same statement text.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import Select, Text, cast, select
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.db.prepared import STALE, forget, prepared
from akadze.db.sql import Statement, statement
from akadze.db.stats import (
    JobFilter,
    JobSummary,
    LiveWorker,
    QueueActivity,
    QueueStats,
    ScheduleRun,
    job_summaries_query,
)
from akadze.db.tables import jobs
from akadze.errors import UniqueConflictError
from akadze.flow import LimitParams, Unique
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion
from akadze.stored import row_to_job

#: a job keeps at most this many error entries, the newest
MAX_ERRORS = 20
#: an error entry's message is cut to this many characters
MAX_ERROR_MESSAGE = 2000

Connection = Any  # AsyncConnection, or the asyncpg.Connection under one (asyncpg is untyped)


async def _fetch(conn: Connection, stmt: Statement, params: Mapping[str, Any]) -> Sequence[Any]:
    if isinstance(conn, AsyncConnection):
        result = await conn.execute(stmt.clause, dict(params))
        return result.mappings().all() if result.returns_rows else []
    args = [params[name] for name in stmt.params]
    ready = await prepared(conn, stmt)
    if ready is not None:
        try:
            found: Sequence[Any] = await ready.fetch(*args)
            return found
        except STALE:
            forget(conn, stmt)
    rows: Sequence[Any] = await conn.fetch(stmt.pg, *args)
    return rows


async def _execute(conn: Connection, stmt: Statement, params: Mapping[str, Any]) -> None:
    await _fetch(conn, stmt, params)


def _new_job(new: NewJobs, row: Mapping[str, Any], payload: str) -> Job:
    """A job just inserted: what the database decided comes from ``row``, the rest is known."""
    return Job(
        id=row["id"],
        task=new.task,
        queue=new.queue,
        state=JobState.QUEUED,
        priority=new.priority,
        args=msgspec.json.decode(payload),
        attempt=0,
        max_attempts=new.max_attempts,
        run=0,
        run_at=row["run_at"],
        expires_at=new.expires_at,
        cancel_requested=False,
        errors=(),
        result=None,
        worker_id=None,
        args_fp=new.args_fp,
        created_at=row["created_at"],
        started_at=None,
        finished_at=None,
        trace_context=new.trace_context,
    )


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
    #: the enqueuing span's W3C trace context (akadze.tracing); None when tracing is off
    trace_context: str | None = None
    #: the task's Unique: enqueue goes through enqueue_unique(_batch)
    unique: Unique | None = None


class Orphan(msgspec.Struct, frozen=True):
    """A running job whose worker is gone, as the rescue reads it: never its arguments or result."""

    id: int
    task: str
    queue: str
    attempt: int
    max_attempts: int
    run: int
    worker_id: str | None


_JSON_COLUMNS = frozenset({"args", "errors", "result"})


def register_params(
    worker_id: str,
    name: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    slots: int,
    lost_after_s: float,
    tasks: Sequence[tuple[str, str, str]] = (),
) -> dict[str, Any]:
    """register_worker's parameters (the heartbeat process runs the statement too)."""
    return {
        "id": worker_id,
        "name": name,
        "host": host,
        "pid": pid,
        "queues": list(queues),
        "slots": slots,
        "lost_after_s": lost_after_s,
        "task_names": [t[0] for t in tasks],
        "task_queues": [t[1] for t in tasks],
        "task_fps": [t[2] for t in tasks],
    }


def beat_statements(
    worker_id: str, registration: Mapping[str, Any]
) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    """heartbeat's and register_worker's statements, raw form, with their arguments: for the
    heartbeat process, which loads no akadze (akadze/worker/beat.py)."""
    heartbeat, register = statement("heartbeat"), statement("register_worker")
    beat_params, register_params_ = {"id": worker_id}, register_params(**registration)
    return (
        (heartbeat.pg, [beat_params[name] for name in heartbeat.params]),
        (register.pg, [register_params_[name] for name in register.params]),
    )


class LiveTask(msgspec.Struct, frozen=True):
    """A task a live worker published at registration (live_task_schemas)."""

    worker_id: str
    worker_name: str
    #: the queues the worker serves
    worker_queues: tuple[str, ...]
    #: None for a worker that published no task
    task: str | None
    queue: str | None
    args_fp: str | None


class Queries:
    """Stateless: one async method per statement."""

    @staticmethod
    async def enqueue(conn: Connection, new: NewJobs, args: str) -> Job:
        if new.run_at is None and new.delay_s == 0:
            return await Queries.enqueue_now(conn, new, args)
        rows = await _fetch(conn, statement("enqueue"), _new_params(new, args))
        return _new_job(new, rows[0], args)

    @staticmethod
    async def enqueue_now(conn: Connection, new: NewJobs, args: str) -> Job:
        """enqueue for a job ready at once (no delay, no run_at): a simpler, faster statement."""
        stmt = statement("enqueue_now")
        every = _new_params(new, args)
        rows = await _fetch(conn, stmt, {name: every[name] for name in stmt.params})
        return _new_job(new, rows[0], args)

    @staticmethod
    async def enqueue_batch(conn: Connection, new: NewJobs, args: Sequence[str]) -> list[Job]:
        rows = await _fetch(conn, statement("enqueue_batch"), _new_params(new, list(args)))
        return [_new_job(new, row, payload) for row, payload in zip(rows, args, strict=True)]

    @staticmethod
    async def enqueue_unique(conn: Connection, new: NewJobs, args: str, key: str) -> Job | None:
        """The new job, or the one holding ``key`` (duplicate=True); None: send it again."""
        stmt = statement("enqueue_unique")
        rows = await _fetch(conn, stmt, _unique_params(stmt, new, args, key))
        return _unique_job(new, rows[0], args) if rows else None

    @staticmethod
    async def enqueue_unique_batch(
        conn: Connection, new: NewJobs, args: Sequence[str], keys: Sequence[str]
    ) -> dict[int, Job]:
        """Item position (from 0) -> its new job or the one holding its key; missing: send again."""
        stmt = statement("enqueue_unique_batch")
        rows = await _fetch(conn, stmt, _unique_params(stmt, new, list(args), list(keys)))
        return {row["n"] - 1: _unique_job(new, row, args[row["n"] - 1]) for row in rows}

    @staticmethod
    async def claim(conn: Connection, queues: Sequence[str], limit: int, worker_id: str) -> list[Job]:
        params = {"queues": list(queues), "limit": limit, "worker_id": worker_id}
        rows = await _fetch(conn, statement("claim"), params)
        return [row_to_job(row, json_text=True) for row in rows]

    @staticmethod
    async def claim_limited(
        conn: Connection, queues: Sequence[str], limit: int, worker_id: str, limits: LimitParams
    ) -> list[Job]:
        """claim, for a worker whose tasks have limits: a job whose limit is full stays queued."""
        params = {
            "queues": list(queues),
            "limit": limit,
            "worker_id": worker_id,
            "l_task": limits.tasks,
            "l_key": limits.keys,
            "l_conc": limits.concurrency,
            "l_rate": limits.rate,
            "l_per": limits.per_s,
        }
        stmt = statement("claim_limited")
        if not isinstance(conn, AsyncConnection) and conn not in _generic:
            # prepared on a direct connection: planned once (generic_plans.sql says why)
            if await prepared(conn, stmt) is not None:
                await Queries.generic_plans(conn)
            _generic.add(conn)
        rows = await _fetch(conn, stmt, params)
        return [row_to_job(row, json_text=True) for row in rows]

    @staticmethod
    async def generic_plans(conn: Connection) -> None:
        await _execute(conn, statement("generic_plans"), {})

    @staticmethod
    async def complete_batch(conn: Connection, ended: Sequence[Completion]) -> list[Completed]:
        """Applies what still owns its job; returns the jobs as written (the fenced-out are absent)."""
        rows_out = [
            _CompletionRow(
                e.job_id,
                e.run,
                e.transition.state.value,
                e.transition.attempt,
                e.transition.delay_s,
                msgspec.Raw(e.result.encode()) if e.result is not None else None,
                _error_entry(e),
                e.transition.cancellable,
                e.transition.priority,
            )
            for e in ended
        ]
        params: dict[str, Any] = {"max_errors": MAX_ERRORS, "batch": _batch_encoder.encode(rows_out).decode()}
        rows = await _fetch(conn, statement("complete_batch"), params)
        return [
            Completed(
                r["id"], r["task"], r["queue"], JobState(r["state"]), r["attempt"], r["run"], r["run_at"]
            )
            for r in rows
        ]

    @staticmethod
    async def get_jobs(conn: Connection, ids: Sequence[int]) -> list[Job]:
        rows = await _fetch(conn, statement("get_jobs"), {"ids": list(ids)})
        return [row_to_job(row, json_text=True) for row in rows]

    @staticmethod
    async def set_result(conn: Connection, job_id: int, run: int, result: str) -> None:
        await _execute(conn, statement("set_result"), {"id": job_id, "run": run, "result": result})

    @staticmethod
    async def get_job(conn: Connection, job_id: int) -> Job | None:
        found = await Queries.get_jobs(conn, [job_id])
        return found[0] if found else None

    @staticmethod
    async def mark_awaited(conn: Connection, job_id: int) -> None:
        await _execute(conn, statement("mark_awaited"), {"id": job_id})

    @staticmethod
    async def cancel_requests(conn: Connection, worker_id: str) -> list[int]:
        """The running jobs of ``worker_id`` that have a cancel request."""
        return [
            row["id"] for row in await _fetch(conn, statement("cancel_requests"), {"worker_id": worker_id})
        ]

    @staticmethod
    async def request_cancel(conn: Connection, job_id: int) -> tuple[Job, JobState] | None:
        rows = await _fetch(conn, statement("request_cancel"), {"id": job_id})
        return (row_to_job(rows[0], json_text=True), JobState(rows[0]["from_state"])) if rows else None

    @staticmethod
    async def requeue(conn: Connection, job_id: int) -> tuple[Job, JobState] | None:
        rows = await _fetch(conn, statement("requeue"), {"id": job_id})
        if rows and rows[0]["held_by"] is not None:
            raise UniqueConflictError(job_id, rows[0]["held_by"])
        return (row_to_job(rows[0], json_text=True), JobState(rows[0]["from_state"])) if rows else None

    @staticmethod
    async def register_worker(
        conn: Connection,
        *,
        worker_id: str,
        name: str,
        host: str,
        pid: int,
        queues: Sequence[str],
        slots: int,
        lost_after_s: float,
        tasks: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        """Also publishes ``tasks``, (name, queue, args_fp) each, for ``akadze codegen verify``."""
        params = register_params(worker_id, name, host, pid, queues, slots, lost_after_s, tasks)
        await _execute(conn, statement("register_worker"), params)

    @staticmethod
    async def live_task_schemas(conn: Connection) -> list[LiveTask]:
        """What live workers serve and run; one row with ``task`` None for a worker that
        published no task (an older akadze)."""
        rows = await _fetch(conn, statement("live_task_schemas"), {})
        return [
            LiveTask(str(r["worker_id"]), r["name"], tuple(r["queues"]), r["task"], r["queue"], r["args_fp"])
            for r in rows
        ]

    @staticmethod
    async def heartbeat(conn: Connection, worker_id: str) -> bool:
        """False when this worker's row is gone: it was declared lost."""
        return bool(await _fetch(conn, statement("heartbeat"), {"id": worker_id}))

    @staticmethod
    async def unregister_worker(conn: Connection, worker_id: str) -> None:
        await _execute(conn, statement("unregister_worker"), {"id": worker_id})

    @staticmethod
    async def forget_lost_workers(conn: Connection) -> list[str]:
        rows = await _fetch(conn, statement("forget_lost_workers"), {})
        return [str(row["id"]) for row in rows]

    @staticmethod
    async def find_orphans(conn: Connection, limit: int) -> list[Orphan]:
        rows = await _fetch(conn, statement("find_orphans"), {"limit": limit})
        return [
            Orphan(
                r["id"],
                r["task"],
                r["queue"],
                r["attempt"],
                r["max_attempts"],
                r["run"],
                str(r["worker_id"]) if r["worker_id"] is not None else None,
            )
            for r in rows
        ]

    @staticmethod
    async def find_claimed(conn: Connection, worker_id: str, known: Sequence[int]) -> list[Job]:
        """Running jobs of ``worker_id`` other than ``known``: claimed by a claim whose reply was lost."""
        rows = await _fetch(conn, statement("find_claimed"), {"worker_id": worker_id, "known": list(known)})
        return [row_to_job(row, json_text=True) for row in rows]

    @staticmethod
    async def list_jobs(
        conn: AsyncConnection,
        *,
        state: JobState | None = None,
        task: str | None = None,
        queue: str | None = None,
        limit: int = 50,
    ) -> list[Job]:
        # the JSON columns as text, decoded per row: one undecodable row must not fail the list
        columns = [cast(c, Text).label(c.name) if c.name in _JSON_COLUMNS else c for c in jobs.c]
        query: Select[Any] = select(*columns).order_by(jobs.c.id.desc()).limit(limit)
        if state is not None:
            query = query.where(jobs.c.state == state.value)
        if task is not None:
            query = query.where(jobs.c.task == task)
        if queue is not None:
            query = query.where(jobs.c.queue == queue)
        result = await conn.execute(query)
        return [row_to_job(row, json_text=True) for row in result.mappings()]

    @staticmethod
    async def last_schedule_runs(
        conn: Connection, schedules: Sequence[str]
    ) -> tuple[datetime, dict[str, datetime | None]]:
        """The database's clock, and each schedule's newest fire time (None when it has none)."""
        if not schedules:
            raise ValueError("last_schedule_runs needs at least one schedule name")
        rows = await _fetch(conn, statement("last_schedule_runs"), {"schedules": list(schedules)})
        return rows[0]["now"], {row["schedule"]: row["fire_at"] for row in rows}

    @staticmethod
    async def fire_schedule(conn: Connection, schedule: str, fire_at: datetime, grace_s: float) -> bool:
        """True when this transaction claimed the fire time: it must now enqueue its job."""
        params = {"schedule": schedule, "fire_at": fire_at, "grace_s": grace_s}
        return bool(await _fetch(conn, statement("fire_schedule"), params))

    @staticmethod
    async def set_schedule_run_job(conn: Connection, schedule: str, fire_at: datetime, job_id: int) -> None:
        params = {"schedule": schedule, "fire_at": fire_at, "job_id": job_id}
        await _execute(conn, statement("set_schedule_run_job"), params)

    @staticmethod
    async def prune_jobs(conn: Connection, *, retention_s: float, limit: int, lock_key: int) -> int | None:
        """Rows deleted by one batch; None when another pruner holds the lock."""
        params = {"retention_s": retention_s, "limit": limit, "lock_key": lock_key}
        rows = await _fetch(conn, statement("prune_jobs"), params)
        return int(rows[0]["deleted"]) if rows[0]["locked"] else None

    @staticmethod
    async def prune_schedule_runs(
        conn: Connection, *, retention_s: float, limit: int, lock_key: int
    ) -> int | None:
        """Rows deleted by one batch; None when another pruner holds the lock."""
        params = {"retention_s": retention_s, "limit": limit, "lock_key": lock_key}
        rows = await _fetch(conn, statement("prune_schedule_runs"), params)
        return int(rows[0]["deleted"]) if rows[0]["locked"] else None

    @staticmethod
    async def prune_limit_slots(
        conn: Connection, *, retention_s: float, limit: int, lock_key: int
    ) -> int | None:
        """Free limit permits unused for retention, deleted in one batch; None when another
        pruner holds the lock."""
        params = {"retention_s": retention_s, "limit": limit, "lock_key": lock_key}
        rows = await _fetch(conn, statement("prune_limit_slots"), params)
        return int(rows[0]["deleted"]) if rows[0]["locked"] else None

    # -- operating queues (pause) and the operator's views (dashboard, `queues list`) -------------

    @staticmethod
    async def pause_queue(conn: Connection, queue: str) -> bool:
        """True when the queue was not paused before."""
        return bool((await _fetch(conn, statement("pause_queue"), {"queue": queue}))[0]["changed"])

    @staticmethod
    async def resume_queue(conn: Connection, queue: str) -> bool:
        """True when the queue was paused before."""
        return bool((await _fetch(conn, statement("resume_queue"), {"queue": queue}))[0]["changed"])

    @staticmethod
    async def run_now(conn: Connection, job_id: int) -> bool:
        """True when a queued job waiting for its run_at became ready."""
        return bool(await _fetch(conn, statement("run_now"), {"id": job_id}))

    @staticmethod
    async def queue_stats(conn: Connection, queues: Sequence[str]) -> list[QueueStats]:
        rows = await _fetch(conn, statement("queue_stats"), {"queues": list(queues)})
        return [QueueStats.of(row) for row in rows]

    @staticmethod
    async def queue_pause(conn: Connection, queue: str) -> tuple[datetime, datetime | None]:
        """The database's clock, and when ``queue`` was paused (None when it is not)."""
        row = (await _fetch(conn, statement("queue_pause"), {"queue": queue}))[0]
        return row["now"], row["paused_at"]

    @staticmethod
    async def limit_holders(
        conn: Connection, job_id: int, *, key: str | None, concurrency: int | None, rate: int | None
    ) -> list[tuple[str, int, datetime | None]]:
        """(kind 'c' or 'r', holding job id, free_at) of the permits that fill job_id's limit groups."""
        params = {"id": job_id, "key": key, "concurrency": concurrency, "rate": rate}
        rows = await _fetch(conn, statement("limit_holders"), params)
        return [(row["kind"], row["job_id"], row["free_at"]) for row in rows]

    @staticmethod
    async def queue_activity(conn: Connection, minutes: int) -> dict[str, QueueActivity]:
        rows = await _fetch(conn, statement("queue_activity"), {"minutes": minutes})
        return QueueActivity.collect(rows, minutes)

    @staticmethod
    async def live_workers(conn: Connection, max_ids: int = 100) -> list[LiveWorker]:
        return [LiveWorker.of(r) for r in await _fetch(conn, statement("live_workers"), {"max_ids": max_ids})]

    @staticmethod
    async def recent_schedule_runs(conn: Connection, names: Sequence[str], limit: int) -> list[ScheduleRun]:
        params = {"schedules": list(names), "per_schedule": limit}
        return [ScheduleRun.of(r) for r in await _fetch(conn, statement("recent_schedule_runs"), params)]

    @staticmethod
    async def job_summaries(
        conn: AsyncConnection, where: JobFilter, *, before: int | None = None, limit: int = 50
    ) -> list[JobSummary]:
        result = await conn.execute(job_summaries_query(where, before=before, limit=limit))
        return [JobSummary.of(row) for row in result.mappings()]


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
        "trace_context": new.trace_context,
    }


#: raw connections whose session generic_plans.sql has set (or that are behind a pooler)
_generic: weakref.WeakSet[Any] = weakref.WeakSet()


def _unique_params(
    stmt: Statement, new: NewJobs, args: str | list[str], key: str | list[str]
) -> dict[str, Any]:
    unique = new.unique
    assert unique is not None
    params = _new_params(new, args)
    params.update(
        unique_key=key, unique_keys=key, unique_states=unique.blocking_states, period_s=unique.period_s
    )
    return {name: params[name] for name in stmt.params}


def _unique_job(new: NewJobs, row: Mapping[str, Any], payload: str) -> Job:
    if row["duplicate"]:
        return msgspec.structs.replace(row_to_job(row, json_text=True), duplicate=True)
    return _new_job(new, row, payload)


class _ErrorEntry(msgspec.Struct):
    attempt: int
    type: str
    message: str


class _CompletionRow(msgspec.Struct):
    """One element of complete_batch's JSON batch; the names are the recordset's columns."""

    id: int
    run: int
    state: str
    attempt: int
    delay_s: float | None
    result: msgspec.Raw | None
    error: _ErrorEntry | None
    cancellable: bool
    priority: int | None


_batch_encoder = msgspec.json.Encoder()


def _error_entry(ended: Completion) -> _ErrorEntry | None:
    c = ended.transition
    if c.error_type is None:
        return None
    message = c.error_message or ""
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + " [truncated]"
    return _ErrorEntry(c.attempt, c.error_type, message)
