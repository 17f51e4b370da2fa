"""A worker declared lost may claim again the job whose rescued run it still carries.

Then two runs of one job are in flight in one worker: the rescued one (run 1, which no longer
owns the job and whose outcome is dropped) and the new one (run 2). The worker keeps both: a
burst or a stop waits for run 1 too, and both take a slot until they end.
"""

from __future__ import annotations

import asyncio

from akadze import Akadze, JobState, current
from akadze.testing import drain
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import execute


async def test_a_worker_that_claims_its_own_rescued_job_keeps_both_runs(
    app: Akadze, database_url: str
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    ended: list[int] = []

    @app.task("step")
    async def step() -> str:
        run = current().job.run
        try:
            if run == 1:
                entered.set()
                await asyncio.wait_for(release.wait(), 20)
        finally:
            ended.append(run)
        return f"run {run}"

    job = await step.enqueue()
    only = asyncio.create_task(drain(app))
    await asyncio.wait_for(entered.wait(), 10)
    # the worker is declared lost while run 1 is in flight; its job is ready again at once
    await execute(database_url, "DELETE FROM akadze_workers")
    await rescue_lost(app.engine)  # unless the worker's own rescuer came first
    rescued = await app.get_job(job.id)
    assert rescued is not None
    assert (rescued.state, rescued.attempt) == (JobState.QUEUED, 1)
    await execute(database_url, "UPDATE akadze_jobs SET run_at = now()")

    async def taken_again() -> bool:
        again = await app.get_job(job.id)
        return again is not None and again.state is JobState.SUCCEEDED

    # the only worker is the one still running run 1: it claims run 2 and finishes it
    await wait_until(taken_again)
    assert ended == [2]
    await asyncio.sleep(0.5)
    # the burst still waits for run 1: it is the worker's own run, slot and all
    assert not only.done()
    release.set()
    await asyncio.wait_for(only, 15)
    assert ended == [2, 1]
    after = await app.get_job(job.id)
    assert after is not None
    assert (after.state, after.run, after.result) == (JobState.SUCCEEDED, 2, "run 2")
