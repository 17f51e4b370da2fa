"""Schedules' fire times, and the pruner's batches (finished jobs, schedule runs, idle limit groups)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import statement
from akadze.db.stats import ScheduleRun


class ScheduleQueries:
    """The statements of schedules (Queries' area for the worker's scheduler and the dashboard)."""

    @staticmethod
    async def last_schedule_runs(
        conn: Connection, schedules: Sequence[str]
    ) -> tuple[datetime, dict[str, datetime | None]]:
        """The database's clock, and each schedule's newest fire time (None when it has none)."""
        if not schedules:
            raise ValueError("last_schedule_runs needs at least one schedule name")
        rows = await fetch(conn, statement("last_schedule_runs"), {"schedules": list(schedules)})
        return rows[0]["now"], {row["schedule"]: row["fire_at"] for row in rows}

    @staticmethod
    async def fire_schedule(conn: Connection, schedule: str, fire_at: datetime, grace_s: float) -> bool:
        """True when this transaction claimed the fire time: it must now enqueue its job."""
        params = {"schedule": schedule, "fire_at": fire_at, "grace_s": grace_s}
        return bool(await fetch(conn, statement("fire_schedule"), params))

    @staticmethod
    async def set_schedule_run_job(conn: Connection, schedule: str, fire_at: datetime, job_id: int) -> None:
        """Record the job that the fire time ``fire_at`` of ``schedule`` enqueued, in the transaction
        that claimed the fire time (fire_schedule), so the dashboard can show it."""
        params = {"schedule": schedule, "fire_at": fire_at, "job_id": job_id}
        await execute(conn, statement("set_schedule_run_job"), params)

    @staticmethod
    async def recent_schedule_runs(conn: Connection, names: Sequence[str], limit: int) -> list[ScheduleRun]:
        """The newest ``limit`` fire times of each schedule of ``names``, newest first, with the job each
        enqueued and its state now (None once pruned); reads only."""
        params = {"schedules": list(names), "per_schedule": limit}
        return [ScheduleRun.of(r) for r in await fetch(conn, statement("recent_schedule_runs"), params)]


class PruneQueries:
    """Each prune statement deletes one batch under an advisory lock: rows deleted, or None when
    another pruner holds the lock."""

    @staticmethod
    async def prune_jobs(conn: Connection, *, retention_s: float, limit: int, lock_key: int) -> int | None:
        """Delete one batch of at most ``limit`` jobs finished more than ``retention_s`` ago, oldest
        first; rows locked by others are skipped. The count, or None when another pruner holds the lock."""
        rows = await fetch(conn, statement("prune_jobs"), _prune_params(retention_s, limit, lock_key))
        return _deleted(rows)

    @staticmethod
    async def prune_schedule_runs(
        conn: Connection, *, retention_s: float, limit: int, lock_key: int
    ) -> int | None:
        """Delete one batch of at most ``limit`` schedule runs recorded more than ``retention_s`` ago
        (retention outlasts grace, so no fire time can fire twice). The count, or None when locked out."""
        rows = await fetch(
            conn, statement("prune_schedule_runs"), _prune_params(retention_s, limit, lock_key)
        )
        return _deleted(rows)

    @staticmethod
    async def prune_limit_groups(
        conn: Connection, *, retention_s: float, limit: int, lock_key: int
    ) -> int | None:
        """Limit groups unused for retention and with no running job."""
        rows = await fetch(conn, statement("prune_limit_groups"), _prune_params(retention_s, limit, lock_key))
        return _deleted(rows)


def _prune_params(retention_s: float, limit: int, lock_key: int) -> dict[str, Any]:
    return {"retention_s": retention_s, "limit": limit, "lock_key": lock_key}


def _deleted(rows: Sequence[Any]) -> int | None:
    return int(rows[0]["deleted"]) if rows[0]["locked"] else None
