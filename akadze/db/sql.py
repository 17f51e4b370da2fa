"""Loads db/sql/*.sql once and keeps each statement in both placeholder forms.

The files use named parameters (``:name``), which SQLAlchemy's ``text()`` takes as they are;
the raw asyncpg form replaces them with ``$n`` once, here, at load. Only whole-line ``--``
comments are allowed in the files (they are dropped before the parameters are read).

A file may name a fragment in braces, expanded here at load, for what several statements must
spell alike: ``{job_row}``, the column list of a job's row as ``akadze.codec.stored.row_to_job``
reads it (ROW_COLUMNS); ``{claim_set}`` and ``{claim_returning}``, how every claim statement
starts a job and what it returns; ``{claimed_reply}`` and ``{written_reply}``, the two halves of
claim_completing's reply; ``{new_job_columns}``, ``{new_job_values}`` and ``{due_at}``, what every enqueue
writes; ``{unique_inserted_row}`` and ``{unique_holder_row}``, a unique
enqueue's reply; ``{prune_lock}`` and ``{prune_reply}``, a pruner batch's lock and the reply
its caller reads. Fragments are constants of this module, never user input.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from functools import cache

from sqlalchemy import TextClause, text

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

#: NOTIFY channel of ready jobs (payload: the queue's name); workers LISTEN on it
JOBS_CHANNEL = "akadze_jobs"
#: NOTIFY channel of finished jobs someone waits for (payload: the job's id); app.wait_for
DONE_CHANNEL = "akadze_done"

#: a job's row as akadze.codec.stored.row_to_job reads it: Job's fields that are columns, in Job's order
JOB_COLUMNS = (
    "id",
    "task",
    "queue",
    "state",
    "priority",
    "args",
    "attempt",
    "max_attempts",
    "run",
    "run_at",
    "expires_at",
    "cancel_requested",
    "errors",
    "result",
    "worker_id",
    "args_fp",
    "created_at",
    "started_at",
    "finished_at",
    "trace_context",
    "workflow_id",
    "step",
)
#: read as text and decoded per row, so that one row that cannot be decoded does not fail the
#: rows read with it (akadze/codec/stored.py)
JSON_COLUMNS = frozenset({"args", "errors", "result"})


#: a job row's columns: JOB_COLUMNS, then trace_parent, the 25 bytes of a stored traceparent
#: (migration 0010), which akadze.codec.stored.row_to_job makes the JSON of Job.trace_context when
#: trace_context is NULL. Made there, not in SQL: the statement's three substrings, hex
#: encodings and concatenations cost the claim of 50 traced jobs about 220 µs of the server's
#: time, in the claim's critical path (docs/performance.md)
ROW_COLUMNS = (*JOB_COLUMNS, "trace_parent")


def _job_row(*, result: bool, table: str = "", named: bool = True) -> str:
    def column(name: str) -> str:
        if name == "result" and not result:
            return "NULL AS result"
        qualified = f"{table}.{name}" if table else name
        if name not in JSON_COLUMNS:
            return qualified
        return f"CAST({qualified} AS text) AS {name}" if named else f"CAST({qualified} AS text)"

    return ",\n    ".join(column(name) for name in ROW_COLUMNS)


def _claim_set() -> str:
    """The claimed job ``j`` as it starts, or as it ends at once when it was cancelled or
    expired before its run (no attempt spent)."""
    gone = "j.cancel_requested OR j.expires_at <= now()"
    return ",\n    ".join(
        [
            f"state = CASE WHEN {gone} THEN 'cancelled' ELSE 'running' END",
            f"attempt = CASE WHEN {gone} THEN j.attempt ELSE j.attempt + 1 END",
            "run = j.run + 1",
            f"worker_id = CASE WHEN {gone} THEN NULL ELSE CAST(:worker_id AS uuid) END",
            f"started_at = CASE WHEN {gone} THEN j.started_at ELSE now() END",
            f"finished_at = CASE WHEN {gone} THEN now() END",
        ]
    )


#: the job columns an outcome's write returns (akadze.outcomes.Completed)
_COMPLETED = frozenset({"id", "task", "queue", "state", "attempt", "run", "run_at"})

#: the columns of a new job that its insert returns; the others are known to the caller
_INSERTED = frozenset({"id", "run_at", "created_at"})


def _inserted_row() -> str:
    return ",\n    ".join(f"job.{name}" if name in _INSERTED else f"NULL AS {name}" for name in ROW_COLUMNS)


#: what a workflow step's end does to the steps that wait for it (docs/workflows.md), as CTEs
#: after one named ``ended`` (id, step, state): the steps this statement ended. ``reach``: the
#: steps that may change, from the edges alone (the children of the ended steps, and through a
#: child that a failure may cancel, its children). ``locked``: those steps, locked in id
#: order (a parent's id is below its children's), read as they are now, after any wait;
#: ``waiting``: those still waiting, so a step released or cancelled by another statement
#: meanwhile is left alone. ``doomed``: the
#: waiting steps cancelled by a failed or cancelled parent, level by level (after_failure
#: 'cancel'). ``counted``: how many parents each other waiting step sees finish here (the
#: succeeded ones, and for after_failure 'run' every end, the doomed parents included).
#: ``settled`` writes them once each: cancelled with a DependencyFailed entry naming the first
#: such parent, or deps_left lowered and, at 0, released (parked NULL, run_at not before now).
#: Its rows say what it did, and it sends the NOTIFYs of what it did (RETURNING, so that they
#: go out whether or not the statement reads them).
#: Two statements ending parents of one step meet on its row lock: the second reads the first's
#: count, so a fan-in is released exactly once. With no workflow step ended, every CTE is empty.
_SETTLE_STEPS = """reach(id, failing) AS (
    -- every read of the edges is an index probe per step (OFFSET 0 keeps the planner from
    -- making it a join that reads the whole table: a generic plan cannot know how few end)
    SELECT d.child_id, e.state <> 'succeeded'
    FROM ended AS e
    CROSS JOIN LATERAL (
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = e.id OFFSET 0
    ) AS d
    UNION
    SELECT d.child_id, true
    FROM reach AS r
    CROSS JOIN LATERAL (
        SELECT c.after_failure FROM akadze_jobs AS c WHERE c.id = r.id OFFSET 0
    ) AS c
    CROSS JOIN LATERAL (
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = r.id OFFSET 0
    ) AS d
    WHERE r.failing
        AND c.after_failure = 'cancel'
),
locked AS MATERIALIZED (
    -- by primary key only: a test of state or parked here would let a plan walk every parked
    -- job's entry (akadze_jobs_parked_idx) at every claim
    SELECT w.id, w.step, w.after_failure, w.state = 'queued' AND w.parked = 'deps' AS waits
    FROM akadze_jobs AS w
    WHERE w.id = ANY (ARRAY(SELECT DISTINCT reach.id FROM reach))
    ORDER BY w.id
    FOR UPDATE
),
waiting AS (
    SELECT locked.id, locked.step, locked.after_failure
    FROM locked
    WHERE locked.waits
),
doomed(id, step, cause, cause_state) AS (
    SELECT l.id, l.step, e.step, e.state
    FROM ended AS e
    CROSS JOIN LATERAL (
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = e.id OFFSET 0
    ) AS d
    JOIN waiting AS l ON l.id = d.child_id
    WHERE e.state <> 'succeeded'
        AND l.after_failure = 'cancel'
    UNION
    SELECT l.id, l.step, p.step, 'cancelled'
    FROM doomed AS p
    CROSS JOIN LATERAL (
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = p.id OFFSET 0
    ) AS d
    JOIN waiting AS l ON l.id = d.child_id
    WHERE l.after_failure = 'cancel'
),
counted AS (
    SELECT f.id, count(*) AS n
    FROM (
        SELECT d.child_id AS id, e.state = 'succeeded' AS ok
        FROM ended AS e
        CROSS JOIN LATERAL (
            SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = e.id OFFSET 0
        ) AS d
        UNION ALL
        SELECT d.child_id, false
        FROM (SELECT DISTINCT doomed.id FROM doomed) AS p
        CROSS JOIN LATERAL (
            SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = p.id OFFSET 0
        ) AS d
    ) AS f
    JOIN waiting AS l ON l.id = f.id
    WHERE (f.ok OR l.after_failure = 'run')
        AND l.id NOT IN (SELECT doomed.id FROM doomed)
    GROUP BY f.id
),
settled AS (
    UPDATE akadze_jobs AS j
    SET
        state = CASE WHEN s.cause IS NULL THEN j.state ELSE 'cancelled' END,
        finished_at = CASE WHEN s.cause IS NULL THEN j.finished_at ELSE now() END,
        errors = CASE
            WHEN s.cause IS NULL THEN j.errors
            ELSE (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END)
                || jsonb_build_array(jsonb_build_object(
                    'attempt', j.attempt,
                    'at', now(),
                    'type', 'akadze.DependencyFailed',
                    'message', format('step %s ended %s', quote_literal(s.cause), s.cause_state)
                ))
        END,
        deps_left = CASE WHEN s.cause IS NULL THEN j.deps_left - s.n ELSE j.deps_left END,
        parked = CASE WHEN s.cause IS NULL AND j.deps_left - s.n <= 0 THEN NULL ELSE j.parked END,
        run_at = CASE
            WHEN s.cause IS NULL AND j.deps_left - s.n <= 0 THEN greatest(j.run_at, now())
            ELSE j.run_at
        END
    FROM (
        SELECT l.id, m.cause, m.cause_state, COALESCE(c.n, 0) AS n
        FROM waiting AS l
        LEFT JOIN (
            SELECT DISTINCT ON (doomed.id) doomed.id, doomed.cause, doomed.cause_state
            FROM doomed
            ORDER BY doomed.id, doomed.cause
        ) AS m ON m.id = l.id
        LEFT JOIN counted AS c ON c.id = l.id
        WHERE m.id IS NOT NULL OR c.n > 0
    ) AS s
    WHERE j.id = s.id
        AND j.id = ANY (ARRAY(SELECT waiting.id FROM waiting))
    -- a step released and ready now wakes the workers of its queue (one NOTIFY per queue and
    -- transaction: PostgreSQL folds repeats); a cancelled one a waiter marked (mark_awaited)
    -- sends its id on akadze_done. Here, so that it happens whether or not the reply is read
    RETURNING
        j.id,
        j.task,
        j.queue,
        j.state,
        j.attempt,
        j.run,
        j.run_at,
        j.parked,
        CASE
            WHEN j.state = 'queued' AND j.parked IS NULL AND j.run_at <= now()
            THEN pg_notify('akadze_jobs', j.queue) IS NULL
            WHEN j.awaited AND j.state = 'cancelled'
            THEN pg_notify('akadze_done', CAST(j.id AS text)) IS NULL
        END AS notified
)"""

#: {name} in a .sql file -> its text
FRAGMENTS = {
    # a workflow step's end: its waiting children released or cancelled (_SETTLE_STEPS)
    "settle_steps": _SETTLE_STEPS,
    # a whole job, the JSON columns as text
    "job_row": _job_row(result=True),
    # a job as the claim returns it: a job about to run has no result it needs
    "claimed_job_row": _job_row(result=False),
    # the end of every claim statement (claim_completing, claim_limited): the claimed job
    # ``j`` as it starts (or ends cancelled at once: cancel requested or expired before its
    # run) and as the claim returns it
    "claim_set": _claim_set(),
    "claim_returning": "RETURNING\n    " + _job_row(result=False, table="j"),
    # claim_limited.sql's last row, which says only that it parked jobs: no job's columns
    "no_job_row": ", ".join(f"NULL AS {name}" for name in ROW_COLUMNS),
    # claim_completing.sql's reply: the claimed jobs' row, and the written jobs' row in the same
    # columns (complete's slim row: the others NULL)
    "claimed_reply": ", ".join(f"claimed.{name}" for name in ROW_COLUMNS),
    "written_reply": ", ".join(
        f"done.{name}" if name in _COMPLETED else f"NULL AS {name}" for name in ROW_COLUMNS
    ),
    # and the workflow steps the written ends released or cancelled ({settle_steps})
    "settled_reply": ", ".join(f"settled.{name}" if name in _COMPLETED else "NULL" for name in ROW_COLUMNS),
    # what every enqueue writes from its parameters, in this order (the columns, then the values)
    "new_job_columns": "task, queue, priority, args, args_fp, max_attempts",
    "new_job_values": (
        ":task,\n        :queue,\n        :priority,\n        CAST(:args AS jsonb),\n"
        "        :args_fp,\n        :max_attempts"
    ),
    # when a new job is due: run_at if given, else now plus the delay (0 for a job due now)
    "due_at": (
        "COALESCE(CAST(:run_at AS timestamptz),"
        " now() + make_interval(secs => CAST(:delay_s AS double precision)))"
    ),
    # a unique key's window suffix: the number of the period now falls in (none without a period)
    "unique_window": (
        "COALESCE(\n        ':' || CAST(CAST(floor(CAST(extract(epoch FROM now()) AS double precision)"
        " / CAST(:period_s AS double precision)) AS bigint) AS text),\n        ''\n    )"
    ),
    # a unique enqueue's reply: the job it inserted (``job``: what the database decided), or
    # the job ``e`` that holds the key, whole; the same columns as {job_row}
    "unique_inserted_row": _inserted_row(),
    "unique_holder_row": _job_row(result=True, table="e", named=False),
    # a pruner batch's CTE: one pruner at a time, through a transaction-scoped try-lock (no
    # session state, so it passes PgBouncer in transaction mode; a busy lock skips the batch)
    "prune_lock": "pruner AS (\n    SELECT pg_try_advisory_xact_lock(CAST(:lock_key AS bigint)) AS locked\n)",
    # a pruner batch's reply, after its CTE ``gone`` deleted: whether it held the lock, how many went
    "prune_reply": (
        "SELECT\n"
        "    (SELECT pruner.locked FROM pruner) AS locked,\n"
        "    (SELECT count(*) FROM gone) AS deleted"
    ),
}
_FRAGMENT = re.compile(r"\{(" + "|".join(FRAGMENTS) + r")\}")


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement file, parsed once: its SQL in the two forms akadze's connections take."""

    name: str
    #: the file's SQL without comments, with :name parameters
    source: str
    #: for SQLAlchemy connections
    clause: TextClause
    #: for raw asyncpg connections: $1, $2... in the order of ``params``
    pg: str
    params: tuple[str, ...]


def _uncommented(raw: str) -> str:
    """``raw`` without its comment lines (the files' comments are whole lines)."""
    return "\n".join(line for line in raw.splitlines() if not line.lstrip().startswith("--"))


def parse(name: str, raw: str) -> Statement:
    """``raw``, a file's text, as a Statement: comment lines dropped, ``{fragment}`` names of
    FRAGMENTS expanded (other braces are left alone), each ``:param`` numbered in order of first
    use for asyncpg (a ``::`` cast is not a parameter). Pure; it does not check the SQL."""
    body = _uncommented(raw)
    body = _FRAGMENT.sub(lambda match: FRAGMENTS[match[1]], body.strip())
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match[1]
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}"

    pg = _PARAM.sub(number, body)
    return Statement(name, body, text(body), pg, tuple(order))


def statements() -> dict[str, Statement]:
    """Every statement of akadze/db/sql, by name (tests and tools: the hot paths ask for one)."""
    folder = importlib.resources.files("akadze.db") / "sql"
    found = {
        entry.name.removesuffix(".sql"): statement(entry.name.removesuffix(".sql"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }
    return found


@cache
def statement(name: str) -> Statement:
    """The statement of akadze/db/sql/NAME.sql, read and parsed at its first use (reading all
    forty files at once cost a process's first enqueue about 4 ms)."""
    return parse(name, _source(name))


def _source(name: str) -> str:
    return (importlib.resources.files("akadze.db") / "sql" / f"{name}.sql").read_text(encoding="utf-8")
