"""Proves the worker alive from its own thread, so a task that blocks the event loop does not
make its worker look dead. Finding its row gone (declared lost), it registers again."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from akadze.db.queries import Queries

logger = logging.getLogger("akadze.worker")


class Heartbeat:
    def __init__(self, url: URL, registration: Mapping[str, Any], *, interval_s: float) -> None:
        """``registration`` holds Queries.register_worker's arguments: they re-register a
        worker that was declared lost."""
        self.url = url
        self.worker_id: str = registration["worker_id"]
        self.interval_s = interval_s
        self.lost_after_s: float = registration["lost_after_s"]
        self._register = dict(registration)
        #: monotonic time of the last heartbeat the database acknowledged
        self.last_ok = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="akadze-heartbeat", daemon=True)

    @property
    def healthy(self) -> bool:
        """False once heartbeats have failed for most of the lost horizon: stop claiming."""
        return time.monotonic() - self.last_ok < self.lost_after_s * 0.8

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        engine = create_async_engine(
            self.url,
            poolclass=NullPool,
            connect_args={"statement_cache_size": 0, "prepared_statement_cache_size": 0},
        )
        failing = False
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    loop.run_until_complete(asyncio.wait_for(self._beat(engine), self.interval_s * 2))
                except Exception as exc:
                    if not failing:
                        logger.warning("heartbeat failed (%s); retrying", type(exc).__name__)
                    failing = True
                else:
                    if failing:
                        logger.info("heartbeat recovered")
                    failing = False
        finally:
            loop.run_until_complete(engine.dispose())
            loop.close()

    async def _beat(self, engine: Any) -> None:
        async with engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            alive = await Queries.heartbeat(raw, self.worker_id)
            if not alive:
                await Queries.register_worker(raw, **self._register)
                logger.warning(
                    "worker %s was declared lost (its heartbeat was late); its running jobs were "
                    "rescued and their runs here will be dropped; registered again",
                    self.worker_id,
                )
        self.last_ok = time.monotonic()
