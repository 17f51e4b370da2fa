"""Helpers for users' tests: run every ready job in-process with the real worker code."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from akadze.app import Akadze


async def drain(app: Akadze, queues: Sequence[str] | None = None, *, slots: int = 10) -> int:
    """Run every ready job of ``queues`` (default: all of the app's) until none is ready.

    Jobs that become ready while draining (a retry without delay, a follow-up enqueued by a
    task) run too; delayed ones do not. Returns the number of runs.
    """
    from akadze.worker import Worker

    worker = Worker(
        app,
        queues=queues,
        slots=slots,
        poll_interval=timedelta(milliseconds=200),
        heartbeat_interval=timedelta(seconds=5),
        lost_after=timedelta(seconds=30),
        listen=False,
    )
    return await worker.run(burst=True, handle_signals=False)
