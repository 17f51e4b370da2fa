"""How a Queries method runs its statement on either kind of connection.

A method takes either a SQLAlchemy ``AsyncConnection`` (a caller's transaction, or the path
that runs on_transition hooks) or the raw asyncpg connection under one (the worker's hot path,
autocommit). Both run the same statement text (db/sql.py keeps both placeholder forms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.db.prepared import STALE, described, forget, prepared
from akadze.db.sql import Statement

Connection = Any  # AsyncConnection, or the asyncpg.Connection under one (asyncpg is untyped)


async def fetch(conn: Connection, stmt: Statement, params: Mapping[str, Any]) -> Sequence[Any]:
    """The statement's rows (none for a statement that returns none)."""
    if isinstance(conn, AsyncConnection):
        result = await conn.execute(stmt.clause, dict(params))
        return result.mappings().all() if result.returns_rows else []
    args = [params[name] for name in stmt.params]
    ready = await prepared(conn, stmt)
    if ready is not None:
        try:
            found: Sequence[Any] = await ready.fetch(*args)
            return found
        except STALE:
            forget(conn, stmt)
    elif (ready := await described(conn, stmt)) is not None:  # behind a pooler
        try:
            described_rows: Sequence[Any] = await ready.fetch(*args)
            return described_rows
        except Exception:
            forget(conn, stmt)  # described again at the next run (a schema change, say)
            raise
    rows: Sequence[Any] = await conn.fetch(stmt.pg, *args)
    return rows


async def execute(conn: Connection, stmt: Statement, params: Mapping[str, Any]) -> None:
    """fetch for a statement whose rows, if any, the caller does not need."""
    await fetch(conn, stmt, params)
