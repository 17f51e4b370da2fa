"""Ends runs in batches: every outcome waiting when a write starts goes into one statement.

There is no timer: a write starts as soon as the previous one ends, so a lone job is written
at once and a busy worker's outcomes merge by themselves. An outcome is never dropped: a
transient error reopens the connection and tries again; a batch that fails otherwise is
written one by one, and an outcome that still cannot be written fails its job with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from akadze.db.errors import is_transient
from akadze.db.queries import Ended, Queries
from akadze.job import Job, JobState
from akadze.outcomes import Completion
from akadze.worker.connection import HeldConnection

logger = logging.getLogger("akadze.worker")

#: (written jobs) -> None: logs, on_transition hooks are run inside the write's transaction
Written = Callable[[Sequence[Job]], None]
TransitionCall = Callable[[object, Job, JobState, JobState], Awaitable[None]]


class Completer:
    def __init__(
        self,
        held: HeldConnection,
        *,
        on_written: Written,
        on_transition: TransitionCall | None,
        max_batch: int = 500,
    ) -> None:
        self.held = held
        self.on_written = on_written
        self.on_transition = on_transition
        self.max_batch = max_batch
        self._pending: list[Ended] = []
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def add(self, ended: Ended) -> None:
        self._pending.append(ended)
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_all())

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def drain(self) -> None:
        """Wait until every outcome handed in so far is written."""
        while self._pending or (self._task is not None and not self._task.done()):
            await self._idle.wait()
            if self._task is not None and not self._task.done():
                await asyncio.shield(self._task)

    async def _flush_all(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                await self._write_durably(batch)
        finally:
            if not self._pending:
                self._idle.set()

    async def _write_durably(self, batch: list[Ended]) -> None:
        delay = 0.05
        with_hooks = self.on_transition is not None
        replaced = False
        while True:
            try:
                written = await self._write(batch, with_hooks)
            except Exception as exc:
                if is_transient(exc):
                    logger.warning(
                        "could not record %d outcomes (%s); retrying in %.2fs",
                        len(batch),
                        type(exc).__name__,
                        delay,
                    )
                    await self.held.discard()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if len(batch) > 1:
                    for one in batch:
                        await self._write_durably([one])
                    return
                if with_hooks:
                    logger.exception(
                        "job %d: an on_transition hook failed; recording the outcome without hooks",
                        batch[0].job_id,
                    )
                    with_hooks = False
                    continue
                if not replaced:
                    logger.exception("job %d: could not record its outcome; failing it", batch[0].job_id)
                    batch, replaced = [_unrecordable(batch[0], exc)], True
                    continue
                logger.exception("job %d: could not record any outcome; it stays running", batch[0].job_id)
                return
            self.on_written(written)
            return

    async def _write(self, batch: list[Ended], with_hooks: bool) -> list[Job]:
        if not with_hooks or self.on_transition is None:
            return await Queries.complete_batch(await self.held.raw(), batch)
        conn = await self.held.get()
        async with conn.begin():
            written = await Queries.complete_batch(conn, batch)
            for job in written:
                await self.on_transition(conn, job, JobState.RUNNING, job.state)
        return written


def _unrecordable(ended: Ended, exc: Exception) -> Ended:
    c = ended.completion
    failed = Completion(
        JobState.FAILED,
        c.attempt,
        None,
        "akadze.OutcomeNotRecorded",
        f"the outcome could not be recorded: {type(exc).__name__}",
        cancellable=True,
    )
    return Ended(ended.job_id, ended.run, failed, None)
