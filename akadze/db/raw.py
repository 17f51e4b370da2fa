"""Raw asyncpg connections from an engine's pool for single autocommit statements (enqueue),
and the asyncpg connection under a SQLAlchemy one (driver_connection, raw_connection).

Checking a connection out through SQLAlchemy's AsyncConnection costs three greenlet switches,
about as much as the insert itself; this checks out the pool's connection directly, and an app
that owns its engine keeps a couple checked out between calls (per event loop).

A connection whose server went away (killed, or failed over to a standby) is closed by asyncpg
as soon as the socket says so; such a connection is never handed out again, from the spares
or from the pool (``drop_closed``), so the first statement after a failover goes to the new
primary instead of failing on the old one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.util import greenlet_spawn

from akadze.db.errors import is_transient


class RawConnections:
    """The raw asyncpg connections an app enqueues on without a session (the module docstring says
    why). Bound to the event loop that used it last; ``keep`` connections stay checked out between
    calls, so ``close()`` them when the app closes."""

    def __init__(self, engine: AsyncEngine, *, keep: int = 0) -> None:
        self.engine = engine
        self.keep = keep
        self._loop: asyncio.AbstractEventLoop | None = None
        self._spare: list[Any] = []

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """An asyncpg connection in autocommit; it goes back to the pool (or the spares) after."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # connections belong to the loop that opened them; those of an old loop are dropped
            self._loop, self._spare = loop, []
        fairy = await self._spare_or_new()
        healthy = True
        try:
            yield fairy.driver_connection
        except BaseException as exc:
            healthy = not is_transient(exc) and not isinstance(exc, asyncio.CancelledError)
            if not healthy:
                with contextlib.suppress(Exception):
                    fairy.invalidate()
            raise
        finally:
            if healthy and len(self._spare) < self.keep:
                self._spare.append(fairy)
            else:
                await greenlet_spawn(fairy.close)

    async def _spare_or_new(self) -> Any:
        while self._spare:
            fairy = self._spare.pop()
            if not _closed(fairy.driver_connection):
                return fairy
            with contextlib.suppress(Exception):
                fairy.invalidate()
            with contextlib.suppress(Exception):
                await greenlet_spawn(fairy.close)
        return await greenlet_spawn(self.engine.sync_engine.raw_connection)

    async def close(self) -> None:
        """Give the kept connections back to the pool. Connections of another event loop are dropped
        (they cannot be closed from this one)."""
        spare, self._spare = self._spare, []
        if self._loop is not None and self._loop is asyncio.get_running_loop():
            for fairy in spare:
                with contextlib.suppress(Exception):
                    await greenlet_spawn(fairy.close)


def _closed(driver: Any) -> bool:
    """Whether the asyncpg connection ``driver`` is closed (its server went away): a local
    check, no round trip."""
    is_closed = getattr(driver, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


def drop_closed(engine: AsyncEngine) -> AsyncEngine:
    """Make ``engine``'s pool replace, at checkout, a connection that is already closed (its
    server died or failed over while it sat in the pool) instead of handing it out to fail
    at its first statement. Returns ``engine``."""

    @event.listens_for(engine.sync_engine, "checkout")
    def _replace_closed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if _closed(record.driver_connection):
            raise DisconnectionError("the connection was closed while it sat in the pool")

    return engine


async def driver_connection(conn: AsyncConnection) -> Any:
    """The asyncpg connection under ``conn``, for as long as ``conn`` is checked out."""
    raw = (await conn.get_raw_connection()).driver_connection
    assert raw is not None
    return raw


@contextlib.asynccontextmanager
async def raw_connection(engine: AsyncEngine) -> AsyncIterator[Any]:
    """An asyncpg connection checked out of ``engine``'s pool for the block, then given back."""
    async with engine.connect() as conn:
        yield await driver_connection(conn)
