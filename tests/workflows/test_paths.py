"""Every path where a step ends releases or cancels the steps after it (issue 29, point 2):
a cancel from outside, an expiry at claim (both claim statements), a lost worker's last
attempt, and Retry or Snooze, which end nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from akadze import Akadze, JobState, Limit, Retry, Snooze, Workflow, current, request_cancel
from akadze.testing import drain
from akadze.worker.rescuer import rescue_lost
from tests.support import execute, fetch, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def recorder(app: Akadze, **options: Any) -> tuple[Any, list[str]]:
    ran: list[str] = []

    @app.task("wf.step", **options)
    async def step(name: str) -> None:
        ran.append(name)

    return step, ran


def chain(step: Any, *names: str, middle: Any = None) -> Workflow:
    """names[0] -> names[1] -> ...; ``middle`` replaces the call of names[1]."""
    wf = Workflow()
    for n, name in enumerate(names):
        call = middle if n == 1 and middle is not None else step.bind(name=name)
        wf.add(name, call, after=[names[n - 1]] if n else [])
    return wf


async def states(app: Akadze, jobs: dict[str, Any]) -> dict[str, JobState]:
    found = await app.get_workflow(next(iter(jobs.values())).workflow_id)
    return {name: job.state for name, job in found.items()}


async def test_cancelling_a_waiting_step_cancels_the_steps_after_it(app: Akadze) -> None:
    step, ran = recorder(app)
    jobs = await chain(step, "a", "b", "c", "d").enqueue()
    async with app.engine.begin() as conn:
        assert await request_cancel(conn, jobs["b"].id)
    await drain(app)
    assert ran == ["a"]
    seen = await app.get_workflow(jobs["a"].workflow_id or 0)
    assert {n: j.state for n, j in seen.items()} == {
        "a": JobState.SUCCEEDED,
        "b": JobState.CANCELLED,
        "c": JobState.CANCELLED,
        "d": JobState.CANCELLED,
    }
    assert seen["b"].errors == ()
    assert [e.message for e in seen["c"].errors] == ["step 'b' ended cancelled"]
    assert [e.message for e in seen["d"].errors] == ["step 'c' ended cancelled"]


@pytest.mark.parametrize("limited", [False, True], ids=["claim_completing", "claim_limited"])
async def test_a_step_expired_when_released_ends_at_claim_and_cancels_the_steps_after_it(
    app: Akadze, limited: bool
) -> None:
    step, ran = recorder(app, limit=Limit(concurrency=2) if limited else None)
    past = datetime.now(UTC) - timedelta(seconds=1)
    expiring = step.using(expires_at=past).bind(name="b")
    jobs = await chain(step, "a", "b", "c", middle=expiring).enqueue()
    await drain(app)
    assert ran == ["a"]
    seen = await app.get_workflow(jobs["a"].workflow_id or 0)
    assert {n: j.state for n, j in seen.items()} == {
        "a": JobState.SUCCEEDED,
        "b": JobState.CANCELLED,
        "c": JobState.CANCELLED,
    }
    assert (seen["b"].attempt, seen["c"].attempt) == (0, 0)
    assert [e.message for e in seen["c"].errors] == ["step 'b' ended cancelled"]


async def test_a_lost_workers_last_attempt_fails_the_step_and_cancels_the_steps_after_it(
    app: Akadze, database_url: str
) -> None:
    step, ran = recorder(app, max_attempts=1)
    jobs = await chain(step, "a", "b").enqueue()
    # a claims by a worker that is gone (never registered): its only attempt is spent
    await execute(
        database_url,
        f"UPDATE akadze_jobs SET state = 'running', attempt = 1, run = 1, started_at = now(), "
        f"worker_id = gen_random_uuid() WHERE id = {jobs['a'].id}",
    )
    await rescue_lost(app.engine)
    assert await states(app, jobs) == {"a": JobState.FAILED, "b": JobState.CANCELLED}
    seen = await app.get_workflow(jobs["a"].workflow_id or 0)
    assert [e.message for e in seen["b"].errors] == ["step 'a' ended failed"]
    assert ran == []


async def test_retry_and_snooze_end_nothing_and_release_nothing(app: Akadze, database_url: str) -> None:
    ran: list[str] = []

    @app.task("wf.flaky", max_attempts=3)
    async def flaky(name: str) -> None:
        ran.append(name)
        if name == "a" and current().job.attempt == 1:
            raise Retry(timedelta(0))
        if name == "a" and current().job.attempt == 2 and ran.count("a") == 2:
            raise Snooze(timedelta(0))

    jobs = await chain(flaky, "a", "b").enqueue()
    await drain(app, delayed=True)
    # b ran once, after a's success
    assert ran == ["a", "a", "a", "b"]
    assert await states(app, jobs) == {"a": JobState.SUCCEEDED, "b": JobState.SUCCEEDED}
    rows = await fetch(database_url, "SELECT deps_left, parked FROM akadze_jobs WHERE id = $1", jobs["b"].id)
    assert (rows[0]["deps_left"], rows[0]["parked"]) == (0, None)
