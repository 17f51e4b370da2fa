"""Waiting for a job to finish: ``app.wait_for`` and ``akadze.client.wait_for``.

A waiter marks its job ``awaited`` (mark_awaited.sql); the statements that finish an awaited
job send its id on the ``akadze_done`` channel, so jobs that nobody waits for cost no
notification. One listening connection per engine and event loop serves every waiter of the
process, and one poll every ``poll_interval`` reads all the waited jobs in one query: a
notification does not pass a pooler in transaction mode, and some paths finish a job without
one (a claim that finds it expired, a rescue that fails it). The waiter listens before it marks
the job and reads it after, so a job that finishes meanwhile is seen one way or the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db.errors import raise_if_unreachable
from akadze.db.queries import Queries
from akadze.db.raw import driver_connection
from akadze.db.sql import DONE_CHANNEL
from akadze.db.status import raise_if_schema_missing
from akadze.errors import ConfigError, JobNotFoundError, WaitTimeoutError
from akadze.job import Job, JobState

logger = logging.getLogger("akadze.wait")

CHANNEL = DONE_CHANNEL
#: how often waiters read their jobs when no notification came
POLL_INTERVAL = timedelta(seconds=1)


def seconds(value: timedelta | float | None, label: str) -> float | None:
    """A timeout given as a timedelta or a number of seconds; None means no limit."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0:
        raise ConfigError(f"{label} must be a timedelta or a number of seconds of 0 or more, got {value!r}")
    return float(value)


async def wait_for(
    engine: AsyncEngine,
    job_id: int,
    *,
    timeout: timedelta | float | None = None,  # noqa: ASYNC109 (the name DESIGN §5 fixes)
    poll_interval: timedelta = POLL_INTERVAL,
) -> Job:
    """The job once it is finished (succeeded, failed or cancelled).

    Raises:
        WaitTimeoutError: it did not finish within ``timeout`` (a TimeoutError naming the job
            and its state when last read).
        JobNotFoundError: no job has this id (never enqueued, or pruned).
    """
    timeout_s = seconds(timeout, "timeout")
    poll_s = seconds(poll_interval, "poll_interval")
    if not poll_s:
        raise ConfigError(f"poll_interval must be positive, got {poll_interval!r}")
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ConfigError(f"job_id must be an integer, got {job_id!r}")
    hub = _Hub.of(engine)
    waiter = hub.add(job_id, poll_s)
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            await hub.ready.wait()
            try:
                async with engine.connect() as conn:
                    await Queries.mark_awaited(conn, job_id)
                    await conn.commit()
                    job = await Queries.get_job(conn, job_id)
                    await conn.rollback()
            except Exception as exc:
                raise_if_schema_missing(exc)
                raise_if_unreachable(exc, engine)
                raise
            if job is None:
                raise JobNotFoundError(job_id)
            if job.state.finished:
                return job
            waiter.state = job.state
            return await waiter.future
    except TimeoutError:
        if not deadline.expired():
            raise
        state = waiter.state.value if waiter.state is not None else None
        raise WaitTimeoutError(job_id, state, timeout_s or 0.0) from None
    finally:
        await hub.remove(waiter)


class _Waiter:
    __slots__ = ("future", "job_id", "poll_s", "state")

    def __init__(self, job_id: int, poll_s: float) -> None:
        self.job_id = job_id
        self.poll_s = poll_s
        #: the job's state when last read, for the timeout's message
        self.state: JobState | None = None
        self.future: asyncio.Future[Job] = asyncio.get_running_loop().create_future()


class _Hub:
    """The waiters of one engine on one event loop: one LISTEN connection and one poll for all.

    It runs while it has waiters and closes its connection when the last one leaves.
    """

    _hubs: dict[tuple[int, int], _Hub] = {}

    @classmethod
    def of(cls, engine: AsyncEngine) -> _Hub:
        key = (id(asyncio.get_running_loop()), id(engine))
        hub = cls._hubs.get(key)
        if hub is None:
            hub = cls._hubs[key] = _Hub(engine, key)
        return hub

    def __init__(self, engine: AsyncEngine, key: tuple[int, int]) -> None:
        self.engine = engine
        self.key = key
        self.waiters: list[_Waiter] = []
        #: LISTEN is in place (or could not be: waiters then rely on the poll)
        self.ready = asyncio.Event()
        self._notified = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, job_id: int, poll_s: float) -> _Waiter:
        waiter = _Waiter(job_id, poll_s)
        self.waiters.append(waiter)
        if self._task is None or self._task.done():
            self.ready.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())
        return waiter

    async def remove(self, waiter: _Waiter) -> None:
        self.waiters.remove(waiter)
        if waiter.future.done() and not waiter.future.cancelled():
            waiter.future.exception()  # retrieved: a waiter that left early is no error
        if self.waiters or self._task is None:
            return
        task, self._task = self._task, None
        if self._hubs.get(self.key) is self:
            del self._hubs[self.key]
        self._notified.set()  # the loop sees no waiter left and closes its connection
        await asyncio.shield(task)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if any(str(w.job_id) == payload for w in self.waiters):
            self._notified.set()

    async def _run(self) -> None:
        delay = 0.5
        while self.waiters:
            try:
                async with self.engine.connect() as conn:
                    raw = await driver_connection(conn)
                    await raw.add_listener(CHANNEL, self._on_notify)
                    try:
                        self.ready.set()
                        delay = 0.5
                        await self._serve(conn)
                    finally:
                        with contextlib.suppress(Exception):
                            await raw.remove_listener(CHANNEL, self._on_notify)
            except Exception as exc:
                if not self.waiters:
                    return
                logger.warning("waiting for jobs: connection failed (%s); retrying", type(exc).__name__)
                # waiters may mark and read their jobs meanwhile: the poll picks them up later
                self.ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _serve(self, conn: Any) -> None:
        while self.waiters:
            poll_s = min(w.poll_s for w in self.waiters)
            with contextlib.suppress(TimeoutError):
                # never wait_for: on 3.11 it can swallow a cancel (see worker/listener.py)
                async with asyncio.timeout(poll_s):
                    await self._notified.wait()
            self._notified.clear()
            pending = [w for w in self.waiters if not w.future.done()]
            if not pending:
                continue
            jobs = {job.id: job for job in await Queries.get_jobs(conn, sorted({w.job_id for w in pending}))}
            await conn.rollback()
            for waiter in pending:
                job = jobs.get(waiter.job_id)
                if job is None:
                    waiter.future.set_exception(JobNotFoundError(waiter.job_id))
                elif job.state.finished:
                    waiter.future.set_result(job)
                else:
                    waiter.state = job.state
