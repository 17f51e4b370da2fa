"""Schedules fired by several worker processes at once: one job per fire time, none missing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from tests.conftest import wait_until
from tests.support import PYTHON, ROOT, fetch, fetchval, subprocess_env

WORKERS = 3
#: how long all the workers fire together
RUN_S = 10.0
APP = "tests.apps.schedule_app:app_from_env"


def _start_worker(database_url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [PYTHON, "-c", "from akadze.cli import main; main()", "worker", APP, "--log-level", "INFO"],
            cwd=ROOT,
            env=subprocess_env(database_url),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_three_workers_enqueue_each_fire_time_exactly_once(database_url: str, tmp_path: Path) -> None:
    logs = [tmp_path / f"worker-{n}.log" for n in range(WORKERS)]
    workers = [_start_worker(database_url, log) for log in logs]
    try:

        async def all_registered() -> bool:
            return bool(await fetchval(database_url, "SELECT count(*) FROM akadze_workers") == WORKERS)

        await wait_until(all_registered, timeout=30, interval=0.1)
        started_at: datetime = await fetchval(database_url, "SELECT now()")
        # the run under test: every worker fires the same every-second schedule
        await asyncio.sleep(RUN_S)
        stopped_at: datetime = await fetchval(database_url, "SELECT now()")
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        codes = [worker.wait(timeout=60) for worker in workers]
    output = [log.read_text() for log in logs]
    assert codes == [0] * WORKERS, output

    runs = await fetch(
        database_url,
        "SELECT fire_at, job_id, created_at FROM akadze_schedule_runs WHERE schedule = 'every-second' "
        "ORDER BY fire_at",
    )
    fire_ats = [run["fire_at"] for run in runs]
    # none missing: consecutive seconds covering the whole time all three workers ran
    assert fire_ats == [fire_ats[0] + timedelta(seconds=n) for n in range(len(fire_ats))]
    assert fire_ats[0] <= started_at
    assert fire_ats[-1] >= stopped_at - timedelta(seconds=2)
    assert len(fire_ats) >= RUN_S
    # none doubled: exactly one job per fire time, and no job without a fire time
    jobs = await fetch(database_url, "SELECT id FROM akadze_jobs WHERE task = 'every-second' ORDER BY id")
    assert sorted(run["job_id"] for run in runs) == [job["id"] for job in jobs]
    # enqueued on time: never early (the claim checks the database clock), late by well under grace
    assert all(timedelta(0) <= run["created_at"] - run["fire_at"] < timedelta(seconds=2) for run in runs)

    enqueued = [text.count("schedule=every-second fire_at=") for text in output]
    assert sum(enqueued) == len(runs)
    assert sum(1 for count in enqueued if count) >= 2, "the workers did not compete for the fire times"
    for text in output:
        assert "Traceback" not in text
        assert " ERROR " not in text
