"""Producers that log every enqueue as ok, failed or unknown (Jepsen's total-queue input).

An error before COMMIT means the jobs do not exist (the server drops an uncommitted
transaction with its connection): failed. An error during COMMIT may or may not have
committed: unknown. The checker then finds which unknown enqueues were recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from akadze import Akadze
from akadze.db.errors import no_server_fits, sqlstate

from .app import build
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


@dataclass
class Call:
    """One enqueue call of a producer: its jobs' keys, what came of it, and when."""

    keys: list[str]
    outcome: str  # ok, failed (nothing was sent), unknown (sent, no answer)
    started: float
    ended: float
    ids: list[int] = field(default_factory=list)


class LoggedProducer:
    """Enqueues until stopped, one job per call (``enqueue``: a raw autocommit statement) or
    ``batch`` jobs per transaction (``enqueue_many`` in a session), and logs every call."""

    def __init__(
        self, name: str, url: str, records_dsn: str, *, batch: int, pace_s: float, seed: int
    ) -> None:
        self.name = name
        self.batch = batch
        self.pace_s = pace_s
        self.app, _ = build(url, records_dsn)
        self.task = self.app.get_task("fault.work")
        self.calls: list[Call] = []
        self.errors: dict[str, int] = {}
        self._rng = random.Random(seed)
        self._session = Producer(self.app)

    def _item(self, number: int) -> dict[str, Any]:
        long = self._rng.random() < 0.05
        return {
            "key": f"{self.name}-{number}",
            "ms": self._rng.randint(500, 1500) if long else self._rng.randint(0, 50),
        }

    async def run(self, stop: asyncio.Event) -> None:
        for first in itertools.count(0, self.batch):
            if stop.is_set():
                return
            items = [self._item(first + i) for i in range(self.batch)]
            started = time.time()
            if self.batch == 1:
                call = await self._one(items[0], started)
            else:
                call = await self._many(items, started)
            self.calls.append(call)
            await asyncio.sleep(self.pace_s)

    async def _one(self, item: dict[str, Any], started: float) -> Call:
        try:
            job = await self.task.enqueue(**item)
        except Exception as exc:
            self.errors[type(exc).__name__] = self.errors.get(type(exc).__name__, 0) + 1
            # no connection was made (refused, no writable host, the server starting): nothing
            # was sent; anything else may have been committed without its answer
            never_sent = isinstance(exc, OSError) or no_server_fits(exc) or sqlstate(exc) == "57P03"
            return Call([item["key"]], "failed" if never_sent else "unknown", started, time.time())
        return Call([item["key"]], "ok", started, time.time(), [job.id])

    async def _many(self, items: list[dict[str, Any]], started: float) -> Call:
        before = len(self._session.log)
        await self._session.enqueue("fault.work", items)
        logged = self._session.log[before:]
        self.errors = self._session.errors
        return Call(
            [record.key for record in logged],
            logged[0].outcome,
            started,
            time.time(),
            [record.job_id for record in logged if record.job_id is not None],
        )

    def records(self) -> list[EnqueueRecord]:
        found = []
        for call in self.calls:
            for index, key in enumerate(call.keys):
                found.append(EnqueueRecord(key, call.outcome, call.ids[index] if call.ids else None))
        return found
