"""current().complete_tx(): the user's writes and the job's success commit together or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text

from akadze import Akadze, Job, JobState, current, request_cancel
from akadze.errors import LostOwnershipError
from akadze.testing import drain
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import execute, fetch, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


@pytest.fixture
async def ledger(database_url: str) -> AsyncIterator[str]:
    await execute(
        database_url, "CREATE TABLE ledger (job_id bigint, run integer, note text, UNIQUE (job_id, run))"
    )
    yield database_url


async def ledger_rows(database_url: str) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in await fetch(database_url, "SELECT job_id, run, note FROM ledger ORDER BY job_id, run")
    ]


async def write_ledger(conn: Any, note: str = "") -> None:
    job = current().job
    await conn.execute(
        text("INSERT INTO ledger VALUES (:id, :run, :note)"), {"id": job.id, "run": job.run, "note": note}
    )


async def job_after(app: Akadze, job_id: int) -> Job:
    job = await app.get_job(job_id)
    assert job is not None
    return job


async def test_the_writes_and_the_success_commit_together(app: Akadze, ledger: str) -> None:
    @app.task("step")
    async def step(n: int) -> int:
        async with current().complete_tx() as conn:
            await write_ledger(conn, "done")
        return n * 2

    job = await step.enqueue(n=21)
    assert await drain(app) == 1
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 1, 42)
    assert after.finished_at is not None
    assert await ledger_rows(ledger) == [(job.id, 1, "done")]


async def test_complete_tx_yields_a_connection_in_an_open_transaction(app: Akadze) -> None:
    seen: list[Any] = []

    @app.task("step")
    async def step() -> None:
        async with current().complete_tx() as conn:
            seen.append((conn.in_transaction(), await conn.scalar(text("SELECT state FROM akadze_jobs"))))

    await step.enqueue()
    await drain(app)
    assert seen == [(True, "running")]


async def test_an_error_inside_the_block_rolls_the_writes_back_and_spends_an_attempt(
    app: Akadze, ledger: str
) -> None:
    @app.task("step", backoff=lambda attempt: timedelta(0))
    async def step() -> str:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
            if current().job.attempt == 1:
                raise ValueError("inside the block")
        return "second time"

    job = await step.enqueue()
    assert await drain(app) == 2
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 2, "second time")
    assert [(e.attempt, e.type, e.message) for e in after.errors] == [(1, "ValueError", "inside the block")]
    assert await ledger_rows(ledger) == [(job.id, 2, "")]


async def test_a_follow_up_enqueued_in_the_block_exists_only_if_the_step_succeeds(
    app: Akadze, ledger: str
) -> None:
    notified: list[int] = []

    @app.task("notify")
    async def notify(report_id: int) -> None:
        notified.append(report_id)

    @app.task("build", max_attempts=1)
    async def build(report_id: int) -> None:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
            await notify.using(session=conn).enqueue(report_id=report_id)
            if report_id < 0:
                raise RuntimeError("the step failed")

    good = await build.enqueue(report_id=1)
    bad = await build.enqueue(report_id=-1)
    assert await drain(app) == 3
    assert notified == [1]
    assert (await job_after(app, good.id)).state is JobState.SUCCEEDED
    assert (await job_after(app, bad.id)).state is JobState.FAILED
    assert await fetchval(ledger, "SELECT count(*) FROM akadze_jobs WHERE task = 'notify'") == 1
    assert await ledger_rows(ledger) == [(good.id, 1, "")]


async def test_a_second_complete_tx_in_one_run_raises_and_the_first_stands(app: Akadze) -> None:
    errors: list[str] = []

    @app.task("step", max_attempts=1)
    async def step() -> None:
        async with current().complete_tx():
            pass
        try:
            async with current().complete_tx():
                pass
        except RuntimeError as exc:
            errors.append(str(exc))

    job = await step.enqueue()
    await drain(app)
    assert (await job_after(app, job.id)).state is JobState.SUCCEEDED
    assert len(errors) == 1
    assert "already committed" in errors[0]


async def test_an_error_after_the_block_committed_leaves_the_job_succeeded(app: Akadze, ledger: str) -> None:
    @app.task("step")
    async def step() -> None:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
        raise RuntimeError("after the commit")

    job = await step.enqueue()
    assert await drain(app) == 1
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.errors) == (JobState.SUCCEEDED, 1, ())
    assert await ledger_rows(ledger) == [(job.id, 1, "")]


async def test_a_failing_on_transition_hook_rolls_back_the_block_and_spends_an_attempt(
    app: Akadze, ledger: str
) -> None:
    def hook(conn: Any, job: Job, from_state: JobState, to_state: JobState) -> None:
        if to_state is JobState.SUCCEEDED and job.attempt == 1:
            raise RuntimeError("hook refused")

    app.hooks.on_transition.append(hook)

    @app.task("step", backoff=lambda attempt: timedelta(0))
    async def step() -> None:
        async with current().complete_tx() as conn:
            await write_ledger(conn)

    job = await step.enqueue()
    assert await drain(app) == 2
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.SUCCEEDED, 2)
    assert await ledger_rows(ledger) == [(job.id, 2, "")]


async def test_the_job_row_is_not_locked_while_the_block_runs(app: Akadze, database_url: str) -> None:
    locked: list[bool] = []

    @app.task("step")
    async def step() -> None:
        async with current().complete_tx() as conn:
            await conn.execute(text("SELECT 1"))
            other = await asyncpg.connect(plain(database_url))
            try:
                async with other.transaction():
                    await other.execute("SET LOCAL lock_timeout = '100ms'")
                    await other.execute(
                        "SELECT 1 FROM akadze_jobs WHERE id = $1 FOR UPDATE", current().job.id
                    )
                locked.append(False)
            except asyncpg.LockNotAvailableError:
                locked.append(True)
            finally:
                await other.close()

    await step.enqueue()
    await drain(app)
    assert locked == [False]


async def test_the_result_is_stored_before_drain_returns(app: Akadze, database_url: str) -> None:
    """The return value is written after the block committed; a burst must wait for it."""
    committed = asyncio.Event()
    go = asyncio.Event()

    @app.task("step")
    async def step() -> str:
        async with current().complete_tx():
            pass
        committed.set()
        await go.wait()
        return "the result"

    job = await step.enqueue()
    draining = asyncio.create_task(drain(app))
    await asyncio.wait_for(committed.wait(), 10)
    holder = await asyncpg.connect(plain(database_url))
    try:
        # hold the row so that storing the result has to wait
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM akadze_jobs WHERE id = $1 FOR UPDATE", job.id)
        go.set()

        async def result_waits() -> bool:
            waiting = await fetchval(
                database_url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            return bool(waiting)

        await wait_until(result_waits)
        # the run is not over while its result is not stored: drain cannot return yet
        done, _ = await asyncio.wait({draining}, timeout=1)
        assert not done, "drain returned before the result was stored"
        await tx.rollback()
    finally:
        await holder.close()
    await asyncio.wait_for(draining, 10)
    after = await job_after(app, job.id)
    assert (after.state, after.result) == (JobState.SUCCEEDED, "the result")


# -- a cancel, an expiry or a rescue while the block runs -------------------------------------


class Gate:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def hold(self) -> None:
        self.entered.set()
        await asyncio.wait_for(self.go.wait(), 20)


@pytest.mark.parametrize("fails", [False, True], ids=["block-ends", "block-raises"])
@pytest.mark.parametrize("interruption", ["cancel", "expiry"])
async def test_a_cancel_or_expiry_during_the_block_does_not_stop_it(
    app: Akadze, ledger: str, interruption: str, fails: bool
) -> None:
    gate = Gate()

    @app.task("step")
    async def step() -> str:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
            await gate.hold()
            if fails:
                raise ValueError("inside the block")
        return "committed"

    using: dict[str, Any] = {}
    if interruption == "expiry":
        using["expires_at"] = datetime.now(UTC) + timedelta(minutes=10)
    job = await step.using(**using).enqueue()
    draining = asyncio.create_task(drain(app))
    await asyncio.wait_for(gate.entered.wait(), 10)
    if interruption == "cancel":
        async with app.engine.begin() as conn:
            assert await request_cancel(conn, job.id) is True
    else:
        # it expires while the block runs (an expiry fixed at the enqueue could pass before a
        # slow claim, which would end the job unrun: another rule)
        await fetchval(ledger, "UPDATE akadze_jobs SET expires_at = now() RETURNING id")

        async def expired() -> bool:
            return bool(await fetchval(ledger, "SELECT expires_at <= now() FROM akadze_jobs"))

        await wait_until(expired)
    gate.go.set()
    await asyncio.wait_for(draining, 10)
    after = await job_after(app, job.id)
    if fails:
        # an error in the block: cancelled, writes rolled back, no attempt spent
        assert (after.state, after.attempt, after.result) == (JobState.CANCELLED, 0, None)
        assert await ledger_rows(ledger) == []
    else:
        assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 1, "committed")
        assert await ledger_rows(ledger) == [(job.id, 1, "")]


async def test_a_run_that_lost_its_job_inside_the_block_rolls_back_and_the_new_owner_succeeds(
    app: Akadze, ledger: str
) -> None:
    gate = Gate()
    outcomes: list[tuple[int, str]] = []

    @app.task("step")
    async def step() -> str:
        run = current().job.run
        try:
            async with current().complete_tx() as conn:
                await write_ledger(conn, f"run {run}")
                if run == 1:
                    await gate.hold()
        except LostOwnershipError as exc:
            outcomes.append((run, f"lost: job {exc.job_id} run {exc.run}"))
            raise
        outcomes.append((run, "committed"))
        return f"run {run}"

    job = await step.enqueue()
    first = asyncio.create_task(drain(app))
    await asyncio.wait_for(gate.entered.wait(), 10)
    # the first worker is declared lost; another rescues its job, which becomes ready at once
    await execute(ledger, "DELETE FROM akadze_workers")
    await rescue_lost(app.engine)  # unless the worker's own rescuer came first
    rescued = await app.get_job(job.id)
    assert rescued is not None
    assert (rescued.state, rescued.attempt) == (JobState.QUEUED, 1)
    await execute(ledger, "UPDATE akadze_jobs SET run_at = now()")
    second = asyncio.create_task(drain(app))

    async def taken_over() -> bool:
        return (await job_after(app, job.id)).state is JobState.SUCCEEDED

    await wait_until(taken_over)
    gate.go.set()
    await asyncio.wait_for(asyncio.gather(first, second), 15)
    assert outcomes == [(2, "committed"), (1, f"lost: job {job.id} run 1")]
    after = await job_after(app, job.id)
    assert (after.state, after.run, after.attempt, after.result) == (JobState.SUCCEEDED, 2, 2, "run 2")
    assert [e.type for e in after.errors] == ["akadze.WorkerLost"]
    assert await ledger_rows(ledger) == [(job.id, 2, "run 2")]


async def test_a_timeout_inside_the_block_rolls_the_writes_back_and_spends_an_attempt(
    app: Akadze, ledger: str
) -> None:
    @app.task("step", timeout=timedelta(milliseconds=300), max_attempts=1)
    async def step() -> None:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
            await asyncio.sleep(30)

    job = await step.enqueue()
    await asyncio.wait_for(drain(app), 10)
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.FAILED, 1)
    assert after.errors[0].type.endswith("RunTimeout")
    assert await ledger_rows(ledger) == []


async def test_a_stop_while_the_block_runs_rolls_it_back_and_puts_the_job_back(
    app: Akadze, ledger: str
) -> None:
    from akadze.worker import Worker

    gate = Gate()

    @app.task("step")
    async def step() -> None:
        async with current().complete_tx() as conn:
            await write_ledger(conn)
            await gate.hold()

    job = await step.enqueue()
    worker = Worker(app, shutdown_timeout=timedelta(milliseconds=200), listen=False)
    serving = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(gate.entered.wait(), 10)
    worker.stop()
    await asyncio.wait_for(serving, 10)
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.errors) == (JobState.QUEUED, 0, ())
    assert await ledger_rows(ledger) == []
