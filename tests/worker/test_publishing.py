"""A worker publishes its events off the claim cycle (akadze/worker/publishing.py): while the
next claim is in flight, or before it waits. Nothing is lost or reordered by that, each event
carries the time of its commit, and a lone job's events do not wait for a poll."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

import pytest

from akadze import Akadze, Retry
from akadze.events import Event, Kind
from akadze.worker import Worker
from akadze.worker.publishing import MAX_DELAY_S, Publisher
from tests.conftest import wait_until
from tests.support import fetchval


async def test_a_serving_worker_publishes_a_lone_jobs_events_without_waiting_for_a_poll(
    app: Akadze,
) -> None:
    events: list[Event] = []
    app.subscribe(events.append)

    @app.task("lone")
    async def lone() -> None: ...

    worker = Worker(app, slots=4, poll_interval=timedelta(seconds=60))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: worker.fetcher._serving)
        await asyncio.sleep(0.3)  # the first claim found nothing: the worker waits for a wake-up
        enqueued = time.time()
        job = await lone.enqueue()
        await wait_until(lambda: any(e.kind is Kind.ENDED and e.job_id == job.id for e in events), timeout=5)
    finally:
        worker.stop()
        await serving
    mine = [e.kind for e in events if e.job_id == job.id]
    assert mine == [Kind.CLAIMED, Kind.ENDED]
    assert all(enqueued <= e.at <= time.time() for e in events if e.job_id == job.id)


async def test_a_drain_publishes_every_event_in_order(app: Akadze) -> None:
    events: list[Event] = []
    app.subscribe(events.append)
    tries: dict[int, int] = {}

    @app.task("flaky")
    async def flaky(i: int) -> None:
        tries[i] = tries.get(i, 0) + 1
        if i % 5 == 0 and tries[i] == 1:
            raise Retry(delay=timedelta(0))

    await flaky.enqueue_many([{"i": i} for i in range(300)])
    worker = Worker(app, slots=20)
    assert await worker.run(burst=True, handle_signals=False) == 360
    assert app.events.flush(5)
    by_run: dict[tuple[int, int], list[Event]] = {}
    for event in events:
        by_run.setdefault((event.job_id, event.run), []).append(event)
    assert len(by_run) == 360
    for run_events in by_run.values():
        assert [e.kind for e in run_events] == [Kind.CLAIMED, Kind.ENDED]
        claimed, ended = run_events
        # each carries the time of its commit: a claim before the write of its outcome
        assert claimed.at <= ended.at
        assert ended.duration_s is not None and ended.wait_s is not None


async def test_events_that_cannot_be_built_are_logged_and_the_drain_goes_on(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app.subscribe(lambda event: None)

    def broken(*args: object) -> None:
        raise RuntimeError("building failed")

    monkeypatch.setattr(Publisher, "_ended", broken)

    @app.task("fine")
    async def fine(i: int) -> None: ...

    await fine.enqueue_many([{"i": i} for i in range(100)])
    with caplog.at_level(logging.ERROR, logger="akadze.events"):
        assert await Worker(app, slots=10).run(burst=True, handle_signals=False) == 100
    assert "could not be published" in caplog.text
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'succeeded'") == 100


async def test_a_publication_waits_no_longer_than_max_delay_when_no_flush_comes(app: Akadze) -> None:
    """A fetcher stuck in one await (a claim on a silent connection) reaches none of its
    flushes: a timer publishes what waits."""
    publisher = Publisher(app.events, "w")
    publisher.deferring = True
    published: list[float] = []
    deferred = time.monotonic()
    publisher._later(lambda: published.append(time.monotonic()))
    publisher._later(lambda: published.append(time.monotonic()))
    assert published == []
    await wait_until(lambda: len(published) == 2, timeout=2)
    assert published[0] - deferred < MAX_DELAY_S + 0.5
