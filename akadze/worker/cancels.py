"""Carries cancel requests to running tasks: ``current().cancel_requested``, and the forced
stop of a run that ignores it (``Worker(cancel_grace=...)``).

Once per heartbeat interval, while this worker runs jobs of its app, one statement reads which
of its running jobs have a cancel request (cancel_requests.sql, on the running-jobs index), and
their run contexts are marked. Not one query per job: the cost is the same for one run or a
hundred. The mark is advice for the task; the outcome rules still decide how the job ends.

With a cancel grace, the first refresh that sees a run's request starts a timer; when it ends
and the run still goes on, the run is marked stopped by its worker and its asyncio task is
cancelled: the executor ends it as ``Cancel`` would (the job ends cancelled). A run inside a
``complete_tx()`` block is asked again one heartbeat interval later, since a cancel never cuts
a block. A task that swallows CancelledError cannot be stopped this way, and a sync task's
thread cannot be stopped at all: its run ends (the slot is free, the job cancelled) while the
thread runs on until its function returns, as after a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from akadze.context import has_runs, mark_cancel_requested, run_of
from akadze.db.queries import Queries

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.worker import Worker

logger = logging.getLogger("akadze.worker")


class CancelGrace:
    """Stops the runs of a worker that go on ``grace_s`` after it saw their cancel request.

    ``running`` is the worker's own map of runs, by (job id, run); ``retry_s`` is how long a
    run inside a complete_tx() block is given before it is asked again. ``grace_s`` None: off.
    """

    def __init__(
        self,
        app: Akadze,
        grace_s: float | None,
        running: Mapping[tuple[int, int], asyncio.Task[None]],
        retry_s: float,
    ) -> None:
        self.app = app
        self.grace_s = grace_s
        self.retry_s = retry_s
        self._running = running
        self._timers: dict[tuple[int, int], asyncio.TimerHandle] = {}

    def seen(self, job_ids: Iterable[int]) -> None:
        """The refresh found these jobs' cancel requests: start the grace of each run not yet timed."""
        if self.grace_s is None:
            return
        wanted = set(job_ids)
        loop = asyncio.get_running_loop()
        for key in list(self._running):
            if key[0] in wanted and key not in self._timers:
                self._timers[key] = loop.call_later(self.grace_s, self._stop, key)

    def forget(self, key: tuple[int, int]) -> None:
        """The run ``key`` ended: its timer, if any, goes."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _stop(self, key: tuple[int, int]) -> None:
        self._timers.pop(key, None)
        task = self._running.get(key)
        ctx = run_of(self.app, key[0])
        if task is None or task.done() or ctx is None or ctx.job.run != key[1]:
            return  # it ended meanwhile
        if ctx.in_block:
            self._timers[key] = asyncio.get_running_loop().call_later(self.retry_s, self._stop, key)
            return
        logger.warning(
            "job_id=%d task=%s: still running %gs after its cancel request; stopping the run",
            key[0],
            ctx.job.task,
            self.grace_s,
        )
        ctx.stopped_by_worker = True
        task.cancel()


async def refresh_cancel_requests(worker: Worker) -> list[int]:
    """One query: mark the runs of ``worker`` whose job has a cancel request; returns their ids."""
    async with worker.app.engine.connect() as conn:
        ids = await Queries.cancel_requests(conn, worker.id)
        await conn.rollback()
    mark_cancel_requested(worker.app, ids)
    return ids


async def cancel_service(worker: Worker) -> None:
    """The worker's cancel-request loop: every heartbeat interval, if ``worker``'s app has runs in
    this process, refresh their marks. Runs until cancelled; a failed or timed-out read is logged
    once per streak and tried again at the next interval."""
    failing = False
    while True:
        await asyncio.sleep(worker.heartbeat_interval_s)
        if not has_runs(worker.app):
            continue
        try:
            async with asyncio.timeout(worker.lost_after_s):
                worker.cancel_grace.seen(await refresh_cancel_requests(worker))
        except Exception as exc:
            if not failing:
                logger.warning("reading cancel requests failed (%s); retrying", type(exc).__name__)
            failing = True
        else:
            failing = False


# a burst run (drain in tests) runs tasks too, and they may look at cancel_requested
cancel_service.in_burst = True  # type: ignore[attr-defined]  # read by Worker.run
