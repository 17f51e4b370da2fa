"""Running one job: timeouts (async and sync), the thread of a sync task, hooks and their order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from akadze import Akadze, Job, JobState, current
from akadze.testing import drain
from tests.conftest import wait_until
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def job_after(app: Akadze, job_id: int) -> Job:
    job = await app.get_job(job_id)
    assert job is not None
    return job


# -- timeouts ---------------------------------------------------------------------------------


async def test_an_async_task_past_its_timeout_is_cancelled_and_retried(app: Akadze) -> None:
    cleaned_up = asyncio.Event()

    @app.task("slow", timeout=timedelta(milliseconds=200), max_attempts=2)
    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned_up.set()

    job = await slow.enqueue()
    assert await drain(app) == 1
    assert cleaned_up.is_set()
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.QUEUED, 1)
    assert after.errors[0].type.endswith("RunTimeout")
    assert "timeout of 0.2s" in after.errors[0].message


async def test_a_sync_task_past_its_timeout_keeps_its_thread_but_not_its_slot(app: Akadze) -> None:
    release = threading.Event()
    finished = threading.Event()
    threads: list[threading.Thread] = []

    @app.task("sync.slow", timeout=timedelta(milliseconds=200), max_attempts=1, priority=1)
    def sync_slow() -> None:
        threads.append(threading.current_thread())
        release.wait(30)
        finished.set()

    quick_ran: list[int] = []

    @app.task("quick")
    async def quick() -> None:
        quick_ran.append(len(threads))

    slow_job = await sync_slow.enqueue()
    quick_job = await quick.enqueue()
    try:
        # one slot: the quick job can only run once the timed-out thread stopped counting
        assert await asyncio.wait_for(drain(app, slots=1), 10) == 2
        assert quick_ran == [1]
        [thread] = threads
        assert thread is not threading.main_thread()
        assert thread.is_alive(), "the timeout must not stop the thread"
        assert not finished.is_set()
        after = await job_after(app, slow_job.id)
        assert (after.state, after.attempt) == (JobState.FAILED, 1)
        assert after.errors[0].type.endswith("RunTimeout")
        assert (await job_after(app, quick_job.id)).state is JobState.SUCCEEDED
    finally:
        release.set()
    await asyncio.to_thread(threads[0].join, 5)
    assert finished.is_set()
    # the late return of the abandoned thread changed nothing
    assert (await job_after(app, slow_job.id)).state is JobState.FAILED


def test_an_abandoned_thread_that_ends_after_the_worker_stopped_raises_nothing(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    release = threading.Event()
    threads: list[threading.Thread] = []

    async def scenario() -> None:
        async with Akadze(database_url=database_url) as app:

            @app.task("sync.slow", timeout=timedelta(milliseconds=100), max_attempts=1)
            def sync_slow() -> str:
                threads.append(threading.current_thread())
                release.wait(30)
                return "late"

            await sync_slow.enqueue()
            await drain(app)

    asyncio.run(scenario())
    release.set()
    threads[0].join(5)
    assert not threads[0].is_alive()
    assert errors == []


async def test_a_sync_task_runs_in_a_thread_with_its_run_context(app: Akadze) -> None:
    seen: list[Any] = []

    @app.task("sync")
    def sync(n: int) -> int:
        seen.append((threading.current_thread() is threading.main_thread(), current().job.args))
        return n + 1

    job = await sync.enqueue(n=41)
    await drain(app)
    assert seen == [(False, {"n": 41})]
    assert (await job_after(app, job.id)).result == 42


# -- hooks ------------------------------------------------------------------------------------


async def test_hooks_run_in_order_around_the_body_and_may_be_sync_or_async(app: Akadze) -> None:
    events: list[str] = []

    def on_transition(conn: Any, job: Job, from_state: JobState, to_state: JobState) -> None:
        events.append(f"transition {from_state.value}->{to_state.value}")

    async def before_async(job: Job) -> None:
        events.append(f"before_run async {job.state.value}")

    def before_sync(job: Job) -> None:
        events.append("before_run sync")

    async def after_async(job: Job) -> None:
        events.append("after_run async")

    def after_sync(job: Job) -> None:
        events.append("after_run sync")

    app.hooks.on_transition.append(on_transition)
    app.hooks.before_run.extend([before_async, before_sync])
    app.hooks.after_run.extend([after_async, after_sync])

    @app.task("t")
    async def t() -> None:
        events.append("body")

    await t.enqueue()
    await drain(app)
    assert events == [
        "transition queued->running",
        "before_run async running",
        "before_run sync",
        "body",
        "after_run async",
        "after_run sync",
        "transition running->succeeded",
    ]


async def test_after_run_counts_inside_the_timeout(app: Akadze) -> None:
    async def slow_after(job: Job) -> None:
        await asyncio.sleep(30)

    app.hooks.after_run.append(slow_after)

    @app.task("t", timeout=timedelta(milliseconds=300), max_attempts=1)
    async def t() -> str:
        return "body done"

    job = await t.enqueue()
    await asyncio.wait_for(drain(app), 10)
    after = await job_after(app, job.id)
    assert (after.state, after.result) == (JobState.FAILED, None)
    assert after.errors[0].type.endswith("RunTimeout")


async def test_an_error_in_after_run_spends_an_attempt_and_the_body_runs_again(app: Akadze) -> None:
    bodies: list[int] = []

    def after(job: Job) -> None:
        if job.attempt == 1:
            raise RuntimeError("after_run broke")

    app.hooks.after_run.append(after)

    @app.task("t", backoff=lambda attempt: timedelta(0))
    async def t() -> int:
        bodies.append(current().job.attempt)
        return len(bodies)

    job = await t.enqueue()
    assert await drain(app) == 2
    assert bodies == [1, 2]
    after_job = await job_after(app, job.id)
    assert (after_job.state, after_job.attempt, after_job.result) == (JobState.SUCCEEDED, 2, 2)
    assert [(e.attempt, e.type, e.message) for e in after_job.errors] == [
        (1, "RuntimeError", "after_run broke")
    ]


async def test_an_error_in_before_run_spends_an_attempt_without_running_the_body(app: Akadze) -> None:
    bodies: list[int] = []

    def before(job: Job) -> None:
        raise RuntimeError("before_run broke")

    app.hooks.before_run.append(before)

    @app.task("t", max_attempts=1)
    async def t() -> None:
        bodies.append(1)

    job = await t.enqueue()
    await drain(app)
    assert bodies == []
    after = await job_after(app, job.id)
    assert (after.state, after.attempt) == (JobState.FAILED, 1)
    assert after.errors[0].message == "before_run broke"


async def test_run_hooks_see_the_job_as_claimed(app: Akadze) -> None:
    seen: list[tuple[int, int, JobState]] = []
    app.hooks.before_run.append(lambda job: seen.append((job.attempt, job.run, job.state)))
    app.hooks.after_run.append(lambda job: seen.append((job.attempt, job.run, job.state)))

    @app.task("t")
    async def t() -> None: ...

    await t.enqueue()
    await drain(app)
    assert seen == [(1, 1, JobState.RUNNING), (1, 1, JobState.RUNNING)]


async def test_the_run_context_is_the_job_being_run(make_app: Callable[..., Akadze]) -> None:
    app = make_app()
    seen: list[tuple[int, str]] = []

    @app.task("t")
    async def t(label: str) -> None:
        await asyncio.sleep(0.01)
        job = current().job
        seen.append((job.id, job.args["label"]))

    jobs = [await t.enqueue(label=str(n)) for n in range(5)]
    await drain(app)
    assert sorted(seen) == [(job.id, str(n)) for n, job in enumerate(jobs)]


async def test_a_graceful_stop_lets_a_short_run_finish(app: Akadze) -> None:
    from akadze.worker import Worker

    started = asyncio.Event()

    @app.task("t")
    async def t() -> str:
        started.set()
        await asyncio.sleep(0.3)
        return "finished"

    job = await t.enqueue()
    worker = Worker(app, shutdown_timeout=timedelta(seconds=10), listen=False)
    serving = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(started.wait(), 10)
    worker.stop()
    assert await asyncio.wait_for(serving, 10) == 1
    after = await job_after(app, job.id)
    assert (after.state, after.result) == (JobState.SUCCEEDED, "finished")


async def test_a_second_stop_puts_running_jobs_back_at_once(app: Akadze, database_url: str) -> None:
    from akadze.worker import Worker

    @app.task("t")
    async def t() -> None:
        await asyncio.sleep(60)

    job = await t.enqueue()
    worker = Worker(app, shutdown_timeout=timedelta(seconds=60), listen=False)
    serving = asyncio.create_task(worker.run(handle_signals=False))

    async def running() -> bool:
        return (await job_after(app, job.id)).state is JobState.RUNNING

    await wait_until(running)
    worker.stop()
    worker.stop()
    await asyncio.wait_for(serving, 10)
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.errors) == (JobState.QUEUED, 0, ())
    async with app.engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM akadze_workers")) == 0


@pytest.mark.parametrize(
    "raised",
    [asyncio.CancelledError(), KeyboardInterrupt(), SystemExit(3)],
    ids=["cancelled-error", "keyboard-interrupt", "system-exit"],
)
async def test_a_task_raising_a_base_exception_spends_an_attempt_and_the_worker_carries_on(
    app: Akadze, raised: BaseException
) -> None:
    """Only a stop of the worker puts a job back without spending an attempt: a task that
    raises CancelledError itself (an inner operation that was cancelled) failed."""
    runs: list[int] = []

    @app.task("t", max_attempts=2, backoff=lambda attempt: timedelta(0))
    async def t() -> str:
        runs.append(current().job.attempt)
        if len(runs) == 1:
            raise raised
        return "second run"

    job = await t.enqueue()
    assert await asyncio.wait_for(drain(app), 10) == 2
    after = await job_after(app, job.id)
    assert (after.state, after.attempt, after.result) == (JobState.SUCCEEDED, 2, "second run")
    assert [e.attempt for e in after.errors] == [1]
    assert after.errors[0].type.endswith(type(raised).__name__)
