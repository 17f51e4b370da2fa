"""SQLAlchemy Core tables for the statements composed at run time (the jobs listing).

The schema itself is defined by db/migrations; a test checks that these match it.
"""

from __future__ import annotations

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
from sqlalchemy.types import UserDefinedType

from akadze.job import FINISHED_STATES, JobState

metadata = MetaData()

# JSON columns are read as text and decoded by msgspec, as on the hot path.
jobs = Table(
    "akadze_jobs",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("task", Text, nullable=False),
    Column("queue", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("args", JSONB(none_as_null=True), nullable=False),
    Column("args_fp", Text),
    Column("attempt", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("run", Integer, nullable=False),
    Column("run_at", TIMESTAMP(timezone=True), nullable=False),
    Column("expires_at", TIMESTAMP(timezone=True)),
    Column("cancel_requested", Boolean, nullable=False),
    Column("errors", JSONB, nullable=False),
    Column("result", JSONB),
    Column("worker_id", UUID(as_uuid=False)),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False),
    Column("started_at", TIMESTAMP(timezone=True)),
    Column("finished_at", TIMESTAMP(timezone=True)),
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
Index(
    "akadze_jobs_claim_idx",
    jobs.c.queue,
    jobs.c.priority.desc(),
    jobs.c.run_at,
    jobs.c.id,
    postgresql_where=text("state = 'queued' AND parked IS NULL"),
)
Index(
    "akadze_jobs_claim_many_idx",
    jobs.c.priority.desc(),
    jobs.c.run_at,
    jobs.c.id,
    postgresql_where=text("state = 'queued' AND queue <> '' AND parked IS NULL"),
)
Index(
    "akadze_jobs_parked_idx",
    jobs.c.queue,
    jobs.c.parked,
    postgresql_where=text("state = 'queued' AND parked IS NOT NULL"),
)
Index("akadze_jobs_running_idx", jobs.c.worker_id, postgresql_where=text("state = 'running'"))
Index(
    "akadze_jobs_prune_idx",
    jobs.c.finished_at,
    postgresql_where=text(_FINISHED),
)
# the dashboard's keyset listing of failed and cancelled rows (one per filter; succeeded rows
# are listed from the primary key: migration 0009) and its failures of the last hour
for _column in (jobs.c.state, jobs.c.task, jobs.c.queue):
    Index(
        f"akadze_jobs_{_column.name}_id_idx",
        _column,
        jobs.c.id,
        postgresql_where=text(_LISTED),
    )
Index("akadze_jobs_failed_idx", jobs.c.finished_at, postgresql_where=text("state = 'failed'"))
Index(
    "akadze_jobs_unique_idx",
    jobs.c.unique_key,
    unique=True,
    postgresql_where=text("unique_key IS NOT NULL AND state = ANY (unique_states)"),
)
Index(
    "akadze_jobs_limit_idx",
    jobs.c.limit_grp,
    # running, spelled as the other states excluded (db/migrations/0007_limit_groups.sql says why)
    postgresql_where=text(
        "limit_grp IS NOT NULL AND state NOT IN "
        f"({', '.join(repr(s.value) for s in JobState if s is not JobState.RUNNING)})"
    ),
)
# a limit group's parked jobs in claim order (db/migrations/0015_limit_parking.sql)
Index(
    "akadze_jobs_limit_parked_idx",
    jobs.c.limit_grp,
    jobs.c.priority.desc(),
    jobs.c.run_at,
    jobs.c.id,
    postgresql_include=["queue"],
    postgresql_where=text("state = 'queued' AND parked = 'limit'"),
)
# a workflow's unfinished steps (db/migrations/0016_workflows.sql) and its finished ones (0017)
Index(
    "akadze_jobs_workflow_open_idx",
    jobs.c.workflow_id,
    postgresql_where=text("workflow_id IS NOT NULL AND state IN ('queued', 'running')"),
)
Index(
    "akadze_jobs_workflow_done_idx",
    jobs.c.workflow_id,
    postgresql_where=text("workflow_id IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled')"),
)

workflows = Table(
    "akadze_workflows",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("name", Text),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False),
)

# one row per edge: the child step waits for the parent step
job_deps = Table(
    "akadze_job_deps",
    metadata,
    Column("parent_id", BigInteger, primary_key=True),
    Column("child_id", BigInteger, primary_key=True),
)
Index("akadze_job_deps_child_idx", job_deps.c.child_id, job_deps.c.parent_id)

workers = Table(
    "akadze_workers",
    metadata,
    Column("id", UUID(as_uuid=False), primary_key=True),
    Column("name", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("queues", ARRAY(Text), nullable=False),
    Column("slots", Integer, nullable=False),
    Column("lost_after_s", Double, nullable=False),
    Column("started_at", TIMESTAMP(timezone=True), nullable=False),
    Column("heartbeat_at", TIMESTAMP(timezone=True), nullable=False),
)

task_schemas = Table(
    "akadze_task_schemas",
    metadata,
    Column("worker_id", UUID(as_uuid=False), ForeignKey(workers.c.id, ondelete="CASCADE"), primary_key=True),
    Column("task", Text, primary_key=True),
    Column("queue", Text, nullable=False),
    Column("args_fp", Text, nullable=False),
)

schedule_runs = Table(
    "akadze_schedule_runs",
    metadata,
    Column("schedule", Text, primary_key=True),
    Column("fire_at", TIMESTAMP(timezone=True), primary_key=True),
    Column("job_id", BigInteger),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False),
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
    Column("grp", Text, primary_key=True),
    Column("running", Integer, nullable=False),
    Column("starts", ARRAY(TIMESTAMP(timezone=True)), nullable=False),
    Column("started", ARRAY(BigInteger), nullable=False),
    Column("granted", Integer, nullable=False),
    Column("taken_by", Xid8, nullable=False),
    Column("taken_at", TIMESTAMP(timezone=True), nullable=False),
    # when a claim should look at the group's parked jobs next (0015_limit_parking.sql)
    Column("due_at", TIMESTAMP(timezone=True)),
)
Index(
    "akadze_limit_groups_due_idx",
    limit_groups.c.due_at,
    postgresql_where=text("due_at IS NOT NULL"),
)

queue_pauses = Table(
    "akadze_queue_pauses",
    metadata,
    Column("queue", Text, primary_key=True),
    Column("paused_at", TIMESTAMP(timezone=True), nullable=False),
)

# the key that signs the dashboard's CSRF tokens (db/migrations/0013_web_secret.sql)
web_secret = Table(
    "akadze_web_secret",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("secret", Text, nullable=False),
    Column("created_at", TIMESTAMP(timezone=True), nullable=False),
)

# the dashboard's trends (db/migrations/0014_job_trends.sql, akadze/worker/trends.py)
job_stats = Table(
    "akadze_job_stats",
    metadata,
    Column("minutes", Integer, primary_key=True),
    Column("at", TIMESTAMP(timezone=True), primary_key=True),
    Column("queue", Text, primary_key=True),
    Column("task", Text, primary_key=True),
    Column("state", Text, primary_key=True),
    Column("jobs", Integer, nullable=False),
    Column("run_buckets", ARRAY(SmallInteger), nullable=False),
    Column("run_counts", ARRAY(Integer), nullable=False),
)

job_stats_mark = Table(
    "akadze_job_stats_mark",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("minutes_until", TIMESTAMP(timezone=True), nullable=False),
    Column("hours_until", TIMESTAMP(timezone=True), nullable=False),
)
