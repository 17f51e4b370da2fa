"""The statements of a worker's claim cycle as server-side functions, for connections behind a
pooler.

Behind a pooler in transaction mode nothing stays prepared on a server (db/prepared.py), so
PostgreSQL plans every statement it is sent. The claims are big statements (a recursive walk
of the priority levels, the outcomes written in the same statement): planning one cost about
as much as running it (0.75 ms against 0.3 ms for the claim that writes outcomes, on an empty
queue), and a worker behind PgBouncer drained 0.66x the direct rate. A PL/pgSQL function keeps
the plan of its query for the life of the server's session, whichever client the pooler hands
it to: the client sends ``SELECT * FROM akadze_claim_completing_<digest>(...)``, which costs
next to nothing to plan.

Each function runs its statement's own text (db/sql), read from the same file at the same
time, with the session settings a direct claim connection gets (generic_plans.sql: the
generic plan, no JIT), set for the call only. Its name ends in a digest of its definition, so
a function is never a second copy that can drift: ``akadze db migrate`` (and Alembic's
``upgrade``, and ``akadze db sql``) create the functions of the statements of this version
beside those of earlier versions, and a worker calls the one of its own statement text. Older
versions' functions stay for the workers of a rolling deploy; a worker that finds none of its
own (a database migrated by another version) runs the statement itself, planned at each call.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

from sqlalchemy.dialects import postgresql

from akadze.db.sql import JSON_COLUMNS, ROW_COLUMNS, Statement, statement
from akadze.db.tables import jobs

#: the statements that have a function form (what a worker sends at every claim cycle), and the
#: columns each returns beyond a job's row, with their types
POOLED: dict[str, tuple[tuple[str, str], ...]] = {
    "claim_completing": (("written", "boolean"), ("notified", "boolean")),
    "claim_completing_plain": (("written", "boolean"), ("notified", "boolean")),
    "claim_completing_plain_many": (("written", "boolean"), ("notified", "boolean")),
    "claim_limited": (("more", "boolean"),),
}

_CAST = re.compile(r"CAST\(:([A-Za-z_]\w*) AS ([^)]+)\)")


def _row_types() -> dict[str, str]:
    """A job row's columns as the statements return them: the JSON columns as text."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy's dialect is untyped
    return {
        name: "text" if name in JSON_COLUMNS else str(jobs.c[name].type.compile(dialect=dialect)).lower()
        for name in ROW_COLUMNS
    }


def parameter_types(stmt: Statement) -> tuple[str, ...]:
    """The types of ``stmt``'s parameters, in its ``$n`` order: each parameter of a pooled
    statement is cast where it is used (``CAST(:queues AS text[])``), and the first cast says."""
    casts: dict[str, str] = {}
    for name, kind in _CAST.findall(stmt.source):
        casts.setdefault(name, kind)
    missing = [name for name in stmt.params if name not in casts]
    if missing:
        raise ValueError(
            f"{stmt.name}.sql: cast each parameter of a pooled statement where it is used: {missing}"
        )
    return tuple(casts[name] for name in stmt.params)


def _definition(name: str) -> str:
    """The function of statement ``name``, with ``{name}`` where its name goes."""
    stmt = statement(name)
    columns = [*_row_types().items(), *POOLED[name]]
    returns = ",\n    ".join(f"{column} {kind}" for column, kind in columns)
    return (
        f"-- {name}({', '.join(stmt.params)})\n"
        f"CREATE OR REPLACE FUNCTION {{name}}({', '.join(parameter_types(stmt))})\n"
        f"RETURNS TABLE (\n    {returns}\n)\n"
        "LANGUAGE plpgsql VOLATILE\n"
        "SET plan_cache_mode = force_generic_plan\n"
        "SET jit = off\n"
        "AS $akadze$\n"
        "#variable_conflict use_column\n"
        f"BEGIN\nRETURN QUERY\n{stmt.pg};\nEND\n$akadze$;\n"
    )


@cache
def function_name(name: str) -> str:
    """The name of statement ``name``'s function: ``akadze_<name>_<digest of its definition>``."""
    digest = hashlib.sha256(_definition(name).encode()).hexdigest()[:12]
    return f"akadze_{name}_{digest}"


def function_ddl(name: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` for statement ``name``, as migrate runs it."""
    return _definition(name).replace("{name}", function_name(name), 1)


def functions_sql() -> str:
    """Every pooled statement's function, as one script (idempotent)."""
    return "\n".join(function_ddl(name) for name in POOLED)


def call(stmt: Statement) -> str:
    """The statement that runs ``stmt`` through its function: its parameters in the same order,
    its rows under the same column names."""
    args = ", ".join(f"${n}" for n in range(1, len(stmt.params) + 1))
    return f"SELECT * FROM {function_name(stmt.name)}({args})"
