"""Every statement akadze runs, one method per .sql file; rows become Jobs here.

``Queries`` is stateless, one async static method per statement, composed from one class per
area so that each module reads in one sitting:

- connection.py: how a statement runs on a SQLAlchemy or a raw asyncpg connection
- enqueue.py: the enqueue statements (``NewJobs``)
- runs.py: the worker's hot path: claim_completing (and its two halves, claim and complete_batch),
  claim_limited, set_result, find_claimed
- workers.py: workers' rows, heartbeat, orphans (``Orphan``, ``LiveTask``, ``beat_statements``)
- jobs.py: reading, listing, cancelling, requeueing jobs
- schedules.py: schedules' fire times and the pruner's batches
- queues.py: pause, resume and the queue views
- dashboard.py: the dashboard's CSRF key, and deleting finished jobs
- workflows.py: a workflow's graph enqueued in one statement, read, cancelled
- trends.py: the rollup of finished jobs into per-minute and per-hour rows, and their reads
- graphs.py: a workflow's steps and edges as operators read them, and what a step waits for

A new statement goes to the class of its area (tests/db/test_sql_files.py reads them all).
"""

from __future__ import annotations

from akadze.db.queries.connection import Connection
from akadze.db.queries.dashboard import DashboardQueries
from akadze.db.queries.enqueue import EnqueueQueries, NewJobs
from akadze.db.queries.graphs import GraphQueries
from akadze.db.queries.jobs import JobQueries
from akadze.db.queries.queues import QueueQueries
from akadze.db.queries.runs import RunQueries
from akadze.db.queries.schedules import PruneQueries, ScheduleQueries
from akadze.db.queries.trends import RollStep, TrendQueries
from akadze.db.queries.workers import LiveTask, Orphan, WorkerQueries, beat_statements
from akadze.db.queries.workflows import NewStep, WorkflowQueries

__all__ = [
    "Connection",
    "LiveTask",
    "NewJobs",
    "NewStep",
    "Orphan",
    "Queries",
    "RollStep",
    "beat_statements",
]


class Queries(
    EnqueueQueries,
    RunQueries,
    WorkerQueries,
    JobQueries,
    ScheduleQueries,
    PruneQueries,
    QueueQueries,
    DashboardQueries,
    TrendQueries,
    WorkflowQueries,
    GraphQueries,
):
    """Stateless: one async method per statement (the module docstring lists the areas)."""
