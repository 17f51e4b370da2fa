"""Rows of the read-only operator queries: queue stats, queue activity, live workers and
schedule runs, as typed values (the dashboard reads them; `queues list` and `workers list` can
too). Built from the rows that Queries fetches; no IO here. The job listing and search are
composed in db/listing.py, the trends in db/trends.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import msgspec

from akadze.job import JobState


class QueueStats(msgspec.Struct, frozen=True):
    """One queue now (queue_stats.sql); the field names are `queues list`'s JSON keys."""

    name: str
    paused: bool
    #: queued jobs whose run_at has come
    ready: int
    #: queued jobs waiting for their run_at (delayed, retried, snoozed)
    delayed: int
    #: queued jobs held back: parked by their Limit, or workflow steps waiting for their
    #: parents; None when not counted (the metrics, the dashboard)
    held: int | None
    running: int
    #: failed jobs (kept until retention prunes them); None when not counted
    failed: int | None
    #: how long the oldest ready job has waited, in seconds; None when none is ready
    oldest_ready_s: float | None
    #: live workers serving the queue
    workers: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> QueueStats:
        """From a queue_stats.sql row, with the counts as ints and the oldest wait as a float."""
        oldest = row["oldest_ready_s"]
        return cls(
            name=row["name"],
            paused=bool(row["paused"]),
            ready=int(row["ready"]),
            delayed=int(row["delayed"]),
            held=int(row["held"]) if row["held"] is not None else None,
            running=int(row["running"]),
            oldest_ready_s=float(oldest) if oldest is not None else None,
            failed=int(row["failed"]) if row["failed"] is not None else None,
            workers=int(row["workers"]),
        )


class QueueActivity(msgspec.Struct, frozen=True):
    """A queue's recent past (queue_activity.sql)."""

    name: str
    failed_last_hour: int
    #: jobs finished per minute, index 0 being the current minute
    finished_per_minute: tuple[int, ...]

    @classmethod
    def collect(cls, rows: Iterable[Mapping[str, Any]], minutes: int) -> dict[str, QueueActivity]:
        """Queue name -> its activity, from queue_activity.sql's rows: a queue with failures but no
        finished job gets zeros per minute, and rows outside the ``minutes`` window are ignored."""
        failed: dict[str, int] = {}
        finished: dict[str, list[int]] = {}
        for row in rows:
            queue, minute, count = row["queue"], row["minute"], int(row["jobs"])
            if minute is None:
                failed[queue] = count
            elif 0 <= minute < minutes:
                finished.setdefault(queue, [0] * minutes)[minute] += count
        return {
            name: cls(name, failed.get(name, 0), tuple(finished.get(name, [0] * minutes)))
            for name in sorted(failed.keys() | finished.keys())
        }


class LiveWorker(msgspec.Struct, frozen=True):
    """A live worker (live_workers.sql); `workers list`'s JSON keys are among the fields."""

    id: str
    name: str
    host: str
    pid: int
    queues: tuple[str, ...]
    slots: int
    started_at: datetime
    heartbeat_at: datetime
    #: seconds since the last heartbeat, database clock
    heartbeat_age_s: float
    #: jobs it runs now
    running: int
    #: the ids of the first of them (bounded)
    running_ids: tuple[int, ...]

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> LiveWorker:
        """From a live_workers.sql row (the worker id as text, the queues and ids as tuples)."""
        return cls(
            id=str(row["id"]),
            name=row["name"],
            host=row["host"],
            pid=int(row["pid"]),
            queues=tuple(row["queues"]),
            slots=int(row["slots"]),
            started_at=row["started_at"],
            heartbeat_at=row["heartbeat_at"],
            heartbeat_age_s=float(row["heartbeat_age_s"]),
            running=int(row["running"]),
            running_ids=tuple(row["running_ids"]),
        )


class ScheduleRun(msgspec.Struct, frozen=True):
    """A recorded fire time of a schedule (recent_schedule_runs.sql)."""

    schedule: str
    fire_at: datetime
    #: the job it enqueued; None before it is recorded
    job_id: int | None
    #: that job's state now; None once the job is pruned
    state: JobState | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> ScheduleRun:
        """From a recent_schedule_runs.sql row; the state is None once the job was pruned."""
        state = row["state"]
        return cls(row["schedule"], row["fire_at"], row["job_id"], JobState(state) if state else None)
