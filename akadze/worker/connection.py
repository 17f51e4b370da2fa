"""A pool connection a worker keeps for one role (claims, completions), reopened after a loss."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


class HeldConnection:
    """Checked out of the app's pool once and kept, so the hot path pays no checkout.

    ``raw()`` is the asyncpg connection under it, used in autocommit for single statements.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._conn: AsyncConnection | None = None
        self._raw: Any = None

    async def get(self) -> AsyncConnection:
        if self._conn is None:
            self._conn = await self.engine.connect()
            fairy = await self._conn.get_raw_connection()
            self._raw = fairy.driver_connection
        return self._conn

    async def raw(self) -> Any:
        if self._raw is None:
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
