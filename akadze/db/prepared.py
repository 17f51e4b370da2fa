"""akadze's own statements, prepared by name on raw connections that reach PostgreSQL directly.

The engine keeps no prepared statements, so a pooler in transaction mode may stand in front of
the database (the spec). Without them asyncpg needs two round trips per statement (Parse and
Describe, then Bind and Execute) and the server plans every one. A raw connection whose server
process is the one it logged in to (the pid of its BackendKeyData is ``pg_backend_pid()``) has
no pooler in between: PgBouncer, for one, hands out key data of its own. There akadze prepares
each of its statements once, under a name of its own, and runs it in one round trip. Behind a
pooler nothing is prepared and every statement runs as before.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import asyncpg

from akadze.db.sql import Statement

#: per raw connection: prepared statements by file name, or None behind a pooler
_by_connection: weakref.WeakKeyDictionary[Any, dict[str, Any] | None] = weakref.WeakKeyDictionary()
_names = itertools.count()

#: a prepared statement the server no longer has, or whose plan no longer fits (a schema change)
STALE = (asyncpg.exceptions.InvalidCachedStatementError, asyncpg.exceptions.InvalidSQLStatementNameError)


async def prepared(conn: Any, stmt: Statement) -> Any | None:
    """The prepared form of ``stmt`` on ``conn`` (an asyncpg connection), or None behind a pooler."""
    try:
        known = _by_connection[conn]
    except KeyError:
        direct = conn.get_server_pid() == await conn.fetchval("SELECT pg_backend_pid()")
        known = _by_connection[conn] = {} if direct else None
    if known is None:
        return None
    found = known.get(stmt.name)
    if found is None:
        found = known[stmt.name] = await conn.prepare(stmt.pg, name=f"__akadze_{stmt.name}_{next(_names)}__")
    return found


def forget(conn: Any, stmt: Statement) -> None:
    """Drop a prepared statement that went stale; the next use prepares it again."""
    known = _by_connection.get(conn)
    if known:
        known.pop(stmt.name, None)
