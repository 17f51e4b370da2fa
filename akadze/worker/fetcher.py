"""Claims jobs into a worker's free slots: one claim statement for all of them, which also
writes the outcomes waiting for it (claim_completing), the outcomes not yet written that hold
slots, and the recovery of a claim whose reply was lost.

A claim runs when slots are free and there may be ready jobs: after a wake-up (a NOTIFY, an
outcome that frees a slot, a retry due now) or at every poll interval. It never waits on
another worker (SKIP LOCKED), and a claim that fails on a lost connection may have committed:
the next claim first adopts the jobs it took (find_claimed), which would otherwise stay running
under this live worker for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from akadze import hooks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.flow import limit_params
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion
from akadze.worker.connection import HeldConnection

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.worker.completer import Completer
    from akadze.worker.publishing import Publisher

logger = logging.getLogger("akadze.worker")

#: a claim statement: (connection, queues, limit, worker_id) -> the jobs it took
Claim = Callable[[Any, Sequence[str], int, str], Awaitable[list[Job]]]
#: a claim that first writes outcomes: (..., outcomes) -> the jobs it took, the jobs it wrote
ClaimCompleting = Callable[
    [Any, Sequence[str], int, str, Sequence[Completion]], Awaitable[tuple[list[Job], list[Completed]]]
]


def choose_claim(app: Akadze, queues: Sequence[str]) -> Claim:
    """The claim a worker of ``app`` runs: claim_limited if some task has a Limit, else claim
    (claim_completing writing nothing)."""
    limits = limit_params(
        {name: task.options.limit for name, task in app.tasks.items() if task.options.limit}
    )
    if limits is not None:
        return functools.partial(Queries.claim_limited, limits=limits)
    return Queries.claim


def choose_claim_completing(app: Akadze, queues: Sequence[str]) -> ClaimCompleting | None:
    """The claim that writes the waiting outcomes in its own statement (claim_completing), or
    None for a worker whose claim is claim_limited, which counts a group's running jobs from
    its snapshot and would see the outcomes it writes as still running."""
    if any(task.options.limit for task in app.tasks.values()):
        return None
    return Queries.claim_completing


class Fetcher:
    """The claim side of one worker.

    Args:
        app: whose engine and on_transition hooks the claims use.
        worker_id / queues / slots: what the worker claims, and how much at once.
        running: the worker's running jobs (read: how many slots they take).
        completer: its outcome writer (read: the backlog that holds slots).
        start: starts the runs of the jobs a claim returned (and publishes their events).
        healthy: False while heartbeats fail: claim nothing then.
        publisher: the worker's events, published while a claim is in flight or before the
            loop waits (akadze/worker/publishing.py).
    """

    def __init__(
        self,
        app: Akadze,
        *,
        worker_id: str,
        queues: Sequence[str],
        slots: int,
        poll_interval_s: float,
        timeout_s: float,
        running: Collection[tuple[int, int]],
        completer: Completer,
        start: Callable[[Sequence[Job]], None],
        healthy: Callable[[], bool],
        publisher: Publisher,
    ) -> None:
        self.worker_id = worker_id
        self.queues = list(queues)
        self.slots = slots
        self.poll_interval_s = poll_interval_s
        #: a claim taking longer is abandoned: a connection gone silent (half-open) must not
        #: hang the loop for good, and past lost_after the worker is stuck anyway
        self.timeout_s = timeout_s
        #: the connection claims run on (the worker registers and unregisters on it too)
        self.held = HeldConnection(app.engine)
        self._app = app
        #: the claim statement: claim (claim_completing.sql) or claim_limited.sql (choose_claim)
        self.claim = choose_claim(app, self.queues)
        #: the same claim writing the waiting outcomes first, or None where claims do not
        self.claim_completing = choose_claim_completing(app, self.queues)
        #: the tasks with a Limit: a written end of one of theirs may free a place in its group
        self._limited = frozenset(name for name, task in app.tasks.items() if task.options.limit)
        self._running = running
        self._completer = completer
        self._start = start
        self._healthy = healthy
        self._publisher = publisher
        self._wake = asyncio.Event()
        self._hint = True
        self._stopping = False
        self._stopped = asyncio.Event()
        #: a claim failed on a lost connection: it may have committed, its reply lost
        self._unsure = False
        #: run() is looping: it reaches a claim or a flush whenever woken
        self._serving = False
        #: the loop is in a claim, or waiting out a failed one: it takes no outcomes meanwhile
        self._busy = False
        #: the last claim wrote outcomes (a job it sent back to queued is for the next claim)
        self._wrote = False
        #: the poll timer while run() loops (_poll_due)
        self._poll: asyncio.TimerHandle | None = None
        if self.claim_completing is not None:
            completer.claim_takes = self.takes_outcomes

    def wake(self) -> None:
        """There may be ready jobs: claim as soon as slots allow."""
        self._hint = True
        self._wake.set()

    def nudge(self) -> None:
        """A slot may be free: look again (a claim runs only if jobs may be ready)."""
        self._wake.set()

    def written(self, tasks: Iterable[str]) -> None:
        """Outcomes of jobs of ``tasks`` were written: their slots are free, and so are their
        places in their limits. A job its limit held back at the last claim (which came back
        short, so no claim follows by itself) may be claimable now: claim."""
        if self._limited and not self._limited.isdisjoint(tasks):
            self.wake()
        else:
            self.nudge()

    def takes_outcomes(self) -> bool:
        """Whether the next claim writes the outcomes waiting now (the completer's claim_takes).

        True while the loop is not in a claim and may claim: it is woken, and at its next turn
        it either claims, taking the waiting outcomes into the claim's statement, or hands them
        to the completer (flush) before it waits. Never while a claim runs: an outcome does
        not wait for a claim's reply."""
        if not self._serving or self._stopping or self._busy or not self._folds():
            return False
        self._wake.set()
        return True

    def _folds(self) -> bool:
        return self.claim_completing is not None and not self._app.hooks.on_transition

    def stop(self) -> None:
        """Claim nothing more; run() returns at once."""
        self._stopping = True
        self._stopped.set()
        self._wake.set()
        self._completer.flush()

    def free_slots(self) -> int:
        # outcomes not written yet hold their slots once they are more than the slots: a
        # stalled write (a row lock, a slow disk) must not let this worker claim without
        # bound, with every job claimed since held in memory and running in the table
        return self.slots - len(self._running) - max(0, self._completer.backlog - self.slots)

    async def run(self, *, burst: bool) -> None:
        """Claim until stop(); with ``burst``, until a claim finds nothing and nothing runs."""
        self._serving = True
        self._publisher.deferring = True
        try:
            await self._serve(burst=burst)
        finally:
            self._serving = False
            self._publisher.deferring = False
            self._publisher.flush()
            self._completer.flush()

    async def _serve(self, *, burst: bool) -> None:
        self._poll = asyncio.get_running_loop().call_later(self.poll_interval_s, self._poll_due)
        try:
            await self._loop(burst=burst)
        finally:
            self._poll.cancel()
            self._poll = None

    def _poll_due(self) -> None:
        """A poll interval passed: claim at the next turn (jobs may be ready that no NOTIFY
        announced: a run_at come, a pooler that passes no LISTEN), and again an interval on.

        One timer for the worker's life instead of a timeout per wait: a claim cycle waits
        once or twice, and ``asyncio.wait_for`` made a task and a timer each time."""
        self._hint = True
        self._wake.set()
        self._poll = asyncio.get_running_loop().call_later(self.poll_interval_s, self._poll_due)

    async def _loop(self, *, burst: bool) -> None:
        delay = 0.1
        while not self._stopping:
            free = self.free_slots()
            if burst and not self._running:
                # what the claim decides from must include every outcome written (a retry due
                # now is work left); the outcomes still waiting are written by the claim itself
                # when it can, and then it claims again before giving up
                self._publisher.flush_soon()
                await self._completer.drain(flush=not self._folds())
                self._hint = True
            if free > 0 and self._hint and self._healthy():
                self._hint = False
                try:
                    jobs = await self._claim_into(free)
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    logger.warning("claim failed (%s); retrying in %.1fs", type(exc).__name__, delay)
                    self._unsure = True
                    self._hint = True
                    self._busy = True
                    try:
                        self._publisher.flush()
                        await self.held.discard()
                        await self._sleep(delay)
                    finally:
                        self._busy = False
                    delay = min(delay * 2, 5.0)
                    continue
                delay = 0.1
                if len(jobs) == free:
                    self._hint = True
                self._start(jobs)
                if (
                    burst
                    and not jobs
                    and not self._running
                    and not self._completer.pending
                    and not self._wrote
                ):
                    return
                if jobs:
                    continue
            # no claim this turn: the outcomes left for one are written on their own
            self._completer.flush()
            if burst and not self._running:
                self._hint = True  # nothing runs: look again at once (a claim finding nothing ends it)
            elif not self._wake.is_set():
                # after the runs just started have taken their first step: a claim that
                # follows them publishes the events while in flight instead
                self._publisher.flush_soon()
                await self._wake.wait()
            self._wake.clear()
            # let outcomes that finish in the same turn free their slots before claiming
            await asyncio.sleep(0)

    async def _claim_into(self, free: int) -> list[Job]:
        self._busy = True
        self._wrote = False
        # the events waiting are published while the claim's statement is in flight: it is
        # sent before this task first waits, and the callback runs at the loop's next turn
        asyncio.get_running_loop().call_soon(self._publisher.flush)
        try:
            async with asyncio.timeout(self.timeout_s):
                if self._unsure:
                    free -= len(await self._adopt_lost_claims())
                if free <= 0 or self.claim_completing is None or not self._folds():
                    self._completer.flush()
                    if free <= 0:
                        return []
                    if self._app.hooks.on_transition:
                        return await self._claim_with_hooks(free)
                    return await self.claim(await self.held.raw(), self.queues, free, self.worker_id)
                return await self._claim_completing(self.claim_completing, free)
        finally:
            self._busy = False
            # outcomes handed in during the claim were written as they came; any left over
            # (none, unless the claim failed) are written now
            self._completer.flush()

    async def _claim_completing(self, claim: ClaimCompleting, free: int) -> list[Job]:
        """Claim, writing the outcomes waiting now in the same statement (claim_completing).

        If the statement fails, the outcomes go back to the completer: after a lost reply as
        unsure (it may have committed; the completer reads back what it wrote), after any
        other error as they were, and the claim runs again alone, so that an outcome the
        statement cannot write fails only its own write (the completer's one-by-one path)."""
        ended = self._completer.take()
        if not ended:
            return await self.claim(await self.held.raw(), self.queues, free, self.worker_id)
        try:
            jobs, written = await claim(await self.held.raw(), self.queues, free, self.worker_id, ended)
        except Exception as exc:
            transient = is_transient(exc)
            self._completer.give_back(ended, unsure=transient)
            if transient:
                raise
            # the type only: a database error's message may quote an outcome's result
            logger.warning(
                "a claim writing %d outcomes failed (%s); claiming alone", len(ended), type(exc).__name__
            )
            return await self.claim(await self.held.raw(), self.queues, free, self.worker_id)
        except BaseException:
            # cancelled (the claim timeout, a stop): the statement may have committed
            self._completer.give_back(ended, unsure=True)
            raise
        self._wrote = True
        self._completer.written(ended, written)
        return jobs

    async def _adopt_lost_claims(self) -> list[Job]:
        """Start the jobs of a claim that committed although its reply was lost.

        They run under this worker's id, and no rescue takes them while its heartbeat lives,
        so without this they would stay running for good. They were claimed for slots that
        no later claim has taken: this runs before the next claim.
        """
        known = [*(job_id for job_id, _ in self._running), *self._completer.unwritten()]
        jobs = await Queries.find_claimed(await self.held.raw(), self.worker_id, known)
        self._unsure = False
        for job in jobs:
            logger.warning("job_id=%d was claimed by a claim whose reply was lost; running it", job.id)
        self._start(jobs)
        return jobs

    async def _claim_with_hooks(self, free: int) -> list[Job]:
        conn = await self.held.get()
        on_transition = self._app.hooks.on_transition
        try:
            async with conn.begin():
                jobs = await self.claim(conn, self.queues, free, self.worker_id)
                for job in jobs:
                    await hooks.transition(on_transition, conn, job, JobState.QUEUED)
        except Exception as exc:
            if is_transient(exc):
                raise
            # as for completions: a broken hook must not stop the queue. The claim and the
            # hook's writes rolled back together; the jobs are claimed again without hooks.
            logger.exception("an on_transition hook failed at claim; claiming without hooks")
            return await self.claim(await self.held.raw(), self.queues, free, self.worker_id)
        return jobs

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):  # never wait_for: see Listener.run
                await self._stopped.wait()
