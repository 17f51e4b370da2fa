"""SQLAlchemy Core tables for the statements composed at run time (the jobs listing).

The schema itself is defined by db/migrations; a test checks that these match it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP, UUID
from sqlalchemy.types import TypeEngine, UserDefinedType

from akadze.job import FINISHED_STATES, JobState

metadata = MetaData()

#: a column's type: a class (``Text``) or an instance (``ARRAY(Text)``)
_Type = type[TypeEngine[Any]] | TypeEngine[Any]
#: ``timestamptz``
_TZ = TIMESTAMP(timezone=True)


def _key(**types: _Type) -> list[Column[Any]]:
    """The primary key's columns, name=type, in key order."""
    return [Column(name, type_, primary_key=True) for name, type_ in types.items()]


def _required(**types: _Type) -> list[Column[Any]]:
    """NOT NULL columns, name=type, in table order."""
    return [Column(name, type_, nullable=False) for name, type_ in types.items()]


# JSON columns are read as text and decoded by msgspec, as on the hot path.
jobs = Table(
    "akadze_jobs",
    metadata,
    *_key(id=BigInteger),
    Column("task", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("args", JSONB(none_as_null=True), nullable=False),
    Column("args_fp", Text),
    Column("attempt", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("run", Integer, nullable=False),
    Column("run_at", _TZ, nullable=False),
    Column("expires_at", _TZ),
    Column("cancel_requested", Boolean, nullable=False),
    Column("errors", JSONB, nullable=False),
    Column("result", JSONB),
    Column("worker_id", UUID(as_uuid=False)),
    Column("created_at", _TZ, nullable=False),
    Column("started_at", _TZ),
    Column("finished_at", _TZ),
    # the W3C trace context of the span that enqueued the job (akadze.events.tracing), as JSON text,
    # when it is more than a traceparent (a tracestate): trace_parent below holds the rest
    Column("trace_context", Text),
    # a waiter (wait_for) marked it: finishing it notifies akadze_done
    Column("awaited", Boolean, nullable=False),
    # Unique: the job's key and the states in which it blocks another job with the same key
    Column("unique_key", Text),
    Column("unique_states", ARRAY(Text)),
    # Limit: the concurrency group this run counts in (db/sql/claim_limited.sql)
    Column("limit_grp", Text),
    # a traceparent alone, as its 25 bytes (akadze.events.trace_context.split; migration 0010)
    Column("trace_parent", LargeBinary),
    # why a queued job is held out of the claim (migration 0012): 'deps' (a workflow step
    # waiting for its parents), 'limit' (its Limit is full); NULL: claimable
    Column("parked", Text),
    # a workflow's step (migration 0016, docs/workflows.md): its workflow (NULL outside one),
    # its name there, its parents not finished yet, and what a parent's failure does to it
    Column("workflow_id", BigInteger),
    Column("step", Text),
    Column("deps_left", Integer),
    Column("after_failure", Text),
)
#: the predicate of the indexes over finished rows only
_FINISHED = f"state IN ({', '.join(repr(state.value) for state in FINISHED_STATES)})"
#: the finished states the dashboard's listing indexes hold (all but succeeded: migration 0009)
LISTED_FAILURES = (JobState.FAILED, JobState.CANCELLED)
_LISTED = f"state IN ({', '.join(repr(state.value) for state in LISTED_FAILURES)})"


def _partial(name: str, *columns: Any, where: str, **options: Any) -> Index:
    """A partial index: over the rows ``where`` holds for (SQL text)."""
    return Index(name, *columns, postgresql_where=text(where), **options)


def _claim_order() -> tuple[Any, ...]:
    """The order claims take queued jobs in, as index columns: priority first, then due, then id."""
    return (jobs.c.priority.desc(), jobs.c.run_at, jobs.c.id)


_partial("akadze_jobs_claim_idx", jobs.c.queue, *_claim_order(), where="state = 'queued' AND parked IS NULL")
_partial(
    "akadze_jobs_claim_many_idx", *_claim_order(), where="state = 'queued' AND queue <> '' AND parked IS NULL"
)
_partial(
    "akadze_jobs_parked_idx", jobs.c.queue, jobs.c.parked, where="state = 'queued' AND parked IS NOT NULL"
)
_partial("akadze_jobs_running_idx", jobs.c.worker_id, where="state = 'running'")
_partial("akadze_jobs_prune_idx", jobs.c.finished_at, where=_FINISHED)
# the dashboard's keyset listing of failed and cancelled rows (one per filter; succeeded rows
# are listed from the primary key: migration 0009) and its failures of the last hour
for _column in (jobs.c.state, jobs.c.task, jobs.c.queue):
    _partial(f"akadze_jobs_{_column.name}_id_idx", _column, jobs.c.id, where=_LISTED)
_partial("akadze_jobs_failed_idx", jobs.c.finished_at, where="state = 'failed'")
_partial(
    "akadze_jobs_unique_idx",
    jobs.c.unique_key,
    unique=True,
    where="unique_key IS NOT NULL AND state = ANY (unique_states)",
)
_partial(
    "akadze_jobs_limit_idx",
    jobs.c.limit_grp,
    # running, spelled as the other states excluded (db/migrations/0007_limit_groups.sql says why)
    where=(
        "limit_grp IS NOT NULL AND state NOT IN "
        f"({', '.join(repr(s.value) for s in JobState if s is not JobState.RUNNING)})"
    ),
)
# a limit group's parked jobs in claim order (db/migrations/0015_limit_parking.sql)
_partial(
    "akadze_jobs_limit_parked_idx",
    jobs.c.limit_grp,
    *_claim_order(),
    postgresql_include=["queue"],
    where="state = 'queued' AND parked = 'limit'",
)
# a workflow's unfinished steps (db/migrations/0016_workflows.sql) and its finished ones (0017)
_partial(
    "akadze_jobs_workflow_open_idx",
    jobs.c.workflow_id,
    where="workflow_id IS NOT NULL AND state IN ('queued', 'running')",
)
_partial(
    "akadze_jobs_workflow_done_idx",
    jobs.c.workflow_id,
    where="workflow_id IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled')",
)

workflows = Table(
    "akadze_workflows",
    metadata,
    *_key(id=BigInteger),
    Column("name", Text),
    *_required(created_at=_TZ),
)

# one row per edge: the child step waits for the parent step
job_deps = Table(
    "akadze_job_deps",
    metadata,
    *_key(parent_id=BigInteger, child_id=BigInteger),
)
Index("akadze_job_deps_child_idx", job_deps.c.child_id, job_deps.c.parent_id)

workers = Table(
    "akadze_workers",
    metadata,
    *_key(id=UUID(as_uuid=False)),
    *_required(
        name=Text,
        host=Text,
        pid=Integer,
        queues=ARRAY(Text),
        slots=Integer,
        lost_after_s=Double,
        started_at=_TZ,
        heartbeat_at=_TZ,
    ),
)

task_schemas = Table(
    "akadze_task_schemas",
    metadata,
    Column("worker_id", UUID(as_uuid=False), ForeignKey(workers.c.id, ondelete="CASCADE"), primary_key=True),
    *_key(task=Text),
    *_required(queue=Text, args_fp=Text),
)

schedule_runs = Table(
    "akadze_schedule_runs",
    metadata,
    *_key(schedule=Text, fire_at=_TZ),
    Column("job_id", BigInteger),
    *_required(created_at=_TZ),
)
Index("akadze_schedule_runs_created_idx", schedule_runs.c.created_at)


class Xid8(UserDefinedType[int]):
    """PostgreSQL's 64-bit transaction id."""

    cache_ok = True

    def get_col_spec(self, **kw: object) -> str:
        """The column type as DDL: ``xid8``."""
        return "xid8"


# Limit groups (db/migrations/0007_limit_groups.sql)
limit_groups = Table(
    "akadze_limit_groups",
    metadata,
    *_key(grp=Text),
    *_required(
        running=Integer,
        starts=ARRAY(_TZ),
        started=ARRAY(BigInteger),
        granted=Integer,
        taken_by=Xid8,
        taken_at=_TZ,
    ),
    # when a claim should look at the group's parked jobs next (0015_limit_parking.sql)
    Column("due_at", _TZ),
)
_partial("akadze_limit_groups_due_idx", limit_groups.c.due_at, where="due_at IS NOT NULL")

# the groups of jobs parked by the enqueue that wrote them, until a claim reads them
# (0018_limit_arrivals.sql)
limit_arrivals = Table("akadze_limit_arrivals", metadata, *_required(queue=Text, task=Text, grp=Text))
Index("akadze_limit_arrivals_idx", limit_arrivals.c.queue, limit_arrivals.c.task, limit_arrivals.c.grp)

queue_pauses = Table(
    "akadze_queue_pauses",
    metadata,
    *_key(queue=Text),
    *_required(paused_at=_TZ),
)

# the key that signs the dashboard's CSRF tokens (db/migrations/0013_web_secret.sql)
web_secret = Table(
    "akadze_web_secret",
    metadata,
    *_key(id=Integer),
    *_required(secret=Text, created_at=_TZ),
)

# the dashboard's trends (db/migrations/0014_job_trends.sql, akadze/worker/trends.py)
job_stats = Table(
    "akadze_job_stats",
    metadata,
    *_key(minutes=Integer, at=_TZ, queue=Text, task=Text, state=Text),
    *_required(jobs=Integer, run_buckets=ARRAY(SmallInteger), run_counts=ARRAY(Integer)),
)

job_stats_mark = Table(
    "akadze_job_stats_mark",
    metadata,
    *_key(id=Integer),
    *_required(minutes_until=_TZ, hours_until=_TZ),
)
