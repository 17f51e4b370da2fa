"""LISTEN/NOTIFY wake-ups, checked with a probe; polling stays the floor.

Behind a pooler in transaction mode LISTEN is accepted but nothing arrives: the probe
notices, the worker says so once and polls. A lost listener connection is reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db.raw import driver_connection, raw_connection
from akadze.db.sql import JOBS_CHANNEL

logger = logging.getLogger("akadze.worker")

CHANNEL = JOBS_CHANNEL


class Listener:
    """Calls ``wake`` when a job of one of ``queues`` becomes ready (NOTIFY on JOBS_CHANNEL), so the
    fetcher claims without waiting for its poll. ``working`` says whether notifications arrive;
    when it is False the worker relies on polling alone."""

    def __init__(
        self, engine: AsyncEngine, *, worker_id: str, queues: set[str], wake: Callable[[], None]
    ) -> None:
        self.engine = engine
        self.worker_id = worker_id
        self.queues = queues
        self.wake = wake
        #: True while notifications are known to arrive
        self.working = False
        self._probe = f"probe:{worker_id}"
        self._probed = asyncio.Event()
        self._lost = asyncio.Event()

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == self._probe:
            self._probed.set()
        elif payload in self.queues:
            self.wake()

    def _on_terminate(self, _conn: Any) -> None:
        self._lost.set()

    async def run(self) -> None:
        """Listen until cancelled; reopen on loss, give up for good if notifications never arrive."""
        delay = 0.5
        while True:
            try:
                async with self.engine.connect() as conn:
                    try:
                        raw = await driver_connection(conn)
                        self._lost.clear()
                        self._probed.clear()
                        await raw.add_listener(CHANNEL, self._on_notify)
                        raw.add_termination_listener(self._on_terminate)
                        # The probe comes from another session: behind a pooler in transaction mode a
                        # NOTIFY sent on the listening connection runs on the server connection that
                        # holds the LISTEN and comes straight back, so the probe would pass although
                        # no other session's notification ever reaches this one.
                        async with raw_connection(self.engine) as sender:
                            await sender.execute(f"SELECT pg_notify('{CHANNEL}', $1)", self._probe)
                        try:
                            # not asyncio.wait_for: on 3.11 it swallows a cancel that comes as
                            # the probe arrives, and this task would wait for good at a stop
                            async with asyncio.timeout(3):
                                await self._probed.wait()
                        except TimeoutError:
                            logger.warning(
                                "LISTEN/NOTIFY does not deliver here (a pooler in transaction mode in "
                                "front of PostgreSQL?); this worker polls instead"
                            )
                            with contextlib.suppress(Exception):
                                await raw.remove_listener(CHANNEL, self._on_notify)
                            return
                        self.working = True
                        delay = 0.5
                        # wake once: jobs may have been committed while this connection was away
                        self.wake()
                        await self._lost.wait()
                    finally:
                        # never back to the pool: the connection holds LISTEN state, and closing
                        # one that went silent (half-open) would wait for a reply for good
                        with contextlib.suppress(Exception):
                            await conn.invalidate()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning(
                    "listener connection failed (%s); polling until it is back", type(exc).__name__
                )
            self.working = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
