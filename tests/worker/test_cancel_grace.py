"""Worker(cancel_grace=...): a run that ignores its cancel request is stopped once the grace has
passed since the worker saw the request, and its job ends cancelled (issue 33). An async
task's asyncio task is cancelled; a sync task's thread cannot be stopped, so its run ends and
the thread runs on; a complete_tx() block is never cut. Without a grace nothing is stopped."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest

from akadze import Akadze, JobState, current, request_cancel
from akadze.context import run_of
from akadze.worker import Worker
from akadze.worker.cancels import CancelGrace
from tests.conftest import wait_until
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


@asynccontextmanager
async def serving(app: Akadze, **options: Any) -> AsyncIterator[Worker]:
    options.setdefault("poll_interval", timedelta(milliseconds=100))
    options.setdefault("heartbeat_interval", timedelta(milliseconds=100))
    options.setdefault("lost_after", timedelta(seconds=3))
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


async def test_an_async_run_that_ignores_its_cancel_request_is_stopped_and_ends_cancelled(
    app: Akadze,
) -> None:
    seen: list[bool] = []
    cleaned: list[str] = []

    @app.task("stubborn")
    async def stubborn() -> str:
        try:
            while True:  # never looks at cancel_requested
                seen.append(current().cancel_requested)
                await asyncio.sleep(0.02)
        finally:
            cleaned.append("finally ran")

    @app.task("after")
    async def after() -> str:
        return "ran"

    job = await stubborn.enqueue()
    async with serving(app, slots=1, cancel_grace=timedelta(milliseconds=300)) as worker:
        await wait_until(lambda: bool(seen))
        await cancel(app, job.id)
        done = await app.wait_for(job.id, timeout=20)
        assert (done.state, done.result) == (JobState.CANCELLED, None)
        assert done.errors[-1].type == "akadze.Cancel"
        assert "cancel grace" in done.errors[-1].message
        assert seen[-1] is True, "the run went on after the request was seen"
        assert cleaned == ["finally ran"], "the task's own cleanup ran"
        # the worker carries on: its one slot is free again
        next_job = await after.enqueue()
        assert (await app.wait_for(next_job.id, timeout=20)).result == "ran"
        assert worker.cancel_grace._timers == {}


async def test_a_sync_run_ends_cancelled_while_its_thread_runs_on(app: Akadze) -> None:
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []

    @app.task("sync_stubborn")
    def sync_stubborn() -> str:
        started.set()
        release.wait(60)  # ignores cancel_requested; a thread cannot be interrupted
        finished.append("thread returned")
        return "late"

    job = await sync_stubborn.enqueue()
    async with serving(app, cancel_grace=timedelta(milliseconds=200)):
        await asyncio.to_thread(started.wait, 30)
        await cancel(app, job.id)
        done = await app.wait_for(job.id, timeout=20)
        assert done.state is JobState.CANCELLED
        assert finished == [], "the job ended while its thread still runs"
        release.set()
        await wait_until(lambda: finished == ["thread returned"])
    after = await app.get_job(job.id)
    assert after is not None and (after.state, after.result) == (JobState.CANCELLED, None)


async def test_a_complete_tx_block_is_never_cut_by_the_grace(
    app: Akadze, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_block = asyncio.Event()
    release = asyncio.Event()
    asked_in_block: list[bool] = []
    original = CancelGrace._stop

    def spy(self: CancelGrace, key: tuple[int, int]) -> None:
        ctx = run_of(self.app, key[0])
        asked_in_block.append(ctx is not None and ctx.in_block)
        original(self, key)

    monkeypatch.setattr(CancelGrace, "_stop", spy)

    @app.task("block")
    async def block() -> str:
        async with current().complete_tx():
            in_block.set()
            await release.wait()
        return "committed"

    job = await block.enqueue()
    async with serving(app, cancel_grace=timedelta(milliseconds=100)):
        await asyncio.wait_for(in_block.wait(), 30)
        await cancel(app, job.id)
        # the grace ended while the block ran, and the stop was put off at least twice
        await wait_until(lambda: asked_in_block.count(True) >= 2, timeout=20)
        release.set()
        done = await app.wait_for(job.id, timeout=20)
        assert done.state is JobState.SUCCEEDED

        async def stored() -> bool:  # the value returned after the block is stored a moment later
            after = await app.get_job(job.id)
            return after is not None and after.result == "committed"

        await wait_until(stored, timeout=20)


async def test_without_a_grace_a_cancel_request_stops_nothing(app: Akadze) -> None:
    release = asyncio.Event()
    seen: list[bool] = []

    @app.task("slow")
    async def slow() -> str:
        while not release.is_set():
            seen.append(current().cancel_requested)
            await asyncio.sleep(0.02)
        return "finished"

    job = await slow.enqueue()
    async with serving(app) as worker:
        await wait_until(lambda: bool(seen))
        await cancel(app, job.id)
        await wait_until(lambda: seen[-1] is True)
        marked_at = len(seen)
        await wait_until(lambda: len(seen) > marked_at + 10)  # still running after the request
        assert worker.cancel_grace._timers == {}
        release.set()
        done = await app.wait_for(job.id, timeout=20)
    # returning normally after a cancel request: succeeded, with its result (docs/outcomes.md)
    assert (done.state, done.result) == (JobState.SUCCEEDED, "finished")


def test_a_negative_grace_is_refused(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        return None

    with pytest.raises(ValueError, match="cancel_grace must be a timedelta of 0 or more"):
        Worker(app, cancel_grace=timedelta(seconds=-1))
    with pytest.raises(ValueError, match="cancel_grace"):
        Worker(app, cancel_grace=5)  # type: ignore[arg-type]  # (the mistake under test)
