"""Loads db/sql/*.sql once and keeps each statement in both placeholder forms.

The files use named parameters (``:name``), which SQLAlchemy's ``text()`` takes as they are;
the raw asyncpg form replaces them with ``$n`` once, here, at load. Only whole-line ``--``
comments are allowed in the files (they are dropped before the parameters are read).

A file may name a fragment in braces, expanded here at load, for what several statements must
spell alike: ``{job_row}``, the column list of a job's row as ``akadze.stored.row_to_job``
reads it (JOB_COLUMNS); ``{prune_lock}`` and ``{prune_reply}``, a pruner batch's lock and the
reply its caller reads. Fragments are constants of this module, never user input.
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

#: a job's row as akadze.stored.row_to_job reads it: Job's fields that are columns, in Job's order
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
)
#: read as text and decoded per row, so that one row that cannot be decoded does not fail the
#: rows read with it (akadze/stored.py)
JSON_COLUMNS = frozenset({"args", "errors", "result"})


def _job_row(*, result: bool) -> str:
    def column(name: str) -> str:
        if name == "result" and not result:
            return "NULL AS result"
        return f"CAST({name} AS text) AS {name}" if name in JSON_COLUMNS else name

    return ",\n    ".join(column(name) for name in JOB_COLUMNS)


#: {name} in a .sql file -> its text
FRAGMENTS = {
    # a whole job, the JSON columns as text
    "job_row": _job_row(result=True),
    # a job as the claim returns it: a job about to run has no result it needs
    "claimed_job_row": _job_row(result=False),
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
    name: str
    #: the file's SQL without comments, with :name parameters
    source: str
    #: for SQLAlchemy connections
    clause: TextClause
    #: for raw asyncpg connections: $1, $2... in the order of ``params``
    pg: str
    params: tuple[str, ...]


def parse(name: str, raw: str) -> Statement:
    body = "\n".join(line for line in raw.splitlines() if not line.lstrip().startswith("--"))
    body = _FRAGMENT.sub(lambda match: FRAGMENTS[match[1]], body.strip())
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match[1]
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}"

    pg = _PARAM.sub(number, body)
    return Statement(name, body, text(body), pg, tuple(order))


@cache
def statements() -> dict[str, Statement]:
    folder = importlib.resources.files("akadze.db") / "sql"
    found = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            name = entry.name.removesuffix(".sql")
            found[name] = parse(name, entry.read_text(encoding="utf-8"))
    return found


def statement(name: str) -> Statement:
    return statements()[name]
