"""Worker processes under real signals: SIGKILL, SIGSTOP/SIGCONT, SIGTERM, and three workers
sharing two thousand jobs. Each worker is ``python -m akadze.cli worker`` on tests/apps/worker_faults.py,
with short liveness settings (lost after 2 s), so every scenario ends within seconds."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from akadze import Akadze, Job, JobState
from akadze.worker.rescuer import rescue_lost
from tests.apps import worker_faults
from tests.conftest import wait_until
from tests.support import PYTHON, ROOT, execute, fetch, fetchval, subprocess_env

pytestmark = pytest.mark.slow

#: how late a heartbeat may be before others rescue the worker's jobs, in the worker processes
LOST_AFTER = "2"


class WorkerProcess:
    """One ``akadze worker`` process; its log goes to a file the test can show on failure."""

    def __init__(self, database_url: str, log: Path, *options: str) -> None:
        self.log = log
        self._log_file = log.open("w")
        self.process = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "akadze.cli",
                "worker",
                "tests.apps.worker_faults:app",
                "--lost-after",
                LOST_AFTER,
                "--poll-interval",
                "0.2",
                *options,
            ],
            cwd=ROOT,
            env=subprocess_env(database_url),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.process.pid

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    async def exit_code(self, timeout: float = 30) -> int:
        code = await asyncio.to_thread(self.process.wait, timeout)
        self._log_file.close()
        return code

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        return self.log.read_text()

    def cleanup(self) -> None:
        if self.alive:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)
        self._log_file.close()


@pytest.fixture
def start_worker(database_url: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(*options: str) -> WorkerProcess:
        worker = WorkerProcess(database_url, tmp_path / f"worker-{len(started)}.log", *options)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.cleanup()


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[Akadze]:
    """The same tasks as the worker processes, on this test's database, to enqueue and read."""
    await execute(database_url, *worker_faults.TABLES)
    application = Akadze(database_url=database_url)
    for task in worker_faults.app.tasks.values():
        application.register(
            task.fn,
            name=task.name,
            queue=task.queue,
            max_attempts=task.options.max_attempts,
        )
    yield application
    await application.dispose()


async def jobs(app: Akadze, ids: list[int]) -> list[Job]:
    found = [await app.get_job(job_id) for job_id in ids]
    assert all(job is not None for job in found)
    return found  # type: ignore[return-value]


async def marks(database_url: str, what: str) -> list[tuple[int, int, int]]:
    rows = await fetch(database_url, "SELECT job_id, run, pid FROM marks WHERE what = $1 ORDER BY 1, 2", what)
    return [tuple(row) for row in rows]  # type: ignore[misc]


async def all_in(app: Akadze, ids: list[int], state: JobState) -> bool:
    return all(job.state is state for job in await jobs(app, ids))


async def test_jobs_of_a_killed_worker_are_rescued_with_an_attempt_spent_and_all_finish(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    enqueued = await app.get_task("faults.hold").enqueue_many([{"seconds": 60}] * 4)
    ids = [job.id for job in enqueued]
    victim = start_worker("--slots", "4")

    async def all_started() -> bool:
        return len(await marks(database_url, "started")) == 4

    await wait_until(all_started, timeout=30)
    rescuer = start_worker()  # it starts while the victim holds every job
    victim.signal(signal.SIGKILL)
    assert await victim.exit_code() == -signal.SIGKILL
    await wait_until(lambda: all_in(app, ids, JobState.SUCCEEDED), timeout=30)
    for job in await jobs(app, ids):
        assert (job.attempt, job.run, job.result) == (2, 2, rescuer.pid)
        assert [(e.attempt, e.type) for e in job.errors] == [(1, "akadze.WorkerLost")]
    assert await marks(database_url, "started") == [
        (i, r, p) for i in ids for r, p in ((1, victim.pid), (2, rescuer.pid))
    ]
    assert await marks(database_url, "finished") == [(i, 2, rescuer.pid) for i in ids]
    rescuer.signal(signal.SIGTERM)
    assert await rescuer.exit_code() == 0, rescuer.output()


async def test_a_crash_inside_complete_tx_leaves_no_half_written_state(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    job = await app.get_task("faults.step").enqueue(seconds=60)
    victim = start_worker()

    async def in_block() -> bool:
        return bool(await marks(database_url, "in block"))

    await wait_until(in_block, timeout=30)
    rescuer = start_worker()
    victim.signal(signal.SIGKILL)
    await victim.exit_code()
    assert await fetchval(database_url, "SELECT count(*) FROM ledger") == 0

    async def stored() -> bool:
        # complete_tx commits the state; the body's return value is written just after it
        [job_now] = await jobs(app, [job.id])
        return job_now.state is JobState.SUCCEEDED and job_now.result is not None

    await wait_until(stored, timeout=30)
    [after] = await jobs(app, [job.id])
    assert (after.attempt, after.run, after.result) == (2, 2, rescuer.pid)
    rows = await fetch(database_url, "SELECT job_id, run, pid FROM ledger")
    assert [tuple(r) for r in rows] == [(job.id, 2, rescuer.pid)]
    rescuer.signal(signal.SIGTERM)
    assert await rescuer.exit_code() == 0, rescuer.output()


async def test_a_stopped_worker_resumed_after_a_rescue_cannot_complete_and_carries_on_serving(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    # one run inside complete_tx, one plain run: neither may complete after the rescue
    in_tx = await app.get_task("faults.step").enqueue(seconds=3)
    plain_run = await app.get_task("faults.hold").enqueue(seconds=3)
    ids = [in_tx.id, plain_run.id]
    stalled = start_worker()

    async def both_running() -> bool:
        return bool(await marks(database_url, "in block")) and len(await marks(database_url, "started")) == 2

    await wait_until(both_running, timeout=30)
    other = start_worker()
    stalled.signal(signal.SIGSTOP)
    await wait_until(lambda: all_in(app, ids, JobState.SUCCEEDED), timeout=30)
    other.signal(signal.SIGTERM)
    assert await other.exit_code() == 0, other.output()
    rescued = await jobs(app, ids)

    stalled.signal(signal.SIGCONT)

    async def fenced() -> bool:
        return bool(await marks(database_url, "fenced"))

    await wait_until(fenced, timeout=30)
    # the plain run ended too; its outcome was refused by the fencing token
    await wait_until(lambda: f"job_id={plain_run.id} run=1 outcome dropped" in stalled.output(), timeout=15)
    assert (plain_run.id, 1, stalled.pid) in await marks(database_url, "finished")
    for job in await jobs(app, ids):
        assert (job.state, job.run, job.attempt, job.result) == (JobState.SUCCEEDED, 2, 2, other.pid)
    rows = await fetch(database_url, "SELECT job_id, run, pid FROM ledger")
    assert [tuple(r) for r in rows] == [(in_tx.id, 2, other.pid)], "the stalled run's writes must roll back"

    # it registered again and serves: the next job is run by it, the only worker left
    async def registered() -> bool:
        return bool(
            await fetchval(database_url, "SELECT count(*) FROM akadze_workers WHERE pid = $1", stalled.pid)
        )

    await wait_until(registered, timeout=15)
    follow_up = await app.get_task("faults.hold").enqueue(seconds=0)
    await wait_until(lambda: all_in(app, [follow_up.id], JobState.SUCCEEDED), timeout=15)
    [served] = await jobs(app, [follow_up.id])
    assert served.result == stalled.pid
    assert stalled.alive
    assert await jobs(app, ids) == rescued
    stalled.signal(signal.SIGTERM)
    assert await stalled.exit_code() == 0, stalled.output()


async def test_sigterm_mid_job_loses_nothing_and_leaves_nothing_running(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    hold = app.get_task("faults.hold")
    short = [job.id for job in await hold.enqueue_many([{"seconds": 1}] * 2)]
    long = [job.id for job in await hold.enqueue_many([{"seconds": 60}] * 2)]
    worker = start_worker("--slots", "4", "--shutdown-timeout", "2.5")

    async def all_started() -> bool:
        return len(await marks(database_url, "started")) == 4

    await wait_until(all_started, timeout=30)
    stopping = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert await worker.exit_code() == 0, worker.output()
    assert time.monotonic() - stopping < 2.5 + 5
    for job in await jobs(app, short):
        assert (job.state, job.attempt) == (JobState.SUCCEEDED, 1)
    for job in await jobs(app, long):
        # put back for another worker, no attempt spent, nothing recorded against the job
        assert (job.state, job.attempt, job.errors, job.worker_id) == (JobState.QUEUED, 0, (), None)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'running'") == 0
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workers") == 0

    # nothing was lost: a burst worker finishes the jobs put back
    burst = start_worker("--burst")
    assert await burst.exit_code() == 0, burst.output()
    for job in await jobs(app, long):
        assert (job.state, job.attempt, job.run) == (JobState.SUCCEEDED, 1, 2)


async def test_three_workers_run_two_thousand_jobs_exactly_once(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    workers = [start_worker("--slots", "10") for _ in range(3)]

    async def registered() -> bool:
        return await fetchval(database_url, "SELECT count(*) FROM akadze_workers") == 3

    await wait_until(registered, timeout=30)
    enqueued = await app.get_task("faults.once").enqueue_many([{"n": n} for n in range(2000)])

    async def all_done() -> bool:
        return (
            await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'succeeded'") == 2000
        )

    await wait_until(all_done, timeout=90, interval=0.2)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert await worker.exit_code() == 0, worker.output()
    rows = await fetch(database_url, "SELECT job_id, pid FROM once")
    assert sorted(row["job_id"] for row in rows) == sorted(job.id for job in enqueued)
    assert len({row["pid"] for row in rows}) > 1, "the work was shared"
    shape = await fetch(
        database_url,
        "SELECT state, attempt, run, jsonb_array_length(errors) AS errors, count(*) FROM akadze_jobs "
        "GROUP BY 1, 2, 3, 4",
    )
    assert [tuple(row) for row in shape] == [("succeeded", 1, 1, 0, 2000)]


async def test_a_task_blocking_the_event_loop_does_not_make_its_worker_look_dead(
    app: Akadze, database_url: str, start_worker: Callable[..., WorkerProcess]
) -> None:
    job = await app.get_task("faults.block").enqueue(seconds=3)
    worker = start_worker("--lost-after", "1")

    async def started() -> bool:
        return bool(await marks(database_url, "started"))

    await wait_until(started, timeout=30)
    passes: list[int] = []

    # rescue passes from elsewhere while the loop is blocked for three times lost_after
    async def finished_without_a_rescue() -> bool:
        running = (await jobs(app, [job.id]))[0].state is JobState.RUNNING
        assert await rescue_lost(app.engine) == []
        assert (
            await fetchval(database_url, "SELECT count(*) FROM akadze_workers WHERE pid = $1", worker.pid)
            == 1
        )
        passes.append(1)
        return not running

    await wait_until(finished_without_a_rescue, timeout=30, interval=0.2)
    assert len(passes) >= 5
    [after] = await jobs(app, [job.id])
    assert (after.state, after.attempt, after.run, after.errors) == (JobState.SUCCEEDED, 1, 1, ())
    worker.signal(signal.SIGTERM)
    assert await worker.exit_code() == 0, worker.output()
