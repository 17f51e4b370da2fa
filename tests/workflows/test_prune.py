"""The pruner keeps a workflow's finished steps while it has unfinished ones, then takes the
steps with their edges and the workflow's row (issue 29, point 2)."""

from __future__ import annotations

from datetime import timedelta

from akadze import Akadze, JobState, Workflow
from akadze.testing import drain
from akadze.worker.pruner import prune
from tests.support import execute, fetchval


async def test_finished_steps_stay_while_their_workflow_has_an_unfinished_step(
    app: Akadze, database_url: str
) -> None:
    @app.task("wf.step")
    async def step(name: str) -> None:
        return None

    wf = Workflow()
    wf.add("a", step.bind(name="a"))
    wf.add("b", step.bind(name="b"), after=["a"])
    wf.add("late", step.using(queue="later").bind(name="late"), after=["b"])
    jobs = await wf.enqueue()
    plain = await step.enqueue(name="plain")
    await drain(app, queues=["default"])
    # everything finished long ago, by the database's clock, but "late" has not run
    await execute(
        database_url,
        "UPDATE akadze_jobs SET finished_at = now() - interval '30 days' WHERE finished_at IS NOT NULL",
    )
    await prune(app.engine, retention=timedelta(days=7))
    left = await app.get_workflow(jobs["a"].workflow_id or 0)
    assert {name: job.state for name, job in left.items()} == {
        "a": JobState.SUCCEEDED,
        "b": JobState.SUCCEEDED,
        "late": JobState.QUEUED,
    }
    assert await app.get_job(plain.id) is None

    await drain(app, queues=["later"])
    await execute(database_url, "UPDATE akadze_jobs SET finished_at = now() - interval '30 days'")
    await prune(app.engine, retention=timedelta(days=7))
    assert await app.get_workflow(jobs["a"].workflow_id or 0) == {}
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_job_deps") == 0
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workflows") == 0
