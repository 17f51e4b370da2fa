"""Producers that log every enqueue as ok, failed or unknown (Jepsen's total-queue input).

An error before COMMIT means the jobs do not exist (the server drops an uncommitted
transaction with its connection): failed. An error during COMMIT may or may not have
committed: unknown. The checker then finds which unknown enqueues were recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from akadze import Akadze

from .checker import EnqueueRecord


class Producer:
    def __init__(self, app: Akadze) -> None:
        self.app = app
        self.log: list[EnqueueRecord] = []
        self.errors: dict[str, int] = {}

    def _record(self, keys: Sequence[str], outcome: str, ids: Sequence[int] | None = None) -> None:
        for index, key in enumerate(keys):
            self.log.append(EnqueueRecord(key, outcome, ids[index] if ids else None))

    async def enqueue(self, task_name: str, items: Sequence[Mapping[str, Any]], **using: Any) -> None:
        """One transaction for ``items`` (all or none), logged per job."""
        task = self.app.get_task(task_name)
        keys = [str(item["key"]) for item in items]
        try:
            conn = await self.app.engine.connect()
        except Exception as exc:
            self._error(exc)
            self._record(keys, "failed")
            return
        try:
            try:
                tx = await conn.begin()
                jobs = await task.using(session=conn, **using).enqueue_many(items)
            except Exception as exc:
                self._error(exc)
                self._record(keys, "failed")
                return
            try:
                await tx.commit()
            except Exception as exc:
                self._error(exc)
                self._record(keys, "unknown")
                return
            self._record(keys, "ok", [job.id for job in jobs])
        finally:
            with contextlib.suppress(Exception):
                await conn.close()

    def _error(self, exc: BaseException) -> None:
        name = type(exc).__name__
        self.errors[name] = self.errors.get(name, 0) + 1

    async def stream(
        self,
        task_name: str,
        total: int,
        make_item: Callable[[int], Mapping[str, Any]],
        *,
        seconds: float,
        batch: int = 10,
    ) -> None:
        """Enqueue ``total`` jobs in batches, spread evenly over ``seconds``."""
        started = time.monotonic()
        batches = max(1, (total + batch - 1) // batch)
        for number, first in enumerate(range(0, total, batch)):
            items = [make_item(i) for i in range(first, min(first + batch, total))]
            await self.enqueue(task_name, items)
            due = started + seconds * (number + 1) / batches
            await asyncio.sleep(max(0.0, due - time.monotonic()))

    @property
    def ok(self) -> int:
        return sum(1 for record in self.log if record.outcome == "ok")
