"""The statements of a worker's claim cycle as server-side functions, for connections behind a
pooler.

Behind a pooler in transaction mode nothing stays prepared on a server (db/prepared.py), so
PostgreSQL plans every statement it is sent. The claims are big statements (a recursive walk
of the priority levels, the outcomes written in the same statement): planning one cost about
as much as running it (0.75 ms against 0.3 ms for claim_many_completing on an empty queue),
and a worker behind PgBouncer drained 0.66x the direct rate. A PL/pgSQL function keeps the
plan of its query for the life of the server's session, whichever client the pooler hands it
to: the client sends ``SELECT * FROM akadze_claim(...)``, which costs next to nothing to plan.

Each function runs its statement's own text (db/sql) with the session settings a direct claim
connection gets (generic_plans.sql: the generic plan, no JIT), set for the call only. The
functions are made by a migration, which holds the text of the day; a test compares it with
:func:`function_ddl` of the statements now, so that a change to a statement's SQL comes with a
migration that replaces its function (``python -m akadze.db.pooled`` prints them).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from akadze.db.sql import Statement, statement

#: the statements that have a function form: what a worker sends at every claim cycle
POOLED = (
    "claim",
    "claim_many",
    "claim_limited",
    "claim_completing",
    "claim_many_completing",
    "complete_batch",
)


def function_name(name: str) -> str:
    return f"akadze_{name}"


def call(stmt: Statement) -> str:
    """The statement that runs ``stmt`` through its function: its parameters in the same order,
    its rows under the same column names."""
    args = ", ".join(f"${n}" for n in range(1, len(stmt.params) + 1))
    return f"SELECT * FROM {function_name(stmt.name)}({args})"


async def function_ddl(conn: Any, name: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` for statement ``name``, its parameter and column types as
    the server describes the statement on ``conn`` (an asyncpg connection to a migrated
    database)."""
    stmt = statement(name)
    described = await conn.prepare(stmt.pg)
    # unnamed: the query refers to them as $1, $2... (a name like "limit" would not even parse)
    params = ", ".join(kind.name for kind in described.get_parameters())
    columns = ",\n    ".join(f"{column.name} {column.type.name}" for column in described.get_attributes())
    return (
        f"-- {name}({', '.join(stmt.params)})\n"
        f"CREATE OR REPLACE FUNCTION {function_name(name)}({params})\n"
        f"RETURNS TABLE (\n    {columns}\n)\n"
        "LANGUAGE plpgsql VOLATILE\n"
        "SET plan_cache_mode = force_generic_plan\n"
        "SET jit = off\n"
        "AS $akadze$\n"
        "#variable_conflict use_column\n"
        f"BEGIN\nRETURN QUERY\n{stmt.pg};\nEND\n$akadze$;\n"
    )


async def _print_all(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for name in POOLED:
            print(await function_ddl(conn, name))
    finally:
        await conn.close()


if __name__ == "__main__":  # python -m akadze.db.pooled URL: the functions of today's statements
    asyncio.run(_print_all(sys.argv[1]))
