"""Queue pause (DESIGN §5): persisted, so a worker started later skips a paused queue; running
jobs finish; enqueue still works; a queue may be paused before it has any job; pause and
resume are idempotent, NOTIFY every listening worker, and polling sees them within
poll_interval."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from akadze import Akadze, JobState
from akadze.errors import ConfigError
from akadze.testing import drain
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.support import fetch, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def states(database_url: str) -> list[str]:
    return [r["state"] for r in await fetch(database_url, "SELECT state FROM akadze_jobs ORDER BY id")]


async def test_pause_and_resume_are_idempotent_and_say_what_changed(app: Akadze, database_url: str) -> None:
    assert await app.pause_queue("mail") is True
    assert await app.pause_queue("mail") is False
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == [("mail",)]
    assert await app.resume_queue("mail") is True
    assert await app.resume_queue("mail") is False
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == []
    with pytest.raises(ConfigError, match="queue name"):
        await app.pause_queue("")


async def test_a_queue_paused_before_it_has_a_job_is_skipped_by_a_worker_started_later(
    app: Akadze, database_url: str
) -> None:
    ran: list[str] = []

    @app.task("mail.send", queue="mail")
    async def send(to: str) -> None:
        ran.append(to)

    @app.task("other", queue="other")
    async def other() -> None:
        ran.append("other")

    await app.pause_queue("mail")  # no job in it yet
    await send.enqueue(to="a")  # enqueue still works
    await other.enqueue()
    # a fresh app: nothing carried in memory, the pause is in the database
    later = Akadze(database_url=database_url)
    later.tasks.update(app.tasks)
    try:
        assert await drain(later) == 1
    finally:
        await later.dispose()
    assert ran == ["other"]
    assert await states(database_url) == ["queued", "succeeded"]
    await app.resume_queue("mail")
    assert await drain(app) == 1
    assert ran == ["other", "a"]


async def test_pause_while_jobs_run_lets_them_finish_and_claims_no_more(
    app: Akadze, database_url: str
) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    @app.task("slow", queue="work")
    async def slow(n: int) -> None:
        started.set()
        await release.wait()

    first = await slow.enqueue(n=0)
    worker = Worker(app, queues=["work"], slots=1, poll_interval=timedelta(milliseconds=100))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await asyncio.wait_for(started.wait(), 10)
        await app.pause_queue("work")
        rest = await slow.enqueue_many([{"n": n} for n in range(1, 4)])
        release.set()
        await wait_until(
            lambda: fetchval(
                database_url, "SELECT state = 'succeeded' FROM akadze_jobs WHERE id = $1", first.id
            )
        )
        # several poll intervals pass: nothing of the paused queue is claimed
        for _ in range(5):
            await worker_polled(database_url)
        assert await states(database_url) == ["succeeded", "queued", "queued", "queued"]
        await app.resume_queue("work")
        await wait_until(
            lambda: fetchval(
                database_url,
                "SELECT count(*) = 3 FROM akadze_jobs WHERE state = 'succeeded' AND id > $1",
                first.id,
            )
        )
        assert len(rest) == 3
    finally:
        release.set()
        worker.stop()
        await asyncio.wait_for(serving, 10)


async def worker_polled(database_url: str) -> None:
    """Wait one poll interval's worth of the database clock (0.1 s), not a bare sleep: the
    condition is that time has passed on the server."""
    start = await fetchval(database_url, "SELECT clock_timestamp()")
    await wait_until(
        lambda: fetchval(database_url, "SELECT clock_timestamp() - $1 > interval '100 milliseconds'", start)
    )


async def test_polling_sees_a_pause_within_poll_interval_without_notifications(
    app: Akadze, database_url: str
) -> None:
    ran = asyncio.Event()

    @app.task("t", queue="polled")
    async def t() -> None:
        ran.set()

    worker = Worker(app, queues=["polled"], poll_interval=timedelta(milliseconds=200), listen=False)
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: fetchval(database_url, "SELECT count(*) = 1 FROM akadze_workers"))
        await app.pause_queue("polled")
        await t.enqueue()
        for _ in range(5):
            await worker_polled(database_url)
        assert not ran.is_set()
        await app.resume_queue("polled")
        # no notification reaches this worker: its next poll takes the job
        await asyncio.wait_for(ran.wait(), 5)
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 10)


async def test_pause_and_resume_notify_every_listener(app: Akadze, database_url: str) -> None:
    got: list[asyncio.Queue[str]] = [asyncio.Queue(), asyncio.Queue()]
    conns = [await asyncpg.connect(plain(database_url)) for _ in got]
    try:
        for conn, inbox in zip(conns, got, strict=True):
            await conn.add_listener("akadze_jobs", lambda *a, inbox=inbox: inbox.put_nowait(a[3]))
        await app.pause_queue("mail")
        await app.resume_queue("mail")
        for inbox in got:
            assert [await asyncio.wait_for(inbox.get(), 5) for _ in range(2)] == ["mail", "mail"]
    finally:
        for conn in conns:
            await conn.close()


async def test_resume_wakes_a_listening_worker_at_once(app: Akadze, database_url: str) -> None:
    ran: list[str] = []
    done = asyncio.Event()

    @app.task("t", queue="sleepy")
    async def t(name: str) -> None:
        ran.append(name)
        if name == "held":
            done.set()

    await app.pause_queue("sleepy")
    await t.enqueue(name="held")
    # a poll so rare that only a notification can explain a claim within seconds
    worker = Worker(app, queues=["sleepy", "marker"], poll_interval=timedelta(seconds=120))
    marker = asyncio.Event()

    @app.task("marker", queue="marker")
    async def mark() -> None:
        marker.set()

    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: fetchval(database_url, "SELECT count(*) = 1 FROM akadze_workers"))
        # the worker listens once a job enqueued now runs at once (woken by its notification)
        await wait_until(
            lambda: fetchval(
                database_url,
                "SELECT count(*) >= 1 FROM pg_stat_activity WHERE query LIKE 'LISTEN %akadze_jobs%'",
            )
        )
        await mark.enqueue()
        await asyncio.wait_for(marker.wait(), 10)
        assert ran == []
        await app.resume_queue("sleepy")
        await asyncio.wait_for(done.wait(), 5)
        # the body has returned; its outcome is written by the completer's next batch
        await wait_until(
            lambda: fetchval(
                database_url,
                f"SELECT state = '{JobState.SUCCEEDED.value}' FROM akadze_jobs WHERE queue = 'sleepy'",
            ),
            timeout=5,
        )
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 10)


async def test_a_worker_with_limited_tasks_skips_a_paused_queue_too(app: Akadze, database_url: str) -> None:
    """Workers whose tasks have a Limit claim with claim_limited.sql: the pause holds there too,
    for the limited task and for the other tasks of the queue."""
    from akadze import Limit

    ran: list[str] = []

    @app.task("limited", queue="shared", limit=Limit(concurrency=2))
    async def limited() -> None:
        ran.append("limited")

    @app.task("plain", queue="shared")
    async def plain_task() -> None:
        ran.append("plain")

    await app.pause_queue("shared")
    await limited.enqueue()
    await plain_task.enqueue()
    assert await drain(app) == 0
    assert ran == []
    await app.resume_queue("shared")
    assert await drain(app) == 2
    assert sorted(ran) == ["limited", "plain"]
