"""request_cancel and requeue, in the caller's transaction; a cancel or an expiry racing a run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from akadze import Akadze, Cancel, Fail, Job, JobState, Retry, Snooze, request_cancel, requeue
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.testing import drain
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import fetchval, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def job_after(app: Akadze, job_id: int) -> Job:
    job = await app.get_job(job_id)
    assert job is not None
    return job


async def cancel(app: Akadze, job_id: int) -> bool:
    async with app.engine.begin() as conn:
        return await request_cancel(conn, job_id)


# -- request_cancel -----------------------------------------------------------------------------


async def test_a_cancelled_queued_job_ends_cancelled_without_running(app: Akadze) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t() -> None:
        ran.append(1)

    job = await t.enqueue()
    assert await cancel(app, job.id) is True
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.cancel_requested) == (JobState.CANCELLED, 0, True)
    assert after.finished_at is not None
    assert await drain(app) == 0
    assert ran == []


async def test_a_job_waiting_for_its_retry_can_be_cancelled(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        raise Retry(timedelta(hours=1))

    job = await t.enqueue()
    await drain(app)
    assert await cancel(app, job.id) is True
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.CANCELLED, 1)


@pytest.mark.parametrize(
    ("body", "state"),
    [
        (lambda: None, JobState.SUCCEEDED),
        (lambda: (_ for _ in ()).throw(Fail("no")), JobState.FAILED),
        (lambda: (_ for _ in ()).throw(Cancel()), JobState.CANCELLED),
    ],
    ids=["succeeded", "failed", "cancelled"],
)
async def test_cancelling_a_finished_job_changes_nothing(
    app: Akadze, body: Callable[[], None], state: JobState
) -> None:
    @app.task("t")
    async def t() -> None:
        body()

    job = await t.enqueue()
    await drain(app)
    before = await job_after(app, job.id)
    assert before.state is state
    assert await cancel(app, job.id) is False
    assert await job_after(app, job.id) == before


async def test_cancelling_a_missing_job_changes_nothing(app: Akadze) -> None:
    assert await cancel(app, 123456) is False


async def test_a_cancel_commits_or_rolls_back_with_the_callers_session(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    kept = await t.enqueue()
    undone = await t.enqueue()
    async with AsyncSession(app.engine) as session:
        assert await request_cancel(session, undone.id) is True
        await session.rollback()
        assert await request_cancel(session, kept.id) is True
        await session.commit()
    assert (await job_after(app, kept.id)).state is JobState.CANCELLED
    assert (await job_after(app, undone.id)).state is JobState.QUEUED


async def test_request_cancel_wants_a_sqlalchemy_connection(app: Akadze) -> None:
    with pytest.raises(ConfigError, match="AsyncConnection or AsyncSession"):
        await request_cancel(app.engine, 1)  # type: ignore[arg-type]


# -- a cancel (or an expiry) while the body runs ---------------------------------------------


class Gate:
    """Holds a task's body until the test let it go."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def hold(self) -> None:
        self.entered.set()
        await self.go.wait()


async def _returns(gate: Gate) -> Any:
    await gate.hold()
    return {"done": True}


async def _returns_non_json(gate: Gate) -> Any:
    await gate.hold()
    return datetime.now(UTC)


async def _raises(gate: Gate) -> Any:
    await gate.hold()
    raise ValueError("broken")


async def _retry(gate: Gate) -> Any:
    await gate.hold()
    raise Retry(timedelta(0))


async def _snooze(gate: Gate) -> Any:
    await gate.hold()
    raise Snooze(timedelta(0))


async def _fail(gate: Gate) -> Any:
    await gate.hold()
    raise Fail("no")


async def _cancel(gate: Gate) -> Any:
    await gate.hold()
    raise Cancel()


async def _times_out(gate: Gate) -> Any:
    await gate.hold()
    await asyncio.sleep(30)


RACING_BODIES: dict[str, Callable[[Gate], Awaitable[Any]]] = {
    "returns": _returns,
    "returns-non-json": _returns_non_json,
    "raises": _raises,
    "raises-retry": _retry,
    "raises-snooze": _snooze,
    "raises-fail": _fail,
    "raises-cancel": _cancel,
    "times-out": _times_out,
}


async def _run_racing(
    app: Akadze,
    body: Callable[[Gate], Awaitable[Any]],
    interrupt: Callable[[Job], Awaitable[None]],
    **using: Any,
) -> Job:
    gate = Gate()

    @app.task("racing", timeout=timedelta(seconds=1.5))
    async def racing() -> Any:
        return await body(gate)

    job = await racing.using(**using).enqueue()
    draining = asyncio.create_task(drain(app))
    await asyncio.wait_for(gate.entered.wait(), 10)
    await interrupt(await job_after(app, job.id))
    gate.go.set()
    await asyncio.wait_for(draining, 15)
    return await job_after(app, job.id)


@pytest.mark.parametrize("body", RACING_BODIES.values(), ids=RACING_BODIES.keys())
async def test_a_cancel_while_the_body_runs_does_not_interrupt_it(
    app: Akadze, body: Callable[[Gate], Awaitable[Any]]
) -> None:
    async def interrupt(job: Job) -> None:
        assert job.state is JobState.RUNNING
        assert await cancel(app, job.id) is True
        marked = await job_after(app, job.id)
        assert (marked.state, marked.cancel_requested) == (JobState.RUNNING, True)

    after = await _run_racing(app, body, interrupt)
    if body is _returns:
        # its side effects happened: the job succeeded with its result
        assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 1, {"done": True})
    else:
        assert (after.state, after.attempt, after.result) == (JobState.CANCELLED, 0, None)
        assert after.finished_at is not None


@pytest.mark.parametrize("body", RACING_BODIES.values(), ids=RACING_BODIES.keys())
async def test_an_expiry_while_the_body_runs_follows_the_cancel_rules(
    app: Akadze, database_url: str, body: Callable[[Gate], Awaitable[Any]]
) -> None:
    async def interrupt(job: Job) -> None:
        # the job expires while its body runs: its expiry is moved to now once the body has
        # started (an expiry a fixed time after the enqueue could pass before a slow claim,
        # which then ends the job without running it: another rule, tested elsewhere)
        await fetchval(database_url, "UPDATE akadze_jobs SET expires_at = now() RETURNING id")

        async def expired() -> bool:
            return bool(await fetchval(database_url, "SELECT expires_at <= now() FROM akadze_jobs"))

        await wait_until(expired)

    after = await _run_racing(app, body, interrupt, expires_at=datetime.now(UTC) + timedelta(minutes=10))
    if body is _returns:
        assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 1, {"done": True})
    else:
        assert (after.state, after.attempt) == (JobState.CANCELLED, 0)


# -- requeue -----------------------------------------------------------------------------------


class Broken:
    """A task that fails until it is fixed."""

    def __init__(self, app: Akadze, *, max_attempts: int, fail_now: bool = False) -> None:
        self.app = app
        self.fixed = False

        @app.task("flaky", max_attempts=max_attempts, backoff=lambda attempt: timedelta(0))
        async def flaky(n: int, payload: dict[str, Any]) -> str:
            if self.fixed:
                return "ok"
            if fail_now:
                raise Fail("not yet")
            raise ValueError("not yet")

        self.task = flaky

    async def failed_job(self) -> Job:
        job = await self.task.enqueue(n=7, payload={"deep": [1, 2]})
        await drain(self.app)
        failed = await job_after(self.app, job.id)
        assert failed.state is JobState.FAILED
        return failed


async def test_requeue_moves_a_failed_job_back_keeping_attempt_errors_and_args(app: Akadze) -> None:
    broken = Broken(app, max_attempts=2)
    failed = await broken.failed_job()
    assert (failed.attempt, failed.max_attempts, len(failed.errors)) == (2, 2, 2)
    async with app.engine.begin() as conn:
        requeued = await requeue(conn, failed.id)
    assert requeued is not None
    assert requeued.state is JobState.QUEUED
    assert (requeued.attempt, requeued.errors, requeued.args) == (2, failed.errors, failed.args)
    assert requeued.max_attempts == 3, "the spent budget grows so the job runs once more"
    assert requeued.finished_at is None
    broken.fixed = True
    assert await drain(app) == 1
    after = await job_after(app, failed.id)
    assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 3, "ok")


async def test_requeue_keeps_a_budget_that_is_not_spent(app: Akadze) -> None:
    failed = await Broken(app, max_attempts=5, fail_now=True).failed_job()
    assert (failed.attempt, failed.max_attempts) == (1, 5)
    async with app.engine.begin() as conn:
        requeued = await requeue(conn, failed.id)
    assert requeued is not None
    assert (requeued.attempt, requeued.max_attempts) == (1, 5)


async def test_a_requeued_job_that_fails_again_ends_failed_after_one_more_run(app: Akadze) -> None:
    @app.task("broken", max_attempts=1)
    async def broken() -> None:
        raise ValueError("still broken")

    job = await broken.enqueue()
    await drain(app)
    async with app.engine.begin() as conn:
        assert await requeue(conn, job.id) is not None
    assert await drain(app) == 1
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.max_attempts, len(after.errors)) == (JobState.FAILED, 2, 2, 2)


async def test_requeue_happens_in_the_callers_transaction(app: Akadze) -> None:
    failed = await Broken(app, max_attempts=1).failed_job()
    async with app.engine.connect() as conn:
        await conn.begin()
        assert await requeue(conn, failed.id) is not None
        await conn.rollback()
    assert await job_after(app, failed.id) == failed
    async with AsyncSession(app.engine) as session:
        assert await requeue(session, failed.id) is not None
        await session.commit()
    assert (await job_after(app, failed.id)).state is JobState.QUEUED


async def test_requeue_of_a_job_that_is_neither_failed_nor_cancelled_changes_nothing(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    done = await t.enqueue()
    await drain(app)
    assert (await job_after(app, done.id)).state is JobState.SUCCEEDED
    queued = await t.enqueue()
    for job_id in (done.id, queued.id, 987654):
        before = await app.get_job(job_id)
        async with app.engine.begin() as conn:
            assert await requeue(conn, job_id) is None
        assert await app.get_job(job_id) == before


async def test_a_second_cancel_of_a_running_job_is_accepted(app: Akadze) -> None:
    """The job is still active and the request stands: the CLI must not say "not active"."""

    async def interrupt(job: Job) -> None:
        assert await cancel(app, job.id) is True
        assert await cancel(app, job.id) is True

    after = await _run_racing(app, _raises, interrupt)
    assert after.state is JobState.CANCELLED


async def test_a_cancelled_running_job_whose_worker_is_lost_ends_cancelled_without_running_again(
    app: Akadze,
) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t() -> None:
        ran.append(1)

    job = await t.enqueue()
    async with app.engine.connect() as conn:
        await Queries.claim(conn, ["default"], 1, "00000000-0000-0000-0000-000000000004")
        await conn.commit()
    assert await cancel(app, job.id) is True
    [rescued] = await rescue_lost(app.engine)
    assert (rescued.id, rescued.state) == (job.id, JobState.CANCELLED)
    assert await drain(app) == 0
    assert ran == []
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.CANCELLED, 0)
