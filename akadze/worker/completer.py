"""Ends runs in batches: every outcome waiting when a write starts goes into one statement.

There is no timer: a write starts as soon as the previous one ends, so a lone job is written
at once and a busy worker's outcomes merge by themselves. The one exception: while the
fetcher is about to claim (claim_takes), the outcomes wait for that claim, in this turn of the
loop, and are written by its statement (take, then written or give_back; docs/worker.md). An
outcome is never dropped: a transient error reopens the connection and tries again, and what a
write whose reply was lost did apply is read back (find_written), not reported as fenced out;
a batch that fails otherwise is written one by one, and an outcome that still cannot be
written fails its job with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.hooks import transitions_written
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion, ErrorType, Transition, Verdict
from akadze.worker.connection import HeldConnection

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from akadze.hooks import TransitionHook

logger = logging.getLogger("akadze.worker")

#: called with each batch and what it changed (for logs and wake-ups); an outcome missing from
#: the second list was fenced out: its run no longer owned the job
OnWritten = Callable[[Sequence[Completion], Sequence[Completed]], None]


class Completer:
    def __init__(
        self,
        held: HeldConnection,
        *,
        worker_id: str,
        on_written: OnWritten,
        hooks: Sequence[TransitionHook] = (),
        max_batch: int = 500,
        timeout_s: float | None = None,
    ) -> None:
        self.held = held
        #: whose runs these are (a lost write's outcomes are read back by it)
        self.worker_id = worker_id
        #: a write taking longer is abandoned (its connection dropped) and tried again: a
        #: connection gone silent without a reset must not hold the outcomes for good
        self.timeout_s = timeout_s
        self.on_written = on_written
        #: on_transition hooks: with any, each write is a transaction that runs them
        self.hooks = hooks
        self.max_batch = max_batch
        self._pending: list[Completion] = []
        #: the batch being written now (kept until it is written, through every retry)
        self._writing: list[Completion] = []
        self._task: asyncio.Task[None] | None = None
        #: outcomes a claim is writing now (take): still unwritten until it ends
        self._taken: list[Completion] = []
        #: outcomes given back by a claim whose reply was lost: it may have written them
        self._unsure: set[tuple[int, int]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        #: set by the fetcher: True when a claim that writes the waiting outcomes in its own
        #: statement runs in this turn of the loop (or, if none does, flush() is called)
        self.claim_takes: Callable[[], bool] = _never

    def add(self, ended: Completion) -> None:
        self._pending.append(ended)
        self._idle.clear()
        if not self.claim_takes():
            self.flush()

    def flush(self) -> None:
        """Write the waiting outcomes now (a write running already takes them after its own)."""
        if self._pending and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._flush_all())

    def take(self) -> list[Completion]:
        """The waiting outcomes (up to max_batch) for a claim to write in its own statement.
        They count as unwritten until the claim reports them: written() or give_back()."""
        taken = self._taken = self._pending[: self.max_batch]
        del self._pending[: self.max_batch]
        return taken

    def written(self, batch: Sequence[Completion], written: Sequence[Completed]) -> None:
        """A claim wrote ``batch`` (taken by take()): what it changed is ``written``."""
        self._taken = []
        self._settle()
        self.on_written(batch, written)

    def give_back(self, batch: list[Completion], *, unsure: bool) -> None:
        """A claim that took ``batch`` failed: write it here. ``unsure``: its reply was lost,
        and it may have committed (then writing it again changes nothing, and what it wrote
        is read back, not reported as fenced out)."""
        self._taken = []
        if unsure:
            self._unsure.update((ended.job_id, ended.run) for ended in batch)
        self._pending[:0] = batch
        self.flush()

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def backlog(self) -> int:
        """How many outcomes are handed in and not written yet (those being written too)."""
        return len(self._writing) + len(self._taken) + len(self._pending)

    def unwritten(self) -> list[int]:
        """The jobs whose outcome was handed in and is not written yet (they still run)."""
        return [ended.job_id for ended in (*self._writing, *self._taken, *self._pending)]

    async def drain(self, *, flush: bool = True) -> None:
        """Wait until every outcome handed in so far is written; with ``flush=False``, only
        those being written now (the others wait for a claim that takes them)."""
        if not flush:
            while self._task is not None and not self._task.done():
                await asyncio.shield(self._task)
            return
        self.flush()
        while self._pending or self._taken or (self._task is not None and not self._task.done()):
            await self._idle.wait()
            if self._task is not None and not self._task.done():
                await asyncio.shield(self._task)
            self.flush()

    def _settle(self) -> None:
        if not (self._pending or self._taken or (self._task is not None and not self._task.done())):
            self._idle.set()

    async def _flush_all(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                self._writing = batch
                try:
                    await self._write_durably(batch)
                finally:
                    self._writing = []
        finally:
            if not (self._pending or self._taken):
                self._idle.set()

    async def _write_durably(self, batch: list[Completion]) -> None:
        delay = 0.05
        with_hooks = bool(self.hooks)
        replaced = False
        while True:
            try:
                async with asyncio.timeout(self.timeout_s):
                    written = await self._write(batch, with_hooks)
                    if self._unsure:
                        written = await self._read_back(batch, written)
            except Exception as exc:
                if is_transient(exc):
                    self._unsure.update((ended.job_id, ended.run) for ended in batch)
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
            self.on_written(batch, written)
            return

    async def _read_back(self, batch: list[Completion], written: list[Completed]) -> list[Completed]:
        """``written``, and the jobs of ``batch`` that a write whose reply was lost wrote."""
        applied = {(job.id, job.run) for job in written}
        unsure = [
            ended
            for ended in batch
            if (ended.job_id, ended.run) in self._unsure and (ended.job_id, ended.run) not in applied
        ]
        if unsure:
            written = [*written, *await Queries.find_written(await self.held.raw(), self.worker_id, unsure)]
        self._unsure.difference_update((ended.job_id, ended.run) for ended in batch)
        return written

    async def _write(self, batch: list[Completion], with_hooks: bool) -> list[Completed]:
        if not with_hooks:
            return await Queries.complete_batch(await self.held.raw(), batch)
        conn = await self.held.get()
        async with conn.begin():
            written = await Queries.complete_batch(conn, batch)
            await transitions_written(self.hooks, conn, written, JobState.RUNNING)
        return written


async def store_result(engine: AsyncEngine, job: Job, result: str, give_up_after_s: float) -> bool:
    """Store the body's return value after ``complete_tx()`` committed its job.

    The job is succeeded whatever happens here; only the result can be lost. As for outcomes,
    a transient error is tried again on a new connection (for up to ``give_up_after_s``); any
    other failure, or giving up, is logged without the value and the job keeps no result.
    Returns whether the result was stored.
    """
    delay = 0.05
    deadline = time.monotonic() + give_up_after_s
    while True:
        try:
            async with asyncio.timeout(give_up_after_s), engine.connect() as conn:
                await Queries.set_result(conn, job.id, job.run, result)
                await conn.commit()
            return True
        except Exception as exc:
            if is_transient(exc) and time.monotonic() + delay < deadline:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            logger.error(
                "job_id=%d: the result could not be stored after complete_tx committed (%s); "
                "the job stays succeeded without a result",
                job.id,
                type(exc).__qualname__,
            )
            return False


def _never() -> bool:
    return False


def _unrecordable(ended: Completion, exc: Exception) -> Completion:
    c = ended.transition
    failed = Transition(
        JobState.FAILED,
        c.attempt,
        None,
        ErrorType.OUTCOME_NOT_RECORDED,
        f"the outcome could not be recorded: {type(exc).__name__}",
        cancellable=True,
        verdict=Verdict.FAILED,
    )
    return Completion(ended.job_id, ended.run, failed, None)
