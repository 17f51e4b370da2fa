"""Worker: claims jobs of its queues into free slots, runs them, and records every outcome.

The composition root. A job goes fetch, execute, decide, buffer, write, publish: the fetcher's
claim cycle claims it (fetcher.py), the executor runs it and decides its outcome once
(executor.py), the run hands the outcome to the fetcher (``finish``), whose loop writes it with
its next statement and settles what it wrote (completer.py holds the buffer and the writes of
outcomes alone), and the publisher hands the events to the subscribers (publishing.py). Beside
it the heartbeat proves the worker alive, the listener wakes it, and the services (rescuer,
scheduler, pruner, trends, cancel requests) each run their own loop. This module builds them, starts
them, and stops them in order.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from akadze.codec.drift import DriftLog
from akadze.context import gate_connections
from akadze.db.queries import Queries
from akadze.db.status import check_schema
from akadze.job import Job, JobState
from akadze.worker import signals
from akadze.worker.cancels import CancelGrace, cancel_service
from akadze.worker.completer import store_result
from akadze.worker.connection import check_pool
from akadze.worker.executor import execute
from akadze.worker.fetcher import Fetcher
from akadze.worker.heartbeat import Heartbeat
from akadze.worker.listener import Listener
from akadze.worker.pruner import pruner_service
from akadze.worker.publishing import Publisher, Timing
from akadze.worker.rescuer import rescuer_service
from akadze.worker.scheduler import scheduler_service
from akadze.worker.services import Service, cancel_services, start_service, start_task
from akadze.worker.trends import trends_service

if TYPE_CHECKING:
    from akadze.app import Akadze

logger = logging.getLogger("akadze.worker")

#: how long a stopping worker waits for the events subscribers to take what it published
_EVENTS_FLUSH_S = 5.0


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
        db_slots: how many runs may hold a connection in ``complete_tx()`` at once (None: every
            slot); the pool then needs the worker's own connections plus this many. For tasks
            that mostly do not touch the database (docs/install.md, "How many connections").
        cancel_grace: how long a run may go on once the worker has seen its job's cancel
            request (at most one heartbeat interval after ``request_cancel``); then the worker
            stops it and the job ends cancelled (worker/cancels.py says what cannot be
            stopped). None (the default): a cancel request is advice only.
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
        db_slots: int | None = None,
        cancel_grace: timedelta | None = None,
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
        if db_slots is not None and (
            isinstance(db_slots, bool) or not isinstance(db_slots, int) or db_slots < 1
        ):
            raise ValueError(f"db_slots must be an integer of 1 or more, got {db_slots!r}")
        self.db_slots = db_slots
        if cancel_grace is not None and (
            not isinstance(cancel_grace, timedelta) or cancel_grace < timedelta(0)
        ):
            raise ValueError(f"cancel_grace must be a timedelta of 0 or more, or None, got {cancel_grace!r}")
        check_pool(app, min(slots, db_slots or slots), listen)
        self.id = str(uuid4())
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        #: how many runs this worker finished (any outcome)
        self.runs = 0
        #: services started beside the fetcher (each loops until cancelled); a burst run
        #: starts only those marked ``in_burst``
        self.services: list[Service] = [
            rescuer_service,
            scheduler_service(),
            pruner_service(),
            trends_service(),
            cancel_service,
        ]

        #: the runs in flight, by (job id, run): a worker declared lost may claim again a job
        #: whose rescued run it still carries, and then both runs are its own to wait for
        self._running: dict[tuple[int, int], asyncio.Task[None]] = {}
        self._stopping = False
        self._stop_now = False
        self._stopped = asyncio.Event()
        #: true while run() serves: registered, claiming, until it returns (the metrics
        #: endpoint answers only then)
        self.serving = False
        #: stale-producer counts per (task, fingerprint); each pair is logged once
        self.drift_log = DriftLog()
        #: where this worker publishes the transitions it commits (the app's subscribers)
        self.events = app.events
        #: per running job: when its run started (monotonic) and how long it waited for it
        self._timing: dict[tuple[int, int], Timing] = {}
        #: builds the events of this worker's transitions, published off the claim cycle
        self.publisher = Publisher(self.events, self.id)
        self._heartbeat: Heartbeat | None = None
        #: stops the runs that go on past their cancel request (cancel_grace)
        self.cancel_grace = CancelGrace(
            app,
            cancel_grace.total_seconds() if cancel_grace is not None else None,
            self._running,
            self.heartbeat_interval_s,
        )
        #: the claim cycle: free slots, the claim, the outcomes' writes, a lost claim's recovery
        self.fetcher = Fetcher(
            app,
            worker_id=self.id,
            queues=self.queues,
            slots=slots,
            poll_interval_s=self.poll_interval_s,
            timeout_s=self.lost_after_s,
            running=self._running,
            start=self._start_all,
            publisher=self.publisher,
            healthy=lambda: self.healthy,
            timing=self._timing,
        )

    # -- control ---------------------------------------------------------------------------

    def stop(self, *, now: bool = False) -> None:
        """Graceful stop: claim nothing more, let running jobs finish (up to shutdown_timeout),
        put back the rest. A second call (or ``now=True``) stops waiting."""
        if self._stopping:
            now = True
        self._stopping = True
        self._stop_now = self._stop_now or now
        self._stopped.set()
        self.fetcher.stop()

    def wake(self) -> None:
        """There may be ready jobs: claim as soon as slots allow."""
        self.fetcher.wake()

    @property
    def healthy(self) -> bool:
        """False once heartbeats have failed for most of the lost horizon: claim nothing then."""
        return self._heartbeat is None or self._heartbeat.healthy

    # -- run -------------------------------------------------------------------------------

    async def run(self, *, burst: bool = False, handle_signals: bool = True) -> int:
        """Serve until stop() or SIGTERM/SIGINT; with ``burst``, until no ready job is left.

        Returns the number of runs. Raises SchemaVersionError, before touching anything, when
        the database's schema is older than this code (``akadze db migrate`` fixes it).

        The signals are taken from the start: a SIGTERM while the schema is checked (a slow or
        locked database) is a graceful stop, which returns 0 runs without registering.
        ``serving`` is true from when the worker has registered until it returns.
        """
        loop = asyncio.get_running_loop()
        installed = signals.install(loop, self._on_signal) if handle_signals else []
        try:
            await check_schema(self.app.engine)
            if self._stopping:
                logger.info("worker %s stopped before it started", self.id)
                return 0
            return await self._serve(loop, burst=burst)
        finally:
            signals.restore(loop, installed)

    async def _serve(self, loop: asyncio.AbstractEventLoop, *, burst: bool) -> int:
        if self.db_slots is not None:
            gate_connections(self.app, self.db_slots)
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
        await Queries.register_worker(await self.fetcher.held.raw(), **registration)
        self._heartbeat = Heartbeat(
            self.app.engine.url,
            registration,
            interval_s=self.heartbeat_interval_s,
            # a burst run (testing.drain) is short: a thread, not a process to start each time
            process=not burst,
        )
        self._heartbeat.start()
        background: list[asyncio.Task[None]] = [
            start_service(service, self)
            for service in self.services
            # a burst run drains and returns: it fires no schedules and prunes nothing
            if not burst or getattr(service, "in_burst", False)
        ]
        if self.listen and not burst:
            listener = Listener(self.app.engine, worker_id=self.id, queues=set(self.queues), wake=self.wake)
            background.append(start_task(listener.run(), "listener"))
        logger.info("worker %s serving queues=%s slots=%d", self.id, ",".join(self.queues), self.slots)
        if not gc.get_freeze_count():
            # once per process: what is alive now (imports, the app) leaves the collector's
            # generations, so the full collections that spans provoke walk only what is new
            gc.collect()
            gc.freeze()
        serving = loop.create_task(self.fetcher.run(burst=burst))
        stopped = loop.create_task(self._stopped.wait())
        self.serving = True
        try:
            await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            try:
                await self._shutdown(serving, background)
            finally:
                self.serving = False
                if self.db_slots is not None:
                    gate_connections(self.app, None)
        return self.runs

    def _on_signal(self, sig: int) -> None:
        logger.info(
            "received %s: %s",
            signal.Signals(sig).name,
            "stopping now" if self._stopping else "stopping gracefully (again to stop now)",
        )
        self.stop()

    def _start_all(self, jobs: Sequence[Job]) -> None:
        """Start the runs of jobs a claim committed; publish one event per job."""
        self.publisher.claimed(jobs)
        loop = asyncio.get_running_loop()
        for job in jobs:
            if job.state is not JobState.RUNNING:
                continue  # cancelled or expired before it started: the claim ended it without a run
            self._timing[job.id, job.run] = (time.monotonic(), job)
            self._running[job.id, job.run] = loop.create_task(self._run_one(job))

    async def _run_one(self, job: Job) -> None:
        """Run ``job`` and hand its outcome to the fetcher, once."""
        try:
            completion = await execute(self.app, job, drift_log=self.drift_log)
            if completion.committed and completion.result is not None:
                # stored while the run still holds its slot, so a stop or a burst waits for it
                await store_result(self.app.engine, job, completion.result, self.lost_after_s)
        finally:
            self._running.pop((job.id, job.run), None)
            self.cancel_grace.forget((job.id, job.run))
            self.runs += 1
        if completion.committed:
            # complete_tx wrote the outcome in the run's own transaction
            self.publisher.committed(job, self._timing.pop((job.id, job.run), None))
            if completion.settled:
                self.publisher.settled(completion.settled)
            self.fetcher.committed(job, released=bool(completion.settled))
        else:
            self.fetcher.finish(completion)

    async def _shutdown(self, serving: asyncio.Task[None], background: list[asyncio.Task[None]]) -> None:
        self._stopping = True
        self.fetcher.stop()
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
        # every run is over: the fetcher writes the outcomes left, then returns
        self.fetcher.close()
        try:
            await serving
        finally:
            if serving.done() and not serving.cancelled() and serving.exception() is not None:
                await self.fetcher.drain()  # its loop failed: the outcomes are still written
            await self.fetcher.completer.held.close(wait_s=self.lost_after_s)
            await self._stop_services(background)

    async def _stop_services(self, background: list[asyncio.Task[None]]) -> None:
        await cancel_services(background)
        if self._heartbeat is not None:
            await asyncio.to_thread(self._heartbeat.stop)
        if not await asyncio.to_thread(self.events.flush, _EVENTS_FLUSH_S):
            logger.warning(
                "events not delivered within %.0fs of the stop: a subscriber is stuck", _EVENTS_FLUSH_S
            )
        try:
            async with asyncio.timeout(self.lost_after_s):
                await Queries.unregister_worker(await self.fetcher.held.raw(), self.id)
        except Exception:
            # a connection gone silent must not hold the exit: others forget this worker anyway
            await self.fetcher.held.discard()
        await self.fetcher.held.close(wait_s=self.lost_after_s)
        logger.info("worker %s stopped after %d run%s", self.id, self.runs, "" if self.runs == 1 else "s")
