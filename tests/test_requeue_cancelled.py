"""Requeue of a cancelled job (issue 33): as for a failed job, it goes back to queued and runs
now, keeping attempt, errors and args; its cancel request and a passed expiry are dropped, a
job its Limit had parked returns to the claim index, and the unique-key rules of a failed job's
requeue hold. A workflow step cancelled while it waited for its parents is left alone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze import Akadze, Cancel, Job, JobState, Limit, Unique, request_cancel, requeue
from akadze.errors import UniqueConflictError
from akadze.testing import drain
from tests.support import execute, fetchval, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def _job(app: Akadze, job_id: int) -> Job:
    job = await app.get_job(job_id)
    assert job is not None
    return job


async def _cancel(app: Akadze, job_id: int) -> None:
    async with app.engine.begin() as conn:
        assert await request_cancel(conn, job_id)


async def test_a_job_cancelled_before_it_ran_is_requeued_and_runs(app: Akadze) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t(n: int) -> int:
        ran.append(n)
        return n

    job = await t.enqueue(n=5)
    await _cancel(app, job.id)
    seen: list[tuple[JobState, JobState]] = []

    def hook(conn: AsyncConnection, moved: Job, from_state: JobState, to_state: JobState) -> None:
        seen.append((from_state, to_state))

    app.hooks.on_transition.append(hook)

    async with app.engine.begin() as conn:
        requeued = await requeue(conn, job.id, app=app)
    assert requeued is not None
    assert (requeued.state, requeued.cancel_requested, requeued.finished_at) == (JobState.QUEUED, False, None)
    assert seen == [(JobState.CANCELLED, JobState.QUEUED)]
    assert await drain(app) == 1
    after = await _job(app, job.id)
    assert (after.state, after.attempt, after.result, ran) == (JobState.SUCCEEDED, 1, 5, [5])


async def test_a_run_that_cancelled_itself_is_requeued_with_its_attempts_and_budget(app: Akadze) -> None:
    calls: list[int] = []

    @app.task("t", max_attempts=1)
    async def t() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Cancel()
        return "ok"

    job = await t.enqueue()
    await drain(app)
    cancelled = await _job(app, job.id)
    assert cancelled.state is JobState.CANCELLED
    async with app.engine.begin() as conn:
        requeued = await requeue(conn, job.id)
    assert requeued is not None
    assert (requeued.attempt, requeued.max_attempts) == (cancelled.attempt, cancelled.attempt + 1)
    assert await drain(app) == 1
    assert (await _job(app, job.id)).state is JobState.SUCCEEDED


async def test_an_expired_job_requeued_runs_instead_of_expiring_again(app: Akadze) -> None:
    @app.task("t")
    async def t() -> str:
        return "ran"

    future = datetime.now(UTC) + timedelta(hours=1)
    expired = await t.using(expires_at=datetime.now(UTC) - timedelta(seconds=1)).enqueue()
    later = await t.using(expires_at=future).enqueue()
    await _cancel(app, later.id)
    assert await drain(app) == 0
    assert (await _job(app, expired.id)).state is JobState.CANCELLED
    async with app.engine.begin() as conn:
        again = await requeue(conn, expired.id)
        kept = await requeue(conn, later.id)
    assert again is not None and again.expires_at is None, "a passed expiry is dropped"
    assert kept is not None and kept.expires_at == future, "one still to come is kept"
    assert await drain(app) == 2
    assert (await _job(app, expired.id)).result == "ran"


async def test_a_job_its_limit_had_parked_goes_back_to_the_claim_index(
    app: Akadze, database_url: str
) -> None:
    @app.task("t", limit=Limit(concurrency=1))
    async def t() -> str:
        return "ran"

    job = await t.enqueue()
    # as a limited claim parks a job whose group is full
    await execute(database_url, f"UPDATE akadze_jobs SET parked = 'limit' WHERE id = {job.id}")
    await _cancel(app, job.id)
    async with app.engine.begin() as conn:
        assert await requeue(conn, job.id) is not None
    assert await fetchval(database_url, "SELECT parked FROM akadze_jobs WHERE id = $1", job.id) is None
    assert await drain(app) == 1
    assert (await _job(app, job.id)).state is JobState.SUCCEEDED


async def test_a_cancelled_job_whose_key_a_newer_job_holds_is_not_requeued(
    make_app: Callable[..., Akadze],
) -> None:
    app = make_app()

    @app.task("once", unique=Unique())
    async def once(account: int) -> None:
        return None

    old = await once.enqueue(account=1)
    await _cancel(app, old.id)  # cancelled frees the key (not a blocking state by default)
    newer = await once.enqueue(account=1)
    assert not newer.duplicate
    async with app.engine.begin() as conn:
        with pytest.raises(UniqueConflictError) as caught:
            await requeue(conn, old.id)
    assert (caught.value.job_id, caught.value.held_by) == (old.id, newer.id)
    assert (await _job(app, old.id)).state is JobState.CANCELLED
    await drain(app)  # the newer one ends: the key is free again
    async with app.engine.begin() as conn:
        assert await requeue(conn, old.id) is not None


async def test_a_workflow_step_cancelled_while_it_waited_for_its_parents_is_left_alone(
    app: Akadze, database_url: str
) -> None:
    @app.task("t")
    async def t() -> None:
        return None

    job = await t.enqueue()
    # as cancel_workflow leaves a step that was waiting for its parents
    await execute(
        database_url,
        "UPDATE akadze_jobs SET state = 'cancelled', parked = 'deps', finished_at = now() "
        f"WHERE id = {job.id}",
    )
    before = await _job(app, job.id)
    async with app.engine.begin() as conn:
        assert await requeue(conn, job.id) is None
    assert await _job(app, job.id) == before
