"""Issue 32, point 6: what a rescue pass that timed out because a task blocked the event loop
says, and when a limited job's place frees under complete_tx (at the block's commit: the job
is succeeded then, for every worker; docs/flow-control.md)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from akadze import Akadze, Limit, current
from akadze.worker import Worker, rescuer
from tests.conftest import wait_until


async def test_a_rescue_pass_timed_out_by_a_blocked_event_loop_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def blocked_pass(*args: Any, **kwargs: Any) -> list[Any]:
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[None] = loop.create_future()
        time.sleep(1.5)  # a task blocks the loop (as `time.sleep` in an async def does)...
        loop.call_soon(reply.set_result, None)  # ...while the database's reply comes in
        await reply
        return []

    monkeypatch.setattr(rescuer, "rescue_lost", blocked_pass)
    worker = SimpleNamespace(
        lost_after_s=0.2,
        rescue_interval_s=60.0,
        app=SimpleNamespace(engine=None, hooks=SimpleNamespace(on_transition=()), events=None),
    )
    caplog.set_level(logging.WARNING, logger="akadze.worker")
    service = asyncio.create_task(rescuer.rescuer_service(worker))  # type: ignore[arg-type]
    try:
        await wait_until(lambda: any("rescue pass" in r.getMessage() for r in caplog.records), timeout=10)
    finally:
        service.cancel()
    [line] = [r.getMessage() for r in caplog.records if "rescue pass" in r.getMessage()]
    assert "event loop was held up" in line and "not waiting for the database" in line, line
    assert "rescue pass failed (TimeoutError)" not in line


def test_a_timeout_on_time_is_the_databases() -> None:
    line = rescuer.timed_out("rescue pass", 30.0, 30.01)
    assert line == "rescue pass failed (TimeoutError: no reply from the database within 30s)"
    assert "event loop" in rescuer.timed_out("rescue pass", 30.0, 34.0)


async def test_a_limited_jobs_place_frees_when_its_complete_tx_block_commits(app: Akadze) -> None:
    """The decision (docs/flow-control.md, "complete_tx and the place"): the job is succeeded
    once the block commits, for every worker; code after the block runs outside the limit."""
    release = asyncio.Event()
    after_block = asyncio.Event()
    started: list[int] = []

    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None:
        started.append(n)
        if n == 0:
            async with current().complete_tx():
                pass
            after_block.set()
            await release.wait()  # still in the body, after the block

    await one.enqueue_many([{"n": 0}, {"n": 1}])
    worker = Worker(app, slots=4, poll_interval=timedelta(milliseconds=100))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await asyncio.wait_for(after_block.wait(), 10)
        await wait_until(lambda: started == [0, 1], timeout=10)
        assert not release.is_set()  # job 1 started while job 0's body still ran
    finally:
        release.set()
        worker.stop()
        await serving


async def test_a_place_a_complete_tx_block_freed_is_taken_at_the_next_claim(app: Akadze) -> None:
    """The worker whose run's block wrote the end looks at the group at once, as after any end
    it writes, not at the recheck (ten poll intervals: 5 minutes here)."""
    started: list[int] = []

    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None:
        started.append(n)
        async with current().complete_tx():
            pass

    await one.enqueue_many([{"n": 0}, {"n": 1}])
    worker = Worker(app, slots=4, poll_interval=timedelta(seconds=30))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: started == [0, 1], timeout=10)
    finally:
        worker.stop()
        await serving
