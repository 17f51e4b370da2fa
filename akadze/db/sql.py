"""Loads db/sql/*.sql once and keeps each statement in both placeholder forms.

The files use named parameters (``:name``), which SQLAlchemy's ``text()`` takes as they are;
the raw asyncpg form replaces them with ``$n`` once, here, at load. Only whole-line ``--``
comments are allowed in the files (they are dropped before the parameters are read).

A file may name a fragment in braces, expanded here at load, for what several statements must
spell alike: ``{job_row}``, the column list of a job's row as ``akadze.codec.stored.row_to_job``
reads it (ROW_COLUMNS); ``{claim_set}`` and ``{claim_returning}``, how every claim statement
starts a job and what it returns, and ``{claim_gone}``, whether the job ends at once instead;
``{claimed_reply}`` and ``{written_reply}``, the two halves of the worker claim's reply;
``{new_job_columns}``, ``{new_job_values}`` (``{batch_job_values}`` per element of a batch,
``{unique_job_values}`` per unique item; expiry and trace context included) and
``{due_at}``, what every enqueue writes; ``{parked_group}`` (``{batch_parked_group}``), a parked
job's limit group; ``{unique_inserted_row}`` and ``{unique_holder_row}``, a
unique enqueue's reply; ``{prune_lock}`` and ``{prune_reply}``, a pruner batch's lock and the
reply its caller reads. Fragments are constants of this module or files of db/sql/fragments/
(the longer ones, written as SQL: ``{settle_steps}``, what a workflow step's end does to the
steps after it; ``{write_outcomes}``, ``{ready_jobs}`` (``{per_queue}`` and ``{across_queues}``),
``{claim_plain}`` and ``{claim_reply}``, the parts the forms of the worker's claim share), never
user input. A file fragment is written from column 0
and may name other fragments; its lines are indented as the line that names it, so that a
statement renders as if it were written out whole.
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


#: a claimed job ``j`` that ends at once, cancelled: a cancel was requested or it expired before
#: its run (true; NULL or false: it starts)
_GONE = "j.cancel_requested OR j.expires_at <= now()"


def _claim_set() -> str:
    """The claimed job ``j`` as it starts, or as it ends at once when it was cancelled or
    expired before its run (no attempt spent)."""
    gone = _GONE
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


def _new_job_values(args: str) -> str:
    """What an enqueue writes for {new_job_columns}, the arguments being ``args`` (SQL)."""
    return ",\n        ".join(
        (
            ":task",
            ":queue",
            ":priority",
            args,
            ":args_fp",
            ":max_attempts",
            "CAST(:expires_at AS timestamptz)",
            ":trace_context",
            "CAST(:trace_parent AS bytea)",
        )
    )


def _parked_group(args: str) -> str:
    """The limit group of a job whose arguments are ``args`` (SQL), as claim_limited.sql names it."""
    return f"CAST(jsonb_build_array(CAST(:task AS text), {args} -> CAST(:limit_key AS text)) AS text)"


#: {name} in a .sql file -> its text
FRAGMENTS = {
    # a whole job, the JSON columns as text
    "job_row": _job_row(result=True),
    # a job as the claim returns it: a job about to run has no result it needs
    "claimed_job_row": _job_row(result=False),
    # the end of every claim statement (claim_completing, claim_limited): the claimed job
    # ``j`` as it starts (or ends cancelled at once: cancel requested or expired before its
    # run) and as the claim returns it
    "claim_set": _claim_set(),
    "claim_returning": "RETURNING\n    " + _job_row(result=False, table="j"),
    # whether the claimed job ``j`` ends at its claim ({claim_set}): true, or NULL or false
    "claim_gone": _GONE,
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
    # what every enqueue writes from its parameters, in this order (the columns, then the values;
    # enqueue_workflow.sql writes the values per step)
    "new_job_columns": ", ".join(
        (
            "task",
            "queue",
            "priority",
            "args",
            "args_fp",
            "max_attempts",
            "expires_at",
            "trace_context",
            "trace_parent",
        )
    ),
    "new_job_values": _new_job_values("CAST(:args AS jsonb)"),
    # the same, per element ``a.args`` of a batch's JSON array (enqueue_batch, enqueue_parked_batch)
    "batch_job_values": _new_job_values("a.args"),
    "unique_job_values": _new_job_values("item.args"),
    # a job's limit group as a producer that knows the Limit parks it (enqueue_parked*.sql): the
    # text claim_limited.sql computes, the task and the key argument's stored JSON (:limit_key)
    "parked_group": _parked_group("CAST(:args AS jsonb)"),
    "batch_parked_group": _parked_group("a.args"),
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


@cache
def _file_fragments() -> dict[str, str]:
    """db/sql/fragments/NAME.sql -> its text without comment lines: the fragments written as
    SQL (a statement's CTEs that several statements run alike), expanded like FRAGMENTS."""
    folder = importlib.resources.files("akadze.db") / "sql" / "fragments"
    return {
        entry.name.removesuffix(".sql"): _uncommented(entry.read_text(encoding="utf-8")).strip()
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }


@cache
def _fragment_pattern() -> re.Pattern[str]:
    """``{name}`` of every fragment, in code or in a file (other braces are not fragments)."""
    return re.compile(r"\{(" + "|".join([*FRAGMENTS, *_file_fragments()]) + r")\}")


@cache
def _file_fragment(name: str) -> str:
    """The file fragment NAME, the fragments it names expanded (a file's lines are written from
    column 0: see _expand)."""
    return _expand(_file_fragments()[name])


def _expand(body: str) -> str:
    """``body`` with its ``{fragment}`` names expanded. A file fragment's lines after its first
    are indented as the line that names it, so that a statement renders as if it were written
    out whole; a code fragment is put as it is."""

    def fragment(match: re.Match[str]) -> str:
        name = match[1]
        if name in FRAGMENTS:
            return FRAGMENTS[name]
        line = body[body.rfind("\n", 0, match.start()) + 1 : match.start()]
        indent = line[: len(line) - len(line.lstrip())]
        first, *others = _file_fragment(name).split("\n")
        return "\n".join([first, *(indent + other if other else other for other in others)])

    return _fragment_pattern().sub(fragment, body)


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
    FRAGMENTS or of db/sql/fragments expanded (other braces are left alone), each ``:param``
    numbered in order of first use for asyncpg (a ``::`` cast is not a parameter). Pure; it
    does not check the SQL."""
    body = _uncommented(raw)
    body = _expand(body.strip())
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
