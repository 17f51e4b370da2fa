"""A task that holds the GIL in one long C call does not make its worker look dead, while a
stopped (SIGSTOP) worker still does (issue 12, point 2): the heartbeat beats from a process
of its own, which watches its worker's state."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from akadze import Akadze, JobState
from akadze.worker.heartbeat import process_possible
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import fetch, fetchval
from tests.worker.test_faults import WorkerProcess, app, jobs, marks, start_worker  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not process_possible(), reason="the heartbeat process needs /proc (Linux)"),
]


async def test_a_task_holding_the_gil_past_lost_after_does_not_make_its_worker_look_dead(
    app: Akadze,  # noqa: F811
    database_url: str,
    start_worker: Callable[..., WorkerProcess],  # noqa: F811
) -> None:
    worker = start_worker("--lost-after", "2")
    beats: set[object] = set()

    async def beating() -> bool:
        # from its first beat on: a busy machine may take a second to start a process
        beats.update(
            row["heartbeat_at"]
            for row in await fetch(database_url, "SELECT heartbeat_at FROM akadze_workers")
        )
        return len(beats) >= 2

    await wait_until(beating, timeout=30, interval=0.1)
    # one C call that holds the GIL for 6 s of wall time: three times lost_after
    job = await app.get_task("faults.gil").enqueue(seconds=6.0)

    async def started() -> bool:
        return bool(await marks(database_url, "started"))

    await wait_until(started, timeout=30)
    began = time.monotonic()
    passes: list[int] = []

    # rescue passes from elsewhere while the run holds the GIL for several times lost_after
    async def finished_without_a_rescue() -> bool:
        running = (await jobs(app, [job.id]))[0].state is JobState.RUNNING
        assert await rescue_lost(app.engine) == [], worker.output()
        assert (
            await fetchval(database_url, "SELECT count(*) FROM akadze_workers WHERE pid = $1", worker.pid)
            == 1
        )
        passes.append(1)
        return not running

    await wait_until(finished_without_a_rescue, timeout=120, interval=0.2)
    [after] = await jobs(app, [job.id])
    assert (after.state, after.attempt, after.run, after.errors) == (JobState.SUCCEEDED, 1, 1, ())
    held = float(after.result)  # type: ignore[arg-type]  # (the task returns a float)
    assert held > 4, f"the run held the GIL only {held:.1f} s: not twice lost_after"
    assert time.monotonic() - began > held
    assert len(passes) > 5  # rescue passes ran while it held the GIL
    assert "declared lost" not in worker.output()
    worker.signal(signal.SIGTERM)
    assert await worker.exit_code() == 0, worker.output()


async def test_a_stopped_worker_is_still_declared_lost_and_its_heartbeat_process_ends_with_it(
    app: Akadze,  # noqa: F811
    database_url: str,
    start_worker: Callable[..., WorkerProcess],  # noqa: F811
) -> None:
    job = await app.get_task("faults.hold").enqueue(seconds=60)
    worker = start_worker("--lost-after", "1")

    async def started() -> bool:
        return bool(await marks(database_url, "started"))

    await wait_until(started, timeout=30)
    beat_pid = await _beat_child(worker.pid)
    worker.signal(signal.SIGSTOP)

    async def rescued() -> bool:
        await rescue_lost(app.engine)
        return (await jobs(app, [job.id]))[0].state is not JobState.RUNNING

    await wait_until(rescued, timeout=30, interval=0.2)
    worker.signal(signal.SIGCONT)
    worker.signal(signal.SIGKILL)
    await worker.exit_code()

    def gone() -> bool:
        try:
            with open(f"/proc/{beat_pid}/stat") as stat:
                return stat.read().split(")")[-1].split()[0] == "Z"
        except OSError:
            return True

    await wait_until(gone, timeout=15)


async def _beat_child(pid: int) -> int:
    async def found() -> bool:
        return bool(_children(pid))

    await wait_until(found, timeout=15)
    [child] = _children(pid)
    with open(f"/proc/{child}/cmdline", "rb") as cmdline:
        assert cmdline.read().split(b"\0")[2].endswith(b"akadze/worker/beat.py")
    return child


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    except OSError:
        return []
