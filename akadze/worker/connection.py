"""The pool connections a worker keeps for one role (claims, completions), reopened after a
loss, and the check that the pool can spare them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from akadze.db.raw import driver_connection

if TYPE_CHECKING:
    from akadze.app import Akadze

logger = logging.getLogger("akadze.worker")


class HeldConnection:
    """Checked out of the app's pool once and kept, so the hot path pays no checkout.

    ``raw()`` is the asyncpg connection under it, used in autocommit for single statements.
    One that its server closed meanwhile (killed, or failed over) is dropped before use and
    another checked out, which finds the new primary: the claim or outcome write that follows
    a failover goes there instead of failing once on the dead server.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._conn: AsyncConnection | None = None
        self._raw: Any = None

    async def get(self) -> AsyncConnection:
        """The held SQLAlchemy connection, checked out on first use and again after a loss (one whose
        server closed it is discarded first)."""
        if self._raw is not None and self._raw.is_closed():
            await self.discard()
        if self._conn is None:
            self._conn = await self.engine.connect()
            self._raw = await driver_connection(self._conn)
        return self._conn

    async def raw(self) -> Any:
        """The asyncpg connection under the held one, for autocommit statements on the hot path; a
        closed one is replaced first."""
        if self._raw is None or self._raw.is_closed():
            await self.get()
        return self._raw

    async def discard(self) -> None:
        """Drop a connection that failed: it is invalidated, not returned to the pool."""
        conn, self._conn, self._raw = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self, wait_s: float | None = None) -> None:
        """Give the connection back; past ``wait_s`` (a connection gone silent) drop it instead."""
        conn, self._conn, self._raw = self._conn, None, None
        if conn is not None:
            try:
                async with asyncio.timeout(wait_s):
                    await conn.close()
            except Exception:
                with contextlib.suppress(Exception):
                    await conn.invalidate()


def check_pool(app: Akadze, slots: int, listen: bool) -> None:
    """Refuse a pool too small to ever serve a run, and warn about one smaller than the slots.

    The worker keeps one pool connection for claims, one for outcomes and one for LISTEN; the
    runs' complete_tx and the maintenance passes take more. With a pool no larger than what the
    worker keeps, every run would wait for a connection that never comes back (a deadlock).
    """
    pool = app.engine.pool
    size, overflow = getattr(pool, "size", None), getattr(pool, "_max_overflow", None)
    if not callable(size) or not isinstance(overflow, int) or overflow < 0:
        return  # not a bounded queue pool (NullPool, unlimited overflow)
    capacity = size() + overflow
    kept = 3 if listen else 2
    if capacity <= kept:
        raise ValueError(
            f"the engine's pool allows {capacity} connections at once, and a worker keeps {kept} "
            f"of them (claims, outcomes{', LISTEN' if listen else ''}), so no run could ever get one: "
            f"allow at least {kept + 1} (pool_size + max_overflow), ideally {kept + slots}"
        )
    if capacity < kept + slots:
        logger.warning(
            "the engine's pool allows %d connections at once; the worker keeps %d, so with %d slots "
            "runs may wait for a connection (pool_size + max_overflow of %d avoids that)",
            capacity,
            kept,
            slots,
            kept + slots,
        )
