"""A worker's stop always ends: a cancel is never lost between a wake-up and its wait, and a
service that ignores its cancel is cancelled again, then left behind with a warning.

CI once saw a non-burst worker stopped a second after it started wait for good: its listener
was cancelled as the LISTEN probe arrived, and ``asyncio.wait_for`` (Python 3.11) returned
the probe and dropped the cancel; the stop waited for the listener, which waited for a lost
connection. Looping the graceful-stop test reproduced it once in 10-60 runs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

import pytest

from akadze import Akadze
from akadze.worker import services
from akadze.worker.listener import Listener
from akadze.worker.services import cancel_services


async def test_a_listener_cancelled_as_its_probe_arrives_ends(app: Akadze) -> None:
    listener = Listener(app.engine, worker_id="w-probe", queues={"default"}, wake=lambda: None)

    class ProbeWithTheStop(asyncio.Event):
        """The probe arrives in the same turn of the loop as the stop's cancel."""

        async def wait(self) -> Literal[True]:
            def arrive() -> None:
                self.set()
                running.cancel()

            asyncio.get_running_loop().call_soon(arrive)
            return await super().wait()

    listener._probed = ProbeWithTheStop()
    running = asyncio.create_task(listener.run())
    done, _ = await asyncio.wait([running], timeout=10)
    assert done == {running}, "the listener kept running after it was cancelled"
    assert running.cancelled()


async def test_a_service_that_ignores_its_cancel_does_not_hold_the_stop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(services, "_CANCEL_WAIT_S", 0.1)
    cancels = {"once": 0, "never": 0}
    released = asyncio.Event()

    async def ignores_one_cancel() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancels["once"] += 1
        await asyncio.sleep(3600)

    async def ignores_every_cancel() -> None:
        while not released.is_set():
            try:
                await released.wait()
            except asyncio.CancelledError:
                cancels["never"] += 1

    once = services.start_task(ignores_one_cancel(), "once")
    never = services.start_task(ignores_every_cancel(), "never")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="akadze.worker"):
        await asyncio.wait_for(cancel_services([once, never]), 5)
    assert once.cancelled() and cancels["once"] == 1
    assert not never.done() and cancels["never"] == services._CANCEL_ROUNDS
    assert "did not stop when cancelled: akadze-never" in caplog.text
    released.set()
    await never


async def test_a_task_started_beside_the_worker_that_raises_is_logged_and_ends_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The listener runs as such a task: an error it lets out is a log line naming it, not
    asyncio's "Task exception was never retrieved" at the interpreter's exit."""

    async def fails() -> None:
        raise RuntimeError("listener broke")

    with caplog.at_level(logging.ERROR, logger="akadze.worker"):
        task = services.start_task(fails(), "listener")
        await asyncio.wait([task], timeout=5)
    assert task.done() and task.exception() is None
    assert "worker service listener stopped" in caplog.text
    await cancel_services([task])
