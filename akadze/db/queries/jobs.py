"""Jobs as operators and callers see them: read, list, cancel, requeue, hurry, wait for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, Text, cast, select
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.codec.stored import row_to_job
from akadze.db.listing import Cursor, JobFilter, JobPage, job_page_query
from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import JSON_COLUMNS, statement
from akadze.db.tables import jobs
from akadze.errors import UniqueConflictError
from akadze.job import Job, JobState


class JobQueries:
    """The statements on single jobs that callers and operators use (Queries' area for control/,
    waiting and the CLI's jobs commands)."""

    @staticmethod
    async def get_jobs(conn: Connection, ids: Sequence[int]) -> list[Job]:
        """The jobs of ``ids`` that exist, whole rows in id order; missing ids are left out. An
        undecodable row comes back with UnreadableArgs instead of failing the read."""
        rows = await fetch(conn, statement("get_jobs"), {"ids": list(ids)})
        return [row_to_job(row, json_text=True) for row in rows]

    @staticmethod
    async def get_job(conn: Connection, job_id: int) -> Job | None:
        """The job ``job_id``, or None when no row has it (never enqueued, or pruned)."""
        found = await JobQueries.get_jobs(conn, [job_id])
        return found[0] if found else None

    @staticmethod
    async def mark_awaited(conn: Connection, job_id: int) -> None:
        """Mark the unfinished job ``job_id`` as awaited, so the statement that finishes it
        notifies akadze_done (wait_for calls this before it listens); a finished job is left as it is."""
        await execute(conn, statement("mark_awaited"), {"id": job_id})

    @staticmethod
    async def request_cancel(conn: Connection, job_id: int) -> tuple[Job, JobState] | None:
        """Cancel ``job_id``: a queued job ends cancelled at once, a running one is marked for its run
        to see. Returns the job as written and its previous state (for on_transition hooks), or None
        when the job is missing or in a state no cancel changes."""
        rows = await fetch(conn, statement("request_cancel"), {"id": job_id})
        return (row_to_job(rows[0], json_text=True), JobState(rows[0]["from_state"])) if rows else None

    @staticmethod
    async def requeue(conn: Connection, job_id: int) -> tuple[Job, JobState] | None:
        """Put the failed or cancelled job ``job_id`` back in its queue, ready now, with at least
        one attempt left. Returns the job and its previous state, or None when it is missing,
        neither failed nor cancelled, or a workflow step cancelled while it waited for its
        parents; raises UniqueConflictError when a newer job holds its unique key (nothing
        changes)."""
        rows = await fetch(conn, statement("requeue"), {"id": job_id})
        if rows and rows[0]["held_by"] is not None:
            raise UniqueConflictError(job_id, rows[0]["held_by"])
        return (row_to_job(rows[0], json_text=True), JobState(rows[0]["from_state"])) if rows else None

    @staticmethod
    async def run_now(conn: Connection, job_id: int) -> bool:
        """True when a queued job waiting for its run_at became ready."""
        return bool(await fetch(conn, statement("run_now"), {"id": job_id}))

    @staticmethod
    async def list_jobs(
        conn: AsyncConnection,
        *,
        state: JobState | None = None,
        task: str | None = None,
        queue: str | None = None,
        limit: int = 50,
    ) -> list[Job]:
        """The newest ``limit`` jobs (by id, descending) matching every filter given, whole rows; for
        ``akadze jobs list`` and akadze.testing. A row that cannot be decoded does not fail the list."""
        # the JSON columns as text, decoded per row: one undecodable row must not fail the list
        columns = [cast(c, Text).label(c.name) if c.name in JSON_COLUMNS else c for c in jobs.c]
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
    async def job_page(
        conn: AsyncConnection,
        where: JobFilter,
        *,
        before: Cursor | None = None,
        limit: int = 50,
        scan: int | None = None,
        max_id: int | None = None,
    ) -> JobPage:
        """A page of the jobs ``where`` selects (db/listing.py says in which order and how a
        text search is bounded by ``scan``)."""
        query = job_page_query(where, before=before, limit=limit + 1, scan=scan, max_id=max_id)
        rows = (await conn.execute(query)).mappings().all()
        return JobPage.of(rows, where, limit=limit, scan=scan)
