"""Workflows through PgBouncer in transaction mode: the enqueue, the releases and cascades of
a worker's claim cycle (its pooled functions), requeue, cancel_workflow and dependency_results
(issue 29: everything holds behind a pooler)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from akadze import Akadze, Fail, JobState, Workflow, cancel_workflow, current, requeue
from akadze.testing import drain

from . import pgbouncer
from .scenarios import Env

pytestmark = pytest.mark.skipif(not pgbouncer.available(), reason="pgbouncer is not installed")


@pytest.fixture
async def pooled_app(fault_env: Env) -> AsyncIterator[Akadze]:
    """An app on the scenario's own server (TCP on loopback, as PgBouncer needs: the test
    database may be a socket-only embedded server) through PgBouncer in transaction mode."""
    assert fault_env.server is not None
    bouncer = pgbouncer.PgBouncer(fault_env.folder / "pgbouncer", "127.0.0.1", fault_env.server.port)
    port = await bouncer.start()
    app = Akadze(database_url=fault_env.url_via(port))
    try:
        yield app
    finally:
        await app.dispose()
        await bouncer.stop()


async def test_a_workflow_runs_fails_is_requeued_and_cancelled_through_pgbouncer(pooled_app: Akadze) -> None:
    app = pooled_app
    failing = {"ship"}
    results: list[dict[str, Any]] = []

    @app.task("wf.step", max_attempts=1)
    async def step(name: str) -> str:
        if name in failing:
            raise Fail("no stock")
        if name == "close":
            results.append(await current().dependency_results())
        return name

    wf = Workflow()
    wf.add("charge", step.bind(name="charge"))
    wf.add("ship", step.bind(name="ship"), after=["charge"])
    wf.add("mail", step.bind(name="mail"), after=["charge"])
    wf.add("close", step.bind(name="close"), after=["ship", "mail"])
    jobs = await wf.enqueue()
    workflow_id = jobs["charge"].workflow_id or 0
    await drain(app)
    states = {n: j.state for n, j in (await app.get_workflow(workflow_id)).items()}
    assert states == {
        "charge": JobState.SUCCEEDED,
        "ship": JobState.FAILED,
        "mail": JobState.SUCCEEDED,
        "close": JobState.CANCELLED,
    }

    failing.clear()
    async with app.engine.begin() as conn:
        assert await requeue(conn, jobs["ship"].id) is not None
    await drain(app)
    assert {n: j.state for n, j in (await app.get_workflow(workflow_id)).items()} == dict.fromkeys(
        jobs, JobState.SUCCEEDED
    )
    assert results == [{"ship": "ship", "mail": "mail"}]

    other = Workflow().add("a", step.bind(name="a")).add("b", step.bind(name="b"), after=["a"])
    more = await other.enqueue()
    async with app.engine.begin() as conn:
        assert await cancel_workflow(conn, more["a"].workflow_id or 0) == 2
    assert {j.state for j in (await app.get_workflow(more["a"].workflow_id or 0)).values()} == {
        JobState.CANCELLED
    }
