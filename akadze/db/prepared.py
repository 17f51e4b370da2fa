"""akadze's own statements, prepared by name on raw connections that reach PostgreSQL directly.

The engine keeps no prepared statements, so a pooler in transaction mode may stand in front of
the database (the spec). Without them asyncpg needs two round trips per statement (Parse and
Describe, then Bind and Execute) and the server plans every one. A raw connection whose server
process is the one it logged in to (the pid of its BackendKeyData is ``pg_backend_pid()``) has
no pooler in between: PgBouncer, for one, hands out key data of its own. There akadze prepares
each of its statements once, under a name of its own, and runs it in one round trip.

Behind a pooler nothing stays prepared on a server: each statement is described once per
connection (its parameter and result types, which asyncpg needs to encode and decode) and kept
unnamed and "unprepared", so that every run sends Parse, Bind, Execute and Sync at once: one
round trip, and one transaction the pooler gives to one server connection, instead of a
Parse/Describe round trip followed by the same Parse again with Bind and Execute. The server
cannot tell such a statement that its result types changed (a schema change under a running
worker): a run that fails drops its description, and the next one describes it again.

The statements of the claim cycle (db/pooled.py) go behind a pooler as calls of their
functions, whose plans the server keeps per session; on a schema without them, as themselves.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import asyncpg

from akadze.db.pooled import POOLED, call
from akadze.db.sql import Statement

#: per raw connection: prepared statements by file name, or None behind a pooler
_by_connection: weakref.WeakKeyDictionary[Any, dict[str, Any] | None] = weakref.WeakKeyDictionary()
_names = itertools.count()
#: per raw connection behind a pooler: statements described once, parsed again at each run
#: (None: this driver would not parse it again)
_described: weakref.WeakKeyDictionary[Any, dict[str, Any | None]] = weakref.WeakKeyDictionary()


def _watch(conn: Any) -> None:
    """Forget ``conn``'s statements when it closes (a failover, a lost server, a close). The
    tables hold their connections weakly, but each statement holds its connection: without
    this a closed connection and its statements would stay in them for good."""
    if conn not in _by_connection and conn not in _described:
        conn.add_termination_listener(_forget_connection)


def _forget_connection(conn: Any) -> None:
    _by_connection.pop(conn, None)
    _described.pop(conn, None)


#: a prepared statement the server no longer has, or whose plan no longer fits (a schema change)
STALE = (asyncpg.exceptions.InvalidCachedStatementError, asyncpg.exceptions.InvalidSQLStatementNameError)


async def prepared(conn: Any, stmt: Statement) -> Any | None:
    """The prepared form of ``stmt`` on ``conn`` (an asyncpg connection), or None behind a pooler."""
    try:
        known = _by_connection[conn]
    except KeyError:
        direct = conn.get_server_pid() == await conn.fetchval("SELECT pg_backend_pid()")
        _watch(conn)
        known = _by_connection[conn] = {} if direct else None
    if known is None:
        return None
    found = known.get(stmt.name)
    if found is None:
        found = known[stmt.name] = await conn.prepare(stmt.pg, name=f"__akadze_{stmt.name}_{next(_names)}__")
    return found


async def described(conn: Any, stmt: Statement) -> Any | None:
    """Behind a pooler: ``stmt`` described once on ``conn`` and parsed again at every run (see
    the module's doc); None if the driver would not parse it again (then it runs as text)."""
    known = _described.get(conn, {})
    if stmt.name in known:
        return known[stmt.name]
    # name "": the unnamed statement, which asyncpg marks unprepared when its statement cache is
    # off (as the engine sets it), so that each run carries its own Parse
    found: Any = None
    if stmt.name in POOLED:
        # the claim cycle's statements run through their functions (db/pooled.py): planned
        # once per server session instead of at every call
        try:
            found = await conn.prepare(call(stmt), name="")
        except asyncpg.exceptions.UndefinedFunctionError:
            found = None  # a schema without them (a migration not applied): the statement itself
    if found is None:
        found = await conn.prepare(stmt.pg, name="")
    if getattr(getattr(found, "_state", None), "prepared", True):
        found = None  # the driver would Bind a statement the server may not have: never use it
    _watch(conn)
    _described.setdefault(conn, {})[stmt.name] = found
    return found


def forget(conn: Any, stmt: Statement) -> None:
    """Drop a prepared (or described) statement that went stale; the next use makes it again."""
    for table in (_by_connection, _described):
        known = table.get(conn)
        if known:
            known.pop(stmt.name, None)
