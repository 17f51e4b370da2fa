"""Carries cancel requests to running tasks: ``current().cancel_requested``.

Once per heartbeat interval, while this worker runs jobs of its app, one statement reads which
of its running jobs have a cancel request (cancel_requests.sql, on the running-jobs index), and
their run contexts are marked. Not one query per job: the cost is the same for one run or a
hundred. The mark is advice for the task; the outcome rules still decide how the job ends.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from akadze.context import has_runs, mark_cancel_requested
from akadze.db.queries import Queries

if TYPE_CHECKING:
    from akadze.worker import Worker

logger = logging.getLogger("akadze.worker")


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
                await refresh_cancel_requests(worker)
        except Exception as exc:
            if not failing:
                logger.warning("reading cancel requests failed (%s); retrying", type(exc).__name__)
            failing = True
        else:
            failing = False


# a burst run (drain in tests) runs tasks too, and they may look at cancel_requested
cancel_service.in_burst = True  # type: ignore[attr-defined]  # read by Worker.run
