"""``akadze worker --cancel-grace SECONDS`` in a real worker process (issue 33): a run that
ignores its cancel request ends cancelled once the grace has passed."""

from __future__ import annotations

import signal
from collections.abc import Callable

from akadze import Akadze, JobState, request_cancel
from tests.conftest import wait_until
from tests.worker.test_faults import WorkerProcess, app, marks, start_worker  # noqa: F401 (fixtures)


async def test_akadze_worker_cancel_grace_stops_a_run_that_ignores_its_cancel_request(
    database_url: str,
    start_worker: Callable[..., WorkerProcess],  # noqa: F811
    app: Akadze,  # noqa: F811
) -> None:
    """The command line's --cancel-grace, in a real worker process: a run that sleeps for ten
    minutes, ignoring its cancel request, ends cancelled soon after the request."""
    worker = start_worker("--cancel-grace", "0.5")
    job = await app.get_task("faults.hold").enqueue(seconds=600)

    async def started() -> bool:
        return bool(await marks(database_url, "started"))

    await wait_until(started, timeout=60)
    async with app.engine.begin() as conn:
        assert await request_cancel(conn, job.id)
    done = await app.wait_for(job.id, timeout=60)
    assert done.state is JobState.CANCELLED, worker.output()
    assert "still running 0.5s after its cancel request" in worker.output()
    worker.signal(signal.SIGTERM)
    assert await worker.exit_code() == 0, worker.output()
