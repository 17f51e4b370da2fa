"""Worker: claims jobs of its queues into free slots, runs them, and records every outcome.

Composition: a fetch loop on the event loop (one claim statement for all free slots), the
executor per job, a completer that batches outcomes, a heartbeat thread, the listener, and
maintenance services (rescue of lost workers; schedules and pruning when present).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import msgspec

from akadze import hooks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.db.status import check_schema
from akadze.drift import DriftLog
from akadze.events import Event, Kind
from akadze.flow import limit_params
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion, ErrorType, Verdict
from akadze.worker.completer import Completer, store_result
from akadze.worker.connection import HeldConnection
from akadze.worker.executor import execute
from akadze.worker.heartbeat import Heartbeat
from akadze.worker.listener import Listener
from akadze.worker.rescuer import rescue_lost

if TYPE_CHECKING:
    from akadze.app import Akadze

logger = logging.getLogger("akadze.worker")

_SOON = timedelta(milliseconds=50)
#: how long a stopping worker waits for the events subscribers to take what it published
_EVENTS_FLUSH_S = 5.0

#: a maintenance service: runs beside the fetch loop until cancelled
Service = Callable[["Worker"], Awaitable[None]]


def _seconds(value: timedelta, label: str) -> float:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ValueError(f"{label} must be a positive timedelta, got {value!r}")
    return value.total_seconds()


class Worker:
    """Serves the app's jobs.

    Args:
        app: the application whose tasks this worker runs.
        queues: the queues to take jobs from; None means every queue of the app's tasks.
        slots: how many jobs run at once.
        poll_interval: how often to look for ready jobs when no notification came.
        heartbeat_interval / lost_after: liveness; others rescue this worker's jobs once its
            heartbeat is older than ``lost_after``.
        shutdown_timeout: on a graceful stop, how long running jobs may take to finish
            before they are interrupted and put back to queued (no attempt spent).
        listen: use LISTEN/NOTIFY for wake-ups (polling always runs too).
    """

    def __init__(
        self,
        app: Akadze,
        *,
        queues: Sequence[str] | None = None,
        slots: int = 10,
        poll_interval: timedelta = timedelta(seconds=1),
        heartbeat_interval: timedelta = timedelta(seconds=5),
        lost_after: timedelta = timedelta(seconds=30),
        shutdown_timeout: timedelta = timedelta(seconds=30),
        rescue_interval: timedelta | None = None,
        listen: bool = True,
        name: str | None = None,
    ) -> None:
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer of 1 or more, got {slots!r}")
        self.app = app
        if queues is not None and isinstance(queues, str):
            queues = [queues]
        self.queues = sorted(set(queues)) if queues else app.queues()
        if not self.queues:
            raise ValueError("no queues to serve: the app has no tasks and no queues were given")
        self.slots = slots
        self.poll_interval_s = _seconds(poll_interval, "poll_interval")
        self.heartbeat_interval_s = _seconds(heartbeat_interval, "heartbeat_interval")
        self.lost_after_s = _seconds(lost_after, "lost_after")
        if self.heartbeat_interval_s * 3 > self.lost_after_s:
            raise ValueError("heartbeat_interval must be at most a third of lost_after")
        self.shutdown_timeout_s = shutdown_timeout.total_seconds()
        self.rescue_interval_s = (
            _seconds(rescue_interval, "rescue_interval") if rescue_interval else self.lost_after_s / 2
        )
        self.listen = listen
        _check_pool(app, slots, listen)
        self.id = str(uuid4())
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        #: how many runs this worker finished (any outcome)
        self.runs = 0
        #: services started beside the fetch loop; the rescuer is always one
        self.services: list[Service] = [_rescue_service, *extra_services]

        self._running: dict[int, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._hint = True
        self._stopping = False
        self._stop_now = False
        self._stopped = asyncio.Event()
        #: stale-producer counts per (task, fingerprint); each pair is logged once
        self.drift_log = DriftLog()
        #: where this worker publishes the transitions it commits (the app's subscribers)
        self.events = app.events
        #: per running job: when its run started (monotonic) and how long it waited for it
        self._timing: dict[int, tuple[float, float | None]] = {}
        self._claim = HeldConnection(app.engine)
        #: claim.sql, or claim_limited.sql when a task has a Limit (docs/flow-control.md)
        self._claim_jobs = choose_claim(app)
        #: a claim failed on a lost connection: it may have committed, its reply lost
        self._claim_unsure = False
        self._heartbeat: Heartbeat | None = None
        self._completer: Completer | None = None

    # -- control ---------------------------------------------------------------------------

    def stop(self, *, now: bool = False) -> None:
        """Graceful stop: claim nothing more, let running jobs finish (up to shutdown_timeout),
        put back the rest. A second call (or ``now=True``) stops waiting."""
        if self._stopping:
            now = True
        self._stopping = True
        self._stop_now = self._stop_now or now
        self._stopped.set()
        self._wake.set()

    def wake(self) -> None:
        """There may be ready jobs: claim as soon as slots allow."""
        self._hint = True
        self._wake.set()

    @property
    def healthy(self) -> bool:
        return self._heartbeat is None or self._heartbeat.healthy

    # -- run -------------------------------------------------------------------------------

    async def run(self, *, burst: bool = False, handle_signals: bool = True) -> int:
        """Serve until stop() or SIGTERM/SIGINT; with ``burst``, until no ready job is left.

        Returns the number of runs. Raises SchemaVersionError, before touching anything, when
        the database's schema is older than this code (``akadze db migrate`` fixes it).
        """
        await check_schema(self.app.engine)
        loop = asyncio.get_running_loop()
        restore = self._install_signals(loop) if handle_signals else []
        registration: dict[str, Any] = {
            "worker_id": self.id,
            "name": self.name,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": self.queues,
            "slots": self.slots,
            "lost_after_s": self.lost_after_s,
            "tasks": [(t.name, t.options.queue, t.args_fp) for t in self.app.tasks.values()],
        }
        await Queries.register_worker(await self._claim.raw(), **registration)
        self._heartbeat = Heartbeat(
            self.app.engine.url,
            registration,
            interval_s=self.heartbeat_interval_s,
        )
        self._heartbeat.start()
        self._completer = Completer(
            HeldConnection(self.app.engine),
            on_written=self._written,
            hooks=self.app.hooks.on_transition,
            timeout_s=self.lost_after_s,
        )
        background: list[asyncio.Task[None]] = [
            loop.create_task(_guard(service(self), service))
            for service in self.services
            # a burst run drains and returns: it fires no schedules and prunes nothing
            if not burst or getattr(service, "in_burst", False)
        ]
        if self.listen and not burst:
            listener = Listener(self.app.engine, worker_id=self.id, queues=set(self.queues), wake=self.wake)
            background.append(loop.create_task(listener.run()))
        logger.info("worker %s serving queues=%s slots=%d", self.id, ",".join(self.queues), self.slots)
        try:
            await self._fetch_loop(burst)
        finally:
            await self._shutdown(background)
            for sig, previous in restore:
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)
                    if previous is not None:
                        signal.signal(sig, previous)
        return self.runs

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[tuple[int, Any]]:
        if threading.current_thread() is not threading.main_thread():
            return []
        installed: list[tuple[int, Any]] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                previous = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            installed.append((sig, previous))
        return installed

    def _on_signal(self, sig: int) -> None:
        logger.info(
            "received %s: %s",
            signal.Signals(sig).name,
            "stopping now" if self._stopping else "stopping gracefully (again to stop now)",
        )
        self.stop()

    async def _fetch_loop(self, burst: bool) -> None:
        assert self._completer is not None
        delay = 0.1
        next_poll = time.monotonic() + self.poll_interval_s
        while not self._stopping:
            # outcomes not written yet hold their slots once they are more than the slots:
            # a stalled write (a row lock, a slow disk) must not let this worker claim without
            # bound, with every job claimed since held in memory and running in the table
            free = self.slots - len(self._running) - max(0, self._completer.backlog - self.slots)
            if burst and not self._running:
                await self._completer.drain()
                self._hint = True
            if free > 0 and self._hint and self.healthy:
                self._hint = False
                try:
                    # a connection that went silent (half-open: no reply, no reset) must not
                    # hang the loop for good; past lost_after this worker is stuck anyway
                    async with asyncio.timeout(self.lost_after_s):
                        if self._claim_unsure:
                            free -= len(await self._adopt_lost_claims())
                        if free <= 0:
                            jobs = []
                        elif self.app.hooks.on_transition:
                            jobs = await self._claim_with_hooks(free)
                        else:
                            jobs = await self._claim_jobs(await self._claim.raw(), self.queues, free, self.id)
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    logger.warning("claim failed (%s); retrying in %.1fs", type(exc).__name__, delay)
                    self._claim_unsure = True
                    await self._claim.discard()
                    self._hint = True
                    await self._sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                delay = 0.1
                if len(jobs) == free:
                    self._hint = True
                self._start_all(jobs)
                if burst and not jobs and not self._running and not self._completer.pending:
                    return
                if jobs:
                    continue
            timeout = max(next_poll - time.monotonic(), 0.0)
            if burst and not self._running:
                timeout = 0.0
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                self._hint = True
                next_poll = time.monotonic() + self.poll_interval_s
            self._wake.clear()
            # let outcomes that finish in the same turn free their slots before claiming
            await asyncio.sleep(0)

    async def _adopt_lost_claims(self) -> list[Job]:
        """Start the jobs of a claim that committed although its reply was lost.

        They run under this worker's id, and no rescue takes them while its heartbeat lives,
        so without this they would stay running for good. They were claimed for slots that
        no later claim has taken: this runs before the next claim.
        """
        assert self._completer is not None
        known = [*self._running, *self._completer.unwritten()]
        jobs = await Queries.find_claimed(await self._claim.raw(), self.id, known)
        self._claim_unsure = False
        for job in jobs:
            logger.warning("job_id=%d was claimed by a claim whose reply was lost; running it", job.id)
        self._start_all(jobs)
        return jobs

    async def _claim_with_hooks(self, free: int) -> list[Job]:
        conn = await self._claim.get()
        try:
            async with conn.begin():
                jobs = await self._claim_jobs(conn, self.queues, free, self.id)
                for job in jobs:
                    await hooks.transition(self.app.hooks.on_transition, conn, job, JobState.QUEUED)
        except Exception as exc:
            if is_transient(exc):
                raise
            # as for completions: a broken hook must not stop the queue. The claim and the
            # hook's writes rolled back together; the jobs are claimed again without hooks.
            logger.exception("an on_transition hook failed at claim; claiming without hooks")
            return await self._claim_jobs(await self._claim.raw(), self.queues, free, self.id)
        return jobs

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), seconds)

    def _start_all(self, jobs: Sequence[Job]) -> None:
        """Start the runs of jobs a claim committed; publish one event per job."""
        publish = self.events.active
        loop = asyncio.get_running_loop()
        for job in jobs:
            if job.state is not JobState.RUNNING:
                # cancelled or expired before it started: the claim ended it without a run
                if publish:
                    self.events.publish(self._event(Kind.CANCELLED, job, JobState.QUEUED))
                continue
            wait_s = None
            if publish:
                if job.started_at is not None:
                    wait_s = (job.started_at - job.run_at).total_seconds()
                self.events.publish(self._event(Kind.CLAIMED, job, JobState.QUEUED, wait_s=wait_s))
            self._timing[job.id] = (time.monotonic(), wait_s)
            self._running[job.id] = loop.create_task(self._run_one(job))

    def _event(
        self,
        kind: Kind,
        job: Job | Completed,
        from_state: JobState,
        *,
        outcome: Verdict | None = None,
        duration_s: float | None = None,
        wait_s: float | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
    ) -> Event:
        return Event(
            kind,
            job.id,
            job.task,
            job.queue,
            from_state,
            job.state,
            job.attempt,
            job.run,
            outcome,
            duration_s,
            wait_s,
            error_type,
            self.id,
            error_message=error_message,
        )

    async def _run_one(self, job: Job) -> None:
        try:
            completion = await execute(self.app, job, drift_log=self.drift_log)
            if completion.committed and completion.result is not None:
                # stored while the run still holds its slot, so a stop or a burst waits for it
                await store_result(self.app.engine, job, completion.result, self.lost_after_s)
        finally:
            self._running.pop(job.id, None)
            self.runs += 1
            self._wake.set()
        assert self._completer is not None
        if not completion.committed:
            self._completer.add(completion)
            return
        started, wait_s = self._timing.pop(job.id, (None, None))
        if self.events.active:
            duration_s = time.monotonic() - started if started is not None else None
            committed = msgspec.structs.replace(job, state=JobState.SUCCEEDED)
            event = self._event(
                Kind.COMMITTED,
                committed,
                JobState.RUNNING,
                outcome=Verdict.SUCCEEDED,
                duration_s=duration_s,
                wait_s=wait_s,
            )
            self.events.publish(event)

    def _written(self, batch: Sequence[Completion], jobs: Sequence[Completed]) -> None:
        self._wake.set()  # slots held by unwritten outcomes may be free again
        if len(jobs) < len(batch):
            applied = {job.id for job in jobs}
            for ended in batch:
                if ended.job_id not in applied:
                    self._timing.pop(ended.job_id, None)
                    logger.warning(
                        "job_id=%d run=%d outcome dropped: this run no longer owns the job "
                        "(it was rescued after this worker was declared lost)",
                        ended.job_id,
                        ended.run,
                    )
        publish = self.events.active
        # below INFO with no other subscriber, only runs that ended with an error are logged
        failures = publish or self.events.failures_active
        decided = {ended.job_id: ended.transition for ended in batch} if failures else {}
        now = time.monotonic()
        soon: datetime | None = None
        for job in jobs:
            started, wait_s = self._timing.pop(job.id, (None, None))
            if failures and (publish or decided[job.id].error_type is not None):
                completion = decided[job.id]
                verdict = completion.verdict
                if job.state is JobState.CANCELLED and verdict is not Verdict.LOST:
                    verdict = Verdict.CANCELLED  # a cancel request or expiry applied at write time
                event = self._event(
                    Kind.ENDED,
                    job,
                    JobState.RUNNING,
                    outcome=verdict,
                    duration_s=now - started if started is not None else None,
                    wait_s=wait_s,
                    error_type=completion.error_type,
                    error_message=completion.error_message,
                )
                self.events.publish(event)
            if job.state is JobState.QUEUED:
                soon = soon or datetime.now(UTC) + _SOON
                if job.run_at <= soon:
                    # a retry or snooze due about now: no NOTIFY announces it
                    self.wake()

    async def _shutdown(self, background: list[asyncio.Task[None]]) -> None:
        self._stopping = True
        if self._running:
            logger.info(
                "waiting for %d running jobs (up to %.0fs)",
                len(self._running),
                self.shutdown_timeout_s,
            )
            deadline = time.monotonic() + self.shutdown_timeout_s
            while self._running and not self._stop_now and time.monotonic() < deadline:
                self._stopped.clear()
                waiters = [asyncio.ensure_future(self._stopped.wait())]
                remaining = deadline - time.monotonic()
                await asyncio.wait(
                    [*self._running.values(), *waiters],
                    timeout=remaining,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for waiter in waiters:
                    waiter.cancel()
            for task in list(self._running.values()):
                task.cancel()
            if self._running:
                await asyncio.gather(*self._running.values(), return_exceptions=True)
        if self._completer is not None:
            await self._completer.drain()
            await self._completer.held.close(wait_s=self.lost_after_s)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if self._heartbeat is not None:
            await asyncio.to_thread(self._heartbeat.stop)
        if not await asyncio.to_thread(self.events.flush, _EVENTS_FLUSH_S):
            logger.warning(
                "events not delivered within %.0fs of the stop: a subscriber is stuck", _EVENTS_FLUSH_S
            )
        try:
            async with asyncio.timeout(self.lost_after_s):
                await Queries.unregister_worker(await self._claim.raw(), self.id)
        except Exception:
            # a connection gone silent must not hold the exit: others forget this worker anyway
            await self._claim.discard()
        await self._claim.close(wait_s=self.lost_after_s)
        logger.info("worker %s stopped after %d runs", self.id, self.runs)


def _check_pool(app: Akadze, slots: int, listen: bool) -> None:
    """Refuse a pool too small to ever serve a run, and warn about one smaller than the slots.

    The worker keeps one pool connection for claims, one for outcomes and one for LISTEN; the
    runs' complete_tx and the maintenance passes take more. With a pool no larger than what the
    worker keeps, every run would wait for a connection that never comes back (a deadlock).
    """
    pool = app.engine.pool
    size, overflow = getattr(pool, "size", None), getattr(pool, "_max_overflow", None)
    if not callable(size) or not isinstance(overflow, int) or overflow < 0:
        return  # not a bounded queue pool (NullPool, unlimited overflow)
    capacity = size() + overflow
    kept = 3 if listen else 2
    if capacity <= kept:
        raise ValueError(
            f"the engine's pool allows {capacity} connections at once, and a worker keeps {kept} "
            f"of them (claims, outcomes{', LISTEN' if listen else ''}), so no run could ever get one: "
            f"allow at least {kept + 1} (pool_size + max_overflow), ideally {kept + slots}"
        )
    if capacity < kept + slots:
        logger.warning(
            "the engine's pool allows %d connections at once; the worker keeps %d, so with %d slots "
            "runs may wait for a connection (pool_size + max_overflow of %d avoids that)",
            capacity,
            kept,
            slots,
            kept + slots,
        )


async def _guard(service: Awaitable[None], origin: Service) -> None:
    try:
        await service
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("worker service %s stopped", getattr(origin, "__name__", origin))


async def _rescue_service(worker: Worker) -> None:
    while True:
        try:
            async with asyncio.timeout(worker.lost_after_s):
                rescued = await rescue_lost(worker.app.engine, worker.app.hooks.on_transition)
        except Exception as exc:
            logger.warning("rescue pass failed (%s)", type(exc).__name__)
        else:
            if rescued and worker.events.active:
                for job in rescued:
                    event = worker._event(
                        Kind.RESCUED,
                        job,
                        JobState.RUNNING,
                        outcome=Verdict.LOST,
                        error_type=ErrorType.WORKER_LOST,
                    )
                    worker.events.publish(event)
        await asyncio.sleep(worker.rescue_interval_s)


_rescue_service.in_burst = True  # type: ignore[attr-defined]  # rescue is always safe to run


def choose_claim(app: Akadze) -> Callable[[Any, Sequence[str], int, str], Awaitable[list[Job]]]:
    """The claim a worker of ``app`` runs: the plain one unless some task has a Limit."""
    limits = limit_params(
        {name: task.options.limit for name, task in app.tasks.items() if task.options.limit}
    )
    if limits is None:
        return Queries.claim
    return functools.partial(Queries.claim_limited, limits=limits)


#: services added by other parts of akadze (schedules, pruning)
extra_services: list[Service] = []


from akadze.worker import cancels, pruner, scheduler  # noqa: E402 (registered once extra_services exists)

extra_services.extend([scheduler.scheduler_service(), pruner.pruner_service(), cancels.cancel_service])
