"""Operating queues (pause, resume) and the operator's views of them (dashboard, `queues list`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from akadze.db.queries.connection import Connection, fetch
from akadze.db.sql import statement
from akadze.db.stats import QueueActivity, QueueStats


class QueueQueries:
    """The statements on queues (Queries' area for control/, the CLI's queues commands, the dashboard
    and the metrics collector)."""

    @staticmethod
    async def pause_queue(conn: Connection, queue: str) -> bool:
        """True when the queue was not paused before."""
        return bool((await fetch(conn, statement("pause_queue"), {"queue": queue}))[0]["changed"])

    @staticmethod
    async def resume_queue(conn: Connection, queue: str) -> bool:
        """True when the queue was paused before."""
        return bool((await fetch(conn, statement("resume_queue"), {"queue": queue}))[0]["changed"])

    @staticmethod
    async def queue_stats(conn: Connection, queues: Sequence[str], *, full: bool = False) -> list[QueueStats]:
        """Counts per queue now (ready, delayed, running, the oldest wait, live workers) for
        ``queues`` and every queue with queued or running jobs, a pause or a live worker; reads
        only, from the claim and running indexes (no parked or finished row is visited). With
        ``full`` (`queues list`), also each queue's held and failed jobs, and the queues that
        have some: that reads each parked and each failed row once (index scans)."""
        rows = await fetch(conn, statement("queue_stats"), {"queues": list(queues), "full": full})
        return [QueueStats.of(row) for row in rows]

    @staticmethod
    async def explain_context(
        conn: Connection, job_id: int, queue: str
    ) -> tuple[datetime, datetime | None, str | None]:
        """The database's clock, when ``queue`` was paused (None when it is not), and why job
        ``job_id`` is parked (``'limit'``; None when it is not)."""
        row = (await fetch(conn, statement("explain_context"), {"id": job_id, "queue": queue}))[0]
        return row["now"], row["paused_at"], row["parked"]

    @staticmethod
    async def limit_holders(
        conn: Connection, job_id: int, *, key: str | None, per_s: float | None
    ) -> list[tuple[str, int, datetime | None]]:
        """(kind 'c' running or 'r' started in the rate window ``per_s``, job id, free_at) of the
        jobs that fill job_id's limit group."""
        params = {"id": job_id, "key": key, "per_s": per_s}
        rows = await fetch(conn, statement("limit_holders"), params)
        return [(row["kind"], row["job_id"], row["free_at"]) for row in rows]

    @staticmethod
    async def queue_activity(conn: Connection, minutes: int) -> dict[str, QueueActivity]:
        """Per queue with recent activity: jobs failed in the last hour and jobs finished in each of
        the last ``minutes`` minutes (the dashboard's overview); reads only."""
        rows = await fetch(conn, statement("queue_activity"), {"minutes": minutes})
        return QueueActivity.collect(rows, minutes)
