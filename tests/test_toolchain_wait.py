"""current().cancel_requested, app.wait_for and the client side's get_job / wait_for (issue 17)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

import akadze.client
from akadze import Akadze, Cancel, JobState, current, request_cancel
from akadze.app import create_engine
from akadze.db.queries import Queries
from akadze.errors import ConfigError, JobNotFoundError
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.support import execute, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


@asynccontextmanager
async def serving(app: Akadze, **options: Any) -> AsyncIterator[Worker]:
    options.setdefault("poll_interval", timedelta(milliseconds=100))
    worker = Worker(app, **options)
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        yield worker
    finally:
        worker.stop(now=True)
        await running


async def cancel(app: Akadze, job_id: int) -> None:
    async with app.engine.begin() as conn:
        assert await request_cancel(conn, job_id)


async def state_of(database_url: str, job_id: int) -> str:
    return str(await fetchval(database_url, "SELECT state FROM akadze_jobs WHERE id = $1", job_id))


# -- cancel_requested -----------------------------------------------------------------------------


async def test_a_running_task_sees_cancel_requested_within_a_heartbeat_and_may_stop(app: Akadze) -> None:
    seen: list[bool] = []

    @app.task("loop")
    async def loop() -> str:
        seen.append(current().cancel_requested)
        while not current().cancel_requested:
            await asyncio.sleep(0.01)
        raise Cancel()

    job = await loop.enqueue()
    interval = timedelta(milliseconds=200)
    async with serving(app, heartbeat_interval=interval, lost_after=timedelta(seconds=3)):
        await wait_until(lambda: bool(seen))
        asked = time.monotonic()
        await cancel(app, job.id)
        done = await app.wait_for(job.id, timeout=10)
        took = time.monotonic() - asked
    assert seen == [False]
    assert done.state is JobState.CANCELLED
    # one heartbeat interval for the refresh, plus the completion: well under the lost horizon
    assert took < 2.0, took


async def test_a_sync_task_sees_cancel_requested_in_its_thread(app: Akadze) -> None:
    started: list[int] = []

    @app.task("sync_loop")
    def sync_loop() -> str:
        started.append(1)
        deadline = time.monotonic() + 10
        while not current().cancel_requested and time.monotonic() < deadline:
            time.sleep(0.01)
        return "stopped" if current().cancel_requested else "timed out"

    job = await sync_loop.enqueue()
    async with serving(app, heartbeat_interval=timedelta(milliseconds=200), lost_after=timedelta(seconds=3)):
        await wait_until(lambda: bool(started))
        await cancel(app, job.id)
        done = await app.wait_for(job.id, timeout=10)
    # returning normally after a cancel request: the spec's rules say succeeded, with its result
    assert (done.state, done.result) == (JobState.SUCCEEDED, "stopped")


async def test_cancel_requests_are_read_in_one_query_per_heartbeat_for_all_running_jobs(
    app: Akadze, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []
    original = Queries.cancel_requests

    async def counted(conn: Any, worker_id: str) -> list[int]:
        calls.append(time.monotonic())
        return await original(conn, worker_id)

    monkeypatch.setattr(Queries, "cancel_requests", staticmethod(counted))
    release = asyncio.Event()
    flags: dict[int, bool] = {}

    @app.task("hold")
    async def hold(n: int) -> None:
        await release.wait()
        flags[n] = current().cancel_requested

    jobs = [await hold.enqueue(n=n) for n in range(6)]
    interval = 0.2
    async with serving(app, slots=6, heartbeat_interval=timedelta(seconds=interval)):
        await wait_until(
            lambda: fetchval(app_url(app), "SELECT count(*) = 6 FROM akadze_jobs WHERE state = 'running'")
        )
        for job in jobs[:3]:
            await cancel(app, job.id)
        first = time.monotonic()
        before = len(calls)
        await asyncio.sleep(interval * 5)
        window = time.monotonic() - first
        during = len(calls) - before
        release.set()
        for job in jobs:
            await app.wait_for(job.id, timeout=10)
    assert flags == {0: True, 1: True, 2: True, 3: False, 4: False, 5: False}
    # six runs, about five intervals: about five queries, never one per job per interval
    assert 1 <= during <= window / interval + 1, (during, window)


def app_url(app: Akadze) -> str:
    return app.engine.url.render_as_string(hide_password=False)


async def test_no_cancel_query_runs_while_the_worker_runs_nothing(
    app: Akadze, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    async def counted(conn: Any, worker_id: str) -> list[int]:
        calls.append(1)
        return []

    monkeypatch.setattr(Queries, "cancel_requests", staticmethod(counted))

    @app.task("noop")
    async def noop() -> None: ...

    async with serving(app, heartbeat_interval=timedelta(milliseconds=100)):
        await asyncio.sleep(0.5)
    assert calls == []


# -- wait_for -------------------------------------------------------------------------------------


async def test_wait_for_returns_the_finished_job_woken_by_its_notification(app: Akadze) -> None:
    gate = asyncio.Event()

    @app.task("double")
    async def double(x: int) -> int:
        await gate.wait()
        return 2 * x

    job = await double.enqueue(x=21)
    async with serving(app):
        # the poll is an hour away: only the notification can wake the waiter in time
        waiting = asyncio.create_task(app.wait_for(job.id, timeout=20, poll_interval=timedelta(hours=1)))
        await wait_until(
            lambda: fetchval(app_url(app), "SELECT awaited FROM akadze_jobs WHERE id = $1", job.id)
        )
        gate.set()
        started = time.monotonic()
        done = await waiting
    assert time.monotonic() - started < 5
    assert (done.id, done.state, done.result) == (job.id, JobState.SUCCEEDED, 42)


async def test_wait_for_a_job_already_finished_returns_at_once(app: Akadze) -> None:
    @app.task("fails")
    async def fails() -> None:
        raise RuntimeError("no")

    job = await fails.using().enqueue()
    await execute(app_url(app), f"UPDATE akadze_jobs SET max_attempts = 1 WHERE id = {job.id}")
    from akadze.testing import drain

    await drain(app)
    done = await app.wait_for(job.id, timeout=timedelta(seconds=5))
    assert done.state is JobState.FAILED


async def test_wait_for_falls_back_to_polling_when_no_notification_comes(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    waiting = asyncio.create_task(app.wait_for(job.id, timeout=10, poll_interval=timedelta(milliseconds=100)))
    await wait_until(lambda: fetchval(app_url(app), "SELECT awaited FROM akadze_jobs WHERE id = $1", job.id))
    # finished by a path that sends nothing (as a claim that finds a job expired does)
    await execute(
        app_url(app), f"UPDATE akadze_jobs SET state = 'cancelled', finished_at = now() WHERE id = {job.id}"
    )
    done = await waiting
    assert done.state is JobState.CANCELLED


async def test_wait_for_wakes_when_a_queued_job_it_waits_for_is_cancelled(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    waiting = asyncio.create_task(app.wait_for(job.id, timeout=10, poll_interval=timedelta(hours=1)))
    await wait_until(lambda: fetchval(app_url(app), "SELECT awaited FROM akadze_jobs WHERE id = $1", job.id))
    await cancel(app, job.id)
    assert (await waiting).state is JobState.CANCELLED


async def test_wait_for_raises_timeout_error_after_its_timeout(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await app.wait_for(job.id, timeout=0.3)
    assert 0.25 < time.monotonic() - started < 3
    # a retry (queued again) is not finished either
    assert await state_of(app_url(app), job.id) == "queued"


async def test_wait_for_an_unknown_job_and_bad_timeouts_are_clear_errors(app: Akadze) -> None:
    with pytest.raises(JobNotFoundError, match="job 987654 does not exist"):
        await app.wait_for(987654, timeout=5)
    with pytest.raises(ConfigError, match="timeout"):
        await app.wait_for(1, timeout=-1)
    with pytest.raises(ConfigError, match="timeout"):
        await app.wait_for(1, timeout="soon")  # type: ignore[arg-type]


async def test_many_waiters_share_one_listening_connection(app: Akadze) -> None:
    gate = asyncio.Event()

    @app.task("t")
    async def t(n: int) -> int:
        await gate.wait()
        return n

    jobs = [await t.enqueue(n=n) for n in range(20)]
    async with serving(app, slots=20):
        waiters = [asyncio.create_task(app.wait_for(j.id, timeout=20)) for j in jobs]
        await wait_until(
            lambda: fetchval(app_url(app), "SELECT count(*) = 20 FROM akadze_jobs WHERE awaited")
        )
        listening = await fetchval(
            app_url(app),
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN%akadze_done%'",
        )
        gate.set()
        results = [job.result for job in await asyncio.gather(*waiters)]
    assert results == list(range(20))
    assert listening == 1


async def test_only_awaited_jobs_send_a_notification_when_they_finish(app: Akadze) -> None:
    received: list[str] = []
    listener = await asyncpg.connect(plain(app_url(app)))
    await listener.add_listener("akadze_done", lambda *args: received.append(args[3]))
    gate = asyncio.Event()
    try:

        @app.task("t")
        async def t() -> None:
            await gate.wait()

        quiet = [await t.enqueue() for _ in range(5)]
        watched = await t.enqueue()
        async with serving(app):
            waiting = asyncio.create_task(app.wait_for(watched.id, timeout=10))
            await wait_until(
                lambda: fetchval(app_url(app), "SELECT awaited FROM akadze_jobs WHERE id = $1", watched.id)
            )
            gate.set()
            await waiting
            await wait_until(
                lambda: fetchval(
                    app_url(app), "SELECT count(*) = 6 FROM akadze_jobs WHERE state = 'succeeded'"
                )
            )
        await wait_until(lambda: bool(received))
        await asyncio.sleep(0.2)  # a notification for a quiet job would have arrived by now
    finally:
        await listener.close()
    assert received == [str(watched.id)]
    assert not any(
        [await fetchval(app_url(app), "SELECT awaited FROM akadze_jobs WHERE id = $1", j.id) for j in quiet]
    )


# -- the client side ------------------------------------------------------------------------------


async def test_the_client_reads_and_waits_for_jobs_without_the_worker_app(
    app: Akadze, database_url: str
) -> None:
    from akadze.client import Job as ClientJob, JobState as ClientJobState

    @app.task("echo")
    async def echo(word: str) -> str:
        return word

    job = await echo.enqueue(word="hi")
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            seen = await akadze.client.get_job(conn, job.id)
        async with AsyncSession(engine) as session:
            assert (await akadze.client.get_job(session, job.id)) == seen
        assert isinstance(seen, ClientJob) and seen.state is ClientJobState.QUEUED
        assert await akadze.client.get_job(engine, 10**9) is None
        async with serving(app):
            done = await akadze.client.wait_for(job.id, timeout=10, engine=engine)
        assert (done.state, done.result) == (ClientJobState.SUCCEEDED, "hi")
        with pytest.raises(ConfigError, match="AsyncConnection, AsyncSession or AsyncEngine"):
            await akadze.client.get_job("postgresql://x", job.id)  # type: ignore[arg-type]
    finally:
        await engine.dispose()


async def test_client_wait_for_without_a_database_says_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AKADZE_DATABASE_URL", raising=False)
    await akadze.client.dispose()
    with pytest.raises(ConfigError, match="configure"):
        await akadze.client.wait_for(1, timeout=1)
