"""The outcomes a worker's runs decided, from the run's end to the commit that writes them.

:class:`OutcomeBuffer` is passive: the runs put their outcomes in it, and one owner, the
fetcher's loop (worker/fetcher.py), takes them out, either into its claim's own statement
(claim_completing) or for a write of their own by the :class:`Completer`. It holds no
connection, runs no task and calls no one back.

:class:`Completer` writes a batch of outcomes alone, durably: a transient error reopens the
connection and tries again, and what a write whose reply was lost did apply is read back
(find_written), not reported as fenced out; a batch that fails otherwise is written one by
one, and an outcome that still cannot be written fails its job with the reason. Writes are
fenced per job by ``(id, run)``: a run whose job was rescued changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
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


class OutcomeBuffer:
    """The outcomes handed in and not written yet, in the order they came.

    An outcome stays counted (``backlog``, ``unwritten``) from :meth:`add` until the batch that
    took it is :meth:`settle`\\ d: an outcome being written still holds its job.
    """

    def __init__(self) -> None:
        self._waiting: list[Completion] = []
        #: the batches taken and not settled yet (a claim's, a write's)
        self._taken: list[Sequence[Completion]] = []
        #: outcomes given back by a write whose reply was lost: it may have applied them
        self.unsure: set[tuple[int, int]] = set()

    def __len__(self) -> int:
        """How many outcomes wait to be taken."""
        return len(self._waiting)

    def add(self, ended: Completion) -> None:
        """A run ended: its outcome waits for a write."""
        self._waiting.append(ended)

    def take(self, most: int) -> list[Completion]:
        """Up to ``most`` waiting outcomes, oldest first, for one write; they count as
        unwritten until the batch is settled."""
        taken = self._waiting[:most]
        del self._waiting[:most]
        if taken:
            self._taken.append(taken)
        return taken

    def settle(self, batch: Sequence[Completion]) -> None:
        """``batch`` (taken by :meth:`take`) was written."""
        self._taken = [taken for taken in self._taken if taken is not batch]

    def give_back(self, batch: Sequence[Completion], *, unsure: bool) -> None:
        """A write of ``batch`` failed: its outcomes wait again, first in line. ``unsure``: its
        reply was lost, and it may have committed (what it wrote is read back next time)."""
        self.settle(batch)
        if unsure:
            self.unsure.update((ended.job_id, ended.run) for ended in batch)
        self._waiting[:0] = batch

    @property
    def backlog(self) -> int:
        """How many outcomes are handed in and not written yet (those being written too)."""
        return len(self._waiting) + sum(len(taken) for taken in self._taken)

    def unwritten(self) -> list[int]:
        """The jobs whose outcome was handed in and is not written yet (they still run)."""
        return [ended.job_id for batch in (*self._taken, self._waiting) for ended in batch]


class Completer:
    """Writes batches of outcomes on a connection of its own, durably (see the module doc).

    Args:
        held: the connection the writes use.
        worker_id: whose runs these are (a lost write's outcomes are read back by it).
        hooks: on_transition hooks: with any, each write is a transaction that runs them.
        timeout_s: a write taking longer is abandoned (its connection dropped) and tried
            again: a connection gone silent without a reset must not hold outcomes for good.
    """

    def __init__(
        self,
        held: HeldConnection,
        *,
        worker_id: str,
        hooks: Sequence[TransitionHook] = (),
        timeout_s: float | None = None,
    ) -> None:
        self.held = held
        self.worker_id = worker_id
        self.hooks = hooks
        self.timeout_s = timeout_s
        #: the workflow steps the writes released or cancelled, until the fetcher's loop takes
        #: them for their events (Fetcher._settle)
        self.settled: list[Completed] = []

    async def write(self, batch: list[Completion], unsure: set[tuple[int, int]]) -> list[Completed]:
        """Write ``batch`` until it is written: the jobs as written (a run fenced out is absent).
        ``unsure`` holds the (job, run) of outcomes an earlier write may have applied: those
        of the batch are read back if this write finds them gone, and leave the set."""
        delay = 0.05
        with_hooks = bool(self.hooks)
        replaced = False
        while True:
            try:
                async with asyncio.timeout(self.timeout_s):
                    written = await self._write(batch, with_hooks)
                    if unsure:
                        written = await self._read_back(batch, written, unsure)
            except Exception as exc:
                if is_transient(exc):
                    unsure.update((ended.job_id, ended.run) for ended in batch)
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
                    return [found for one in batch for found in await self.write([one], unsure)]
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
                return []
            return written

    async def _read_back(
        self, batch: list[Completion], written: list[Completed], unsure: set[tuple[int, int]]
    ) -> list[Completed]:
        """``written``, and the jobs of ``batch`` that a write whose reply was lost wrote."""
        applied = {(job.id, job.run) for job in written}
        lost = [e for e in batch if (e.job_id, e.run) in unsure and (e.job_id, e.run) not in applied]
        if lost:
            written = [*written, *await Queries.find_written(await self.held.raw(), self.worker_id, lost)]
        unsure.difference_update(_keys(batch))
        return written

    async def _write(self, batch: list[Completion], with_hooks: bool) -> list[Completed]:
        if not with_hooks:
            written, settled = await Queries.complete_batch(await self.held.raw(), batch)
        else:
            conn = await self.held.get()
            async with conn.begin():
                written, settled = await Queries.complete_batch(conn, batch)
                await transitions_written(self.hooks, conn, written, JobState.RUNNING)
        self.settled.extend(settled)
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


def _keys(batch: Iterable[Completion]) -> set[tuple[int, int]]:
    return {(ended.job_id, ended.run) for ended in batch}


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
    return Completion(ended.job_id, ended.run, failed, None, plain=ended.plain)
