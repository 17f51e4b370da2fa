"""A worker's claim cycle: the one owner of its outcomes, and the one place that writes them.

Each turn of the loop decides once what its next statement carries: when slots are free and
jobs may be ready (a NOTIFY, a full claim, a retry due now, the poll interval), one claim for
all free slots that also writes the outcomes waiting in the buffer (claim_completing); when
no claim is due, a write of those outcomes alone by the :class:`Completer`, which runs beside
the claims (a write stuck behind a row lock must not stop them). What a statement wrote is
settled here, in one place: the slots and limit places it freed, the runs fenced out, the
ENDED events. Outcomes not yet written hold slots once they are more than the slots, so a
stalled write cannot let the worker claim without bound.

A claim never waits on another worker (SKIP LOCKED), and a claim that fails on a lost
connection may have committed: the next claim first adopts the jobs it took (find_claimed),
which would otherwise stay running under this live worker for good, and the outcomes it
carried are given back as unsure (the next write reads back what it applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.events import Kind, Need
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion
from akadze.worker.claims import (
    ClaimCompleting,
    LimitedClaim,
    choose_claim,
    choose_claim_completing,
    claim_with_hooks,
)
from akadze.worker.completer import Completer, OutcomeBuffer
from akadze.worker.connection import HeldConnection

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.worker.publishing import Publisher, Timing

logger = logging.getLogger("akadze.worker")

#: a write carries at most this many outcomes
MAX_BATCH = 500
#: a retry or snooze due within this long after its write is claimed at once (no NOTIFY comes)
_SOON = timedelta(milliseconds=50)


class Fetcher:
    """The claim cycle of one worker (see the module doc).

    Args:
        app: whose engine and on_transition hooks the statements use.
        worker_id / queues / slots: what the worker claims, and how much at once.
        running: the worker's runs in flight (read: how many slots they take).
        start: starts the runs of the jobs a claim returned.
        healthy: False while heartbeats fail: claim nothing then.
        publisher: the worker's events, published while a statement is in flight or before
            the loop waits (akadze/worker/publishing.py).
        timing: when each running job's run started (its ENDED event's duration and wait).
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
        start: Callable[[Sequence[Job]], None],
        healthy: Callable[[], bool],
        publisher: Publisher,
        timing: dict[tuple[int, int], Timing],
    ) -> None:
        self.worker_id = worker_id
        self.queues = list(queues)
        self.slots = slots
        self.poll_interval_s = poll_interval_s
        #: a statement taking longer is abandoned: a connection gone silent (half-open) must
        #: not hang the loop for good, and past lost_after the worker is stuck anyway
        self.timeout_s = timeout_s
        #: the connection claims run on (the worker registers and unregisters on it too)
        self.held = HeldConnection(app.engine)
        #: the outcomes the runs handed in (finish), owned by this loop
        self.outcomes = OutcomeBuffer()
        #: writes outcomes alone, on a connection of its own
        self.completer = Completer(
            HeldConnection(app.engine),
            worker_id=worker_id,
            hooks=app.hooks.on_transition,
            timeout_s=timeout_s,
        )
        self._app = app
        #: the claim statement: claim (claim_completing.sql) or claim_limited.sql (choose_claim)
        self.claim = choose_claim(app, self.queues, recheck_s=poll_interval_s)
        #: the same claim writing the waiting outcomes first, or None where claims do not
        self.claim_completing = choose_claim_completing(app, self.queues)
        #: the tasks with a Limit: a written end of one of theirs may free a place in its group
        self._limited = frozenset(name for name, task in app.tasks.items() if task.options.limit)
        self._running = running
        self._start = start
        self._healthy = healthy
        self._publisher = publisher
        self._timing = timing
        self._wake = asyncio.Event()
        #: jobs may be ready: claim at the next turn that has free slots
        self._hint = True
        #: claim nothing more; write what is handed in until closed
        self._stopping = False
        #: the runs are over: write what is left, then return
        self._closing = False
        self._stopped = asyncio.Event()
        #: a claim failed on a lost connection: it may have committed, its reply lost
        self._unsure = False
        #: the loop runs (a test waits for it)
        self._serving = False
        #: the write of outcomes alone in flight, and its batch
        self._writing: asyncio.Task[list[Completed]] | None = None
        self._write_batch: list[Completion] = []
        #: the poll timer while run() loops (_poll_due)
        self._poll: asyncio.TimerHandle | None = None

    # -- what the worker and its runs call ---------------------------------------------------

    def wake(self) -> None:
        """There may be ready jobs: claim as soon as slots allow."""
        self._hint = True
        self._wake.set()

    def finish(self, ended: Completion) -> None:
        """A run ended with ``ended``: its slot is free, its outcome waits for the next
        statement (a claim's, or a write of its own)."""
        self.outcomes.add(ended)
        self._wake.set()

    def committed(self, job: Job, *, released: bool = False) -> None:
        """``job``'s run wrote its own end (complete_tx): its slot is free, and so may be a
        place in its limit (the next claim looks at its group first); ``released``: its commit
        released workflow steps, which may be claimed at once."""
        self._hint = self._hint or released
        if job.task in self._limited:
            self._hint = True
            if isinstance(self.claim, LimitedClaim):
                self.claim.ended([(job.id, job.task)])
        self._wake.set()

    def stop(self) -> None:
        """Claim nothing more; outcomes handed in are still written until :meth:`close`."""
        self._stopping = True
        self._stopped.set()
        self._wake.set()

    def close(self) -> None:
        """No run is left: write what is handed in, then return from run()."""
        self.stop()
        self._closing = True

    def free_slots(self) -> int:
        """Slots the next claim may fill: those no run holds, less the outcomes not written yet
        past a backlog of ``slots`` (a stalled write must not let the worker claim, and hold
        in memory and in the table, without bound)."""
        return self.slots - len(self._running) - max(0, self.outcomes.backlog - self.slots)

    # -- the loop ------------------------------------------------------------------------------

    async def run(self, *, burst: bool) -> None:
        """Claim until stop() (with ``burst``, until a claim finds nothing and nothing runs),
        and write outcomes until close() (a burst: until every outcome is written)."""
        self._serving = True
        self._publisher.deferring = True
        self._poll = asyncio.get_running_loop().call_later(self.poll_interval_s, self._poll_due)
        try:
            await self._loop(burst=burst)
        finally:
            self._serving = False
            self._poll.cancel()
            self._poll = None
            self._publisher.deferring = False
            self._publisher.flush()

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
        while True:
            self._settle_write()
            idle = not self._running
            if burst and idle:
                self._hint = True  # nothing runs: look again at once (a claim finding nothing ends it)
            free = self.free_slots()
            claim = not self._stopping and free > 0 and self._hint and self._healthy()
            if self.outcomes and self._writing is None and not (claim and self._folds()):
                self._write_alone()
            if claim:
                self._hint = False
                try:
                    jobs, wrote = await self._claim_into(free)
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    logger.warning("claim failed (%s); retrying in %.1fs", type(exc).__name__, delay)
                    self._unsure = self._hint = True
                    self._publisher.flush()
                    await self.held.discard()
                    await self._sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                delay = 0.1
                # a limited claim may say more jobs are ready (behind the ones it parked)
                more = isinstance(self.claim, LimitedClaim) and self.claim.more
                if len(jobs) == free or more:
                    self._hint = True
                self._start(jobs)
                if jobs or wrote or more:
                    continue
                if burst and idle and not self._outcomes_left():
                    # a claim found nothing, nothing runs and every outcome is written (one
                    # the claim wrote could be a retry due now: it looked again first)
                    self._closing = self._stopping = True
            if self._closing and not self._outcomes_left():
                return
            if not self._wake.is_set():
                # after the runs just started have taken their first step: a claim that
                # follows them publishes the events while in flight instead
                self._publisher.flush_soon()
                await self._wake.wait()
            self._wake.clear()
            # let outcomes that finish in the same turn free their slots before claiming
            await asyncio.sleep(0)

    def _folds(self) -> bool:
        """Whether the next claim writes the waiting outcomes in its own statement: not a
        claim_limited, not with on_transition hooks (each write is then a transaction of its
        own), and not while some may have been written by a statement whose reply was lost
        (those are written alone, and what they wrote is read back)."""
        return (
            self.claim_completing is not None
            and not self._app.hooks.on_transition
            and not self.outcomes.unsure
        )

    def _outcomes_left(self) -> bool:
        return bool(self.outcomes) or self._writing is not None

    async def _claim_into(self, free: int) -> tuple[list[Job], bool]:
        """One claim for ``free`` slots, writing the outcomes waiting where this claim can:
        the jobs it took, and whether it wrote outcomes."""
        # the events waiting are published while the claim's statement is in flight: it is
        # sent before this task first waits, and the callback runs at the loop's next turn
        asyncio.get_running_loop().call_soon(self._publisher.flush)
        async with asyncio.timeout(self.timeout_s):
            if self._unsure:
                free -= len(await self._adopt_lost_claims())
                if free <= 0:
                    return [], False
            if self._app.hooks.on_transition:
                jobs = await claim_with_hooks(
                    self._app, self.held, self.claim, self.queues, free, self.worker_id
                )
                return jobs, False
            if self.claim_completing is None or not self.outcomes or not self._folds():
                return await self.claim(await self.held.raw(), self.queues, free, self.worker_id), False
            return await self._claim_completing(self.claim_completing, free)

    async def _claim_completing(self, claim: ClaimCompleting, free: int) -> tuple[list[Job], bool]:
        """Claim, writing the outcomes waiting now in the same statement.

        If the statement fails, the outcomes go back to the buffer: after a lost reply as
        unsure (it may have committed; the next write reads back what it wrote), after any
        other error as they were, and the claim runs again alone, so that an outcome the
        statement cannot write fails only its own write (the completer's one-by-one path)."""
        ended = self.outcomes.take(MAX_BATCH)
        try:
            jobs, written, settled = await claim(
                await self.held.raw(), self.queues, free, self.worker_id, ended
            )
        except Exception as exc:
            transient = is_transient(exc)
            self.outcomes.give_back(ended, unsure=transient)
            if transient:
                raise
            # the type only: a database error's message may quote an outcome's result
            logger.warning(
                "a claim writing %d outcomes failed (%s); claiming alone", len(ended), type(exc).__name__
            )
            return await self.claim(await self.held.raw(), self.queues, free, self.worker_id), False
        except BaseException:
            # cancelled (the claim timeout, a stop): the statement may have committed
            self.outcomes.give_back(ended, unsure=True)
            raise
        self._settle(ended, written, settled)
        return jobs, True

    def _write_alone(self) -> None:
        """Write the waiting outcomes in a statement of their own, beside the claims."""
        batch = self._write_batch = self.outcomes.take(MAX_BATCH)
        self._writing = asyncio.get_running_loop().create_task(
            self.completer.write(batch, self.outcomes.unsure)
        )
        self._writing.add_done_callback(lambda _: self._wake.set())

    def _settle_write(self) -> None:
        """The write of outcomes alone ended: settle what it wrote."""
        writing = self._writing
        if writing is None or not writing.done():
            return
        self._writing, batch = None, self._write_batch
        self._settle(batch, writing.result())

    def _settle(
        self, batch: Sequence[Completion], written: Sequence[Completed], settled: Sequence[Completed] = ()
    ) -> None:
        """``batch`` was written as ``written``: free what it held, publish its events (and those
        of the workflow steps it released or cancelled: ``settled``, or the completer's)."""
        self.outcomes.settle(batch)
        if not settled and self.completer.settled:
            settled, self.completer.settled = self.completer.settled, []
        if settled:  # steps released: claim again (a worker behind a pooler hears no NOTIFY)
            self._publisher.settled(settled)
            self._hint = True
        tasks = {job.task for job in written}
        if self._limited and not self._limited.isdisjoint(tasks):
            # a place in a limit may be free: a job held back at the last claim (which came
            # back short, so no claim follows by itself) may be claimable now; the next claim
            # looks at these jobs' groups first
            self._hint = True
            if isinstance(self.claim, LimitedClaim):
                self.claim.ended((job.id, job.task) for job in written)
        if len(written) < len(batch):
            applied = {(job.id, job.run) for job in written}
            for ended in batch:
                if (ended.job_id, ended.run) not in applied:
                    self._timing.pop((ended.job_id, ended.run), None)
                    logger.warning(
                        "job_id=%d run=%d outcome dropped: this run no longer owns the job "
                        "(it was rescued after this worker was declared lost)",
                        ended.job_id,
                        ended.run,
                    )
        need = self._publisher.events.need(Kind.ENDED)
        if need is not Need.NOTHING:
            # only the runs that ended with an error, when no subscriber takes more
            self._publisher.ended(batch, written, self._timing, errors_only=need is Need.ERRORS)
        else:
            for job in written:
                self._timing.pop((job.id, job.run), None)
        soon: datetime | None = None
        for job in written:
            if job.state is JobState.QUEUED:
                soon = soon or datetime.now(UTC) + _SOON
                if job.run_at <= soon:
                    self._hint = True  # a retry or snooze due about now: no NOTIFY announces it
        self._wake.set()

    async def drain(self) -> None:
        """Write every outcome handed in (the loop has returned: a stopping worker's last)."""
        self._settle_write()
        if self._writing is not None:
            await asyncio.shield(self._writing)
            self._settle_write()
        while self.outcomes:
            batch = self.outcomes.take(MAX_BATCH)
            self._settle(batch, await self.completer.write(batch, self.outcomes.unsure))

    async def _adopt_lost_claims(self) -> list[Job]:
        """Start the jobs of a claim that committed although its reply was lost.

        They run under this worker's id, and no rescue takes them while its heartbeat lives,
        so without this they would stay running for good. They were claimed for slots that
        no later claim has taken: this runs before the next claim.
        """
        known = [*(job_id for job_id, _ in self._running), *self.outcomes.unwritten()]
        jobs = await Queries.find_claimed(await self.held.raw(), self.worker_id, known)
        self._unsure = False
        for job in jobs:
            logger.warning("job_id=%d was claimed by a claim whose reply was lost; running it", job.id)
        self._start(jobs)
        return jobs

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):  # never wait_for: see Listener.run
                await self._stopped.wait()
